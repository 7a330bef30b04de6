package tgpostgres

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// An update's SQL text depends only on its shape (tgdriver.Shape), so one
// text serves every update of that shape and pgx prepares it once per
// connection. The text updates any number of tasks: its values are arrays,
// one element per task, joined to tasks through unnest, so the updates of
// one shape in a batch are one statement (unless they update one task more
// than once: see groupUpdates).

// updateCache holds the text of each update shape.
type updateCache struct {
	mu   sync.RWMutex
	text map[shapeText]string
}

// shapeText names the text of an update shape, plain or checked (Apply's
// under a pipelined COMMIT: checkedText), returning the task's columns
// (Fetch, UpdateTask) or only which elements updated a row (Apply).
type shapeText struct {
	sh      tgdriver.UpdateShape
	checked bool
	rows    bool
}

func newUpdateCache() *updateCache {
	return &updateCache{text: map[shapeText]string{}}
}

// setTypes and guardTypes are the SQL array types of each settable column
// and of each tested value (tgdriver.Set* and tgdriver.Guard* order).
var (
	setTypes = [...]string{"text", "text", "bigint", "bytea", "bigint", "bigint", "bigint", "bigint", "text", "text", "text", "bigint", "bigint",
		"text", "bigint", "bigint", "float8", "bigint", "bigint", "float8", "bigint"}
	guardTypes = [...]string{"bigint", "text", "bytea", "bigint", "bigint", "bigint"}
)

func (c *updateCache) sql(sh tgdriver.UpdateShape, checked, rows bool) string {
	k := shapeText{sh, checked, rows}
	c.mu.RLock()
	q, ok := c.text[k]
	c.mu.RUnlock()
	if ok {
		return q
	}
	q = updateText(sh, rows)
	if checked {
		q = checkedText(sh, q)
	}
	c.mu.Lock()
	c.text[k] = q
	c.mu.Unlock()
	return q
}

// checkedText wraps q, the statement of shape sh, so that it fails on the
// server (apply_guard, migration 0022: SQLSTATE TG001, ErrGuardFailed)
// unless it changed a row for every element of its key array: a
// statement of a round whose COMMIT follows in the same round trip must
// abort the transaction itself, before the COMMIT runs. The count is over
// the rows the update returned (its CTE runs once, whatever reads it), and
// the one-row aggregate is the preserved side of the join, so it runs even
// when none came back (an element never matches nothing: Apply sends no
// empty group).
func checkedText(sh tgdriver.UpdateShape, q string) string {
	key := 2 // updated_at_ms, then the key array, after the set values
	for i := range sh.Set {
		if sh.Set[i] == tgdriver.FormValue {
			key++
		}
	}
	keyType := "bigint"
	if sh.ByTaskID {
		keyType = "text"
	}
	return fmt.Sprintf("WITH w AS (%s), g AS (SELECT apply_guard(count(*), cardinality($%d::%s[])) AS ok FROM w) SELECT w.* FROM g LEFT JOIN w ON g.ok", q, key, keyType)
}

