package main

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// This file tells the two kinds of --database apart. The flag (databaseFlag,
// EnvVars GRAPH_ENGINEERING_DATABASE) carries either a PostgreSQL URL
// (postgres:// or postgresql://) or an SQLite file path; databasePath
// resolves it with the same precedence for every command (the command's
// --database, else one before the command name, else the environment
// variable, else the default SQLite path), and databaseKind classifies the
// result. Nothing here opens a store.
//
// A PostgreSQL URL may carry a password: only redactDatabase's form of it
// may reach a log line, an error or an output.

// The kinds of database databaseKind tells apart.
const (
	// databaseSQLite is an SQLite database file; the location is its path.
	databaseSQLite = "sqlite"
	// databasePostgres is a PostgreSQL database; the location is its URL,
	// with the scheme in lower case (pgx recognizes only lower case).
	databasePostgres = "postgres"
	// databaseUnsupported is a URL of a scheme no driver serves
	// (mysql://, sqlite://, file://...); the location is the scheme alone.
	databaseUnsupported = "unsupported"
)

// urlScheme matches the scheme of a URL ("name://"), per RFC 3986.
var urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// databaseKind tells a PostgreSQL URL from an SQLite file path. A string
// that starts with postgres:// or postgresql:// (in any case) is PostgreSQL;
// one that starts with any other scheme:// is unsupported (a path never
// needs "://", and such a string is a mistake rather than a file name);
// anything else is an SQLite file path, returned unchanged. Keyword/value
// connection strings ("host=... dbname=...") are not accepted: they would
// read as a file name, so PostgreSQL is named by URL only.
func databaseKind(s string) (kind, location string) {
	m := urlScheme.FindStringSubmatch(s)
	if m == nil {
		return databaseSQLite, s
	}
	switch scheme := strings.ToLower(m[1]); scheme {
	case "postgres", "postgresql":
		return databasePostgres, scheme + s[len(m[1]):]
	default:
		return databaseUnsupported, scheme
	}
}

// resolveDatabase is databasePath followed by databaseKind: what every
// command that opens a store is meant to call. An unsupported scheme is a
// usage error (exit 2) that says what is allowed.
func resolveDatabase(c *cli.Context) (kind, location string, err error) {
	s, err := databasePath(c)
	if err != nil {
		return "", "", err
	}
	kind, location = databaseKind(s)
	if kind == databaseUnsupported {
		return "", "", usagef("--database %s://...: no driver for that scheme; give postgres://USER:PASS@HOST[:PORT]/DB (or postgresql://) for PostgreSQL, or a file path for SQLite", location)
	}
	return kind, location, nil
}

// redactDatabase returns location in a form safe to log, print or put in an
// error: an SQLite path unchanged; a PostgreSQL URL with its password (in the
// user info, or a password= or sslpassword= query parameter) replaced by
// xxxxx. A URL that does not parse is not shown at all, since its parts
// cannot be told apart reliably.
func redactDatabase(location string) string {
	kind, loc := databaseKind(location)
	switch kind {
	case databaseSQLite:
		return location
	case databaseUnsupported:
		return loc + "://..."
	}
	scheme, rest, _ := strings.Cut(loc, "://")
	hidden := scheme + "://(a URL that does not parse as one; not shown, it may hold a password)"
	u, err := url.Parse(loc)
	// A fragment, or an @ outside the user info, means a password with an
	// unescaped # or ? split the URL where its parts cannot be trusted.
	if err != nil || strings.Contains(loc, "#") || (u.User == nil && strings.Contains(rest, "@")) {
		return hidden
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return hidden
		}
		for k := range q {
			if lk := strings.ToLower(k); lk == "password" || lk == "sslpassword" {
				q[k] = []string{"xxxxx"}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
