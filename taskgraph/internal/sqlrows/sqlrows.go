package sqlrows

import (
	"database/sql"
	"strconv"
	"strings"
)

// Query runs query with args on db and returns every row, each value
// rendered to text by render (which decides how NULL, bytes and times
// read).
func Query(db *sql.DB, query string, render func(any) string, args ...any) ([][]string, error) {
	rows, err := db.Query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = render(v)
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// Dollar rewrites the ? placeholders of query to $1, $2, ...
// (PostgreSQL), leaving question marks inside quoted strings and
// identifiers alone.
func Dollar(query string) string {
	var b strings.Builder
	n := 0
	var quote rune
	for _, r := range query {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