// updateText writes the statement of shape sh. Its parameters are arrays:
// the set values (in tgdriver.Set* order), updated_at_ms, the seq or task
// id, then the tested values (in tgdriver.Guard* order); then the accepted
// states (one text[] for every row). It returns the ordinal of each updated
// row's element (from 1), then, when rows, the task's columns.
func updateText(sh tgdriver.UpdateShape, rows bool) string {
	n := 0
	next := func() string { n++; return fmt.Sprintf("$%d", n) }
	var sets, arrays, names []string
	for i, c := range tgdriver.SetColumns {
		switch sh.Set[i] {
		case tgdriver.FormValue:
			name := fmt.Sprintf("s%d", i)
			arrays = append(arrays, next()+"::"+setTypes[i]+"[]")
			names = append(names, name)
			sets = append(sets, c+" = u."+name)
		case tgdriver.FormNull:
			sets = append(sets, c+" = NULL")
		}
		if i == tgdriver.SetAttempts && sh.AddAttempt {
			sets = append(sets, "attempts = t.attempts + 1")
		}
	}
	arrays = append(arrays, next()+"::bigint[]")
	names = append(names, "upd")
	sets = append(sets, "updated_at_ms = u.upd")
	key, keyType := "seq", "bigint"
	if sh.ByTaskID {
		key, keyType = "task_id", "text"
	}
	arrays = append(arrays, next()+"::"+keyType+"[]")
	names = append(names, "k")
	where := []string{"t." + key + " = u.k"}
	for j, c := range tgdriver.GuardColumns {
		switch sh.Guard[j] {
		case tgdriver.FormValue:
			name := fmt.Sprintf("g%d", j)
			arrays = append(arrays, next()+"::"+guardTypes[j]+"[]")
			names = append(names, name)
			where = append(where, "t."+c+" "+tgdriver.GuardOps[j]+" u."+name)
		case tgdriver.FormNull:
			where = append(where, "t."+c+" IS NULL")
		}
	}
	if sh.States != "" {
		where = append(where, "t.state = ANY("+next()+"::text[])")
	}
	if sh.NoUnmet {
		where = append(where, "t.unmet = 0")
	}
	if sh.NotPaused {
		where = append(where, notPausedT)
	}
	returning := " RETURNING u.ord"
	if rows {
		returning += ", " + prefixed("t.", taskColumns)
	}
	return "UPDATE tasks t SET " + strings.Join(sets, ", ") +
		" FROM unnest(" + strings.Join(arrays, ", ") + ") WITH ORDINALITY AS u(" + strings.Join(names, ", ") + ", ord)" +
		" WHERE " + strings.Join(where, " AND ") + returning
}

