package main

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
	"github.com/urfave/cli/v2"
)

// serveDatabasePath resolves serve's database path (see databasePath). A
// path the user named (--database, or GRAPH_ENGINEERING_DATABASE) must lie in
// an existing folder: serve creates a missing database file, but never the
// folders of a path it was given, so a mistyped path is a usage error naming
// it instead of a new empty database nobody asked for. Only the default
// path's folder is created (0700, by the store), also when it is named
// explicitly, as the README recommends for MCP clients.
func serveDatabasePath(c *cli.Context) (string, error) {
	kind, path, err := resolveDatabase(c)
	if err != nil || !databaseNamed(c) || kind == databasePostgres {
		return path, err
	}
	if def, err := tgsqlite.DefaultPath(); err == nil && filepath.Clean(path) == def {
		return path, nil
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", usagef("--database %s: the folder %s does not exist; fix the path, or create the folder first (serve creates a new database file, never its folder)", path, dir)
	case err != nil:
		return "", usagef("--database %s: %v", path, err)
	case !fi.IsDir():
		return "", usagef("--database %s: %s is not a folder", path, dir)
	}
	return path, nil
}

// databaseNamed reports whether the database path was given (on the command
// line or in GRAPH_ENGINEERING_DATABASE) rather than defaulted.
func databaseNamed(c *cli.Context) bool {
	for _, ctx := range c.Lineage() {
		if ctx.String("database") != "" {
			return true
		}
	}
	return false
}

// logIfNewDatabase logs one warning, naming the absolute path, when no
// database exists at path yet, so that a server never starts on a fresh
// empty database without saying so. serve calls it just before opening the
// store, which then creates the file.
func logIfNewDatabase(logger *slog.Logger, path string) {
	if kind, _ := databaseKind(path); kind == databasePostgres {
		return // serve creates the tables in an existing database it was given
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	logger.Warn("creating a new, empty database: none exists at this path", "database", path)
}