// prefixed qualifies every column of a column list with prefix.
func prefixed(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = prefix + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// shapeGroup collects the updates of one shape and one round in a batch:
// one statement.
type shapeGroup struct {
	sh    tgdriver.UpdateShape
	round int
	// at maps each element (in order) to its update's index in the batch.
	at     []int
	sets   [len(setTypes)]column
	upd    column
	key    column
	guards [len(guardTypes)]column
	states []string
}

// column is one array parameter of an update statement.
type column struct {
	ints   []int64
	texts  []string
	bytes  [][]byte
	floats []float64
}

func (c *column) add(v any) {
	switch v := v.(type) {
	case int64:
		c.ints = append(c.ints, v)
	case string:
		c.texts = append(c.texts, v)
	case []byte:
		c.bytes = append(c.bytes, v)
	case float64:
		c.floats = append(c.floats, v)
	default:
		panic(fmt.Sprintf("tgpostgres: update value of type %T", v))
	}
}

func (c *column) arg(typ string) any {
	switch typ {
	case "bigint":
		if c.ints == nil {
			return []int64{}
		}
		return c.ints
	case "text":
		if c.texts == nil {
			return []string{}
		}
		return c.texts
	case "float8":
		if c.floats == nil {
			return []float64{}
		}
		return c.floats
	default:
		if c.bytes == nil {
			return [][]byte{}
		}
		return c.bytes
	}
}

// groupUpdates groups ups into statements, one per shape and round, and
// returns them in the order they must run: by round, then in the order
// each group first appears.
//
// The updates must apply in the order given (tgdriver.Tx.Fetch), each to
// the task as the ones before it left it. Updates of different tasks
// commute, but one statement updates a row once however many of its
// elements match it, and its statement may run before that of an update
// given earlier. So an update goes in the round after the last earlier
// update that may touch its task: one with the same seq or the same task
// id, or any addressed the other way (a seq and an id may name one task).
// Within a round no two updates touch one task, so the order of its
// statements does not matter. A batch that updates each task once, all by
// id or all by seq (the hot path's), is one round: one statement per shape.
func groupUpdates(ups []tgdriver.TaskUpdate) ([]*shapeGroup, error) {
	type groupKey struct {
		sh    tgdriver.UpdateShape
		round int
	}
	var groups []*shapeGroup
	byKey := map[groupKey]*shapeGroup{}
	// The round after the last update of each task, by seq and by id, and
	// after the last update by seq and by id at all.
	nextBySeq, nextByID := map[int64]int{}, map[string]int{}
	afterSeqs, afterIDs := 0, 0
	for i, u := range ups {
		sh, vals, gvals, err := tgdriver.Shape(u)
		if err != nil {
			return nil, err
		}
		var round int
		if sh.ByTaskID {
			round = max(nextByID[u.TaskID], afterSeqs)
			nextByID[u.TaskID] = round + 1
			afterIDs = max(afterIDs, round+1)
		} else {
			round = max(nextBySeq[u.Seq], afterIDs)
			nextBySeq[u.Seq] = round + 1
			afterSeqs = max(afterSeqs, round+1)
		}
		g := byKey[groupKey{sh, round}]
		if g == nil {
			g = &shapeGroup{sh: sh, round: round, states: u.Guard.States}
			byKey[groupKey{sh, round}] = g
			groups = append(groups, g)
		}
		g.at = append(g.at, i)
		vi := 0
		for c := range sh.Set {
			if sh.Set[c] == tgdriver.FormValue {
				g.sets[c].add(vals[vi])
				vi++
			}
		}
		g.upd.add(u.Set.UpdatedAtMS)
		if sh.ByTaskID {
			g.key.add(u.TaskID)
		} else {
			g.key.add(u.Seq)
		}
		gi := 0
		for j := range sh.Guard {
			if sh.Guard[j] == tgdriver.FormValue {
				g.guards[j].add(gvals[gi])
				gi++
			}
		}
	}
	slices.SortStableFunc(groups, func(a, b *shapeGroup) int { return cmp.Compare(a.round, b.round) })
	return groups, nil
}

// queue adds g's statement to b, checked on the server when checked
// (checkedText); its rows are read by readUpdated (with a nil out when
// not rows).
func (g *shapeGroup) queue(c *updateCache, b *pgx.Batch, checked, rows bool) {
	args := make([]any, 0, 12)
	for i := range g.sh.Set {
		if g.sh.Set[i] == tgdriver.FormValue {
			args = append(args, g.sets[i].arg(setTypes[i]))
		}
	}
	args = append(args, g.upd.arg("bigint"))
	if g.sh.ByTaskID {
		args = append(args, g.key.arg("text"))
	} else {
		args = append(args, g.key.arg("bigint"))
	}
	for j := range g.sh.Guard {
		if g.sh.Guard[j] == tgdriver.FormValue {
			args = append(args, g.guards[j].arg(guardTypes[j]))
		}
	}
	if g.sh.States != "" {
		args = append(args, g.states)
	}
	b.Queue(c.sql(g.sh, checked, rows), args...)
}

// readUpdated reads the rows of g's statement into out (by update index),
// marking each updated one in ok. A nil out reads a statement queued
// without the task's columns (queue's rows false): the ordinals alone.
func (g *shapeGroup) readUpdated(rows pgx.Rows, out []tgdriver.TaskRow, ok []bool) error {
	defer rows.Close()
	var s taskScanner
	var ord int64
	for rows.Next() {
		var t tgdriver.TaskRow
		var err error
		if out == nil {
			err = rows.Scan(&ord)
		} else {
			t, err = s.scan(rows, &ord)
		}
		if err != nil {
			return err
		}
		if ord < 1 || int(ord) > len(g.at) {
			return fmt.Errorf("update returned element %d of %d", ord, len(g.at))
		}
		i := g.at[ord-1]
		ok[i] = true
		if out != nil {
			out[i] = t
		}
	}
	return rows.Err()
}
