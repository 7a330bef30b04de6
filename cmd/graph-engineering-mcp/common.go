package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/user"
	"runtime/debug"
	"sync"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; when
// empty, the module version recorded by the Go toolchain is used.
var version string

// buildVersion is the version this binary reports, worked out once: the build
// information does not change while the process runs, and reading it parses
// the whole module list (the bench's wire client names it in every request).
var buildVersion = sync.OnceValue(func() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
})

// databaseFlag is the --database flag every command that touches the store takes.
func databaseFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "database",
		Aliases: []string{"db"},
		Usage:   "the database: an SQLite file `PATH` or a postgres:// URL (default $XDG_STATE_HOME/graph-engineering/tasks.db, else ~/.local/state/graph-engineering/tasks.db)",
		EnvVars: []string{"GRAPH_ENGINEERING_DATABASE"},
	}
}

// jsonFlag is the --json flag of read commands.
func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"}
}

// databasePath resolves the database path with the same rules for every
// command: --database on the command, else $GRAPH_ENGINEERING_DATABASE, else
// the default path. A --database given before the command name
// (graph-engineering-mcp --database X tasks list) is honoured too; urfave/cli
// would otherwise let the command's own unset flag shadow it.
func databasePath(c *cli.Context) (string, error) {
	env := os.Getenv(databaseEnv)
	p := c.String("database") // the command's own flag: explicit, else env
	if p != "" && p != env {
		return p, nil
	}
	for _, anc := range c.Lineage()[1:] {
		if ap := anc.String("database"); ap != "" {
			return ap, nil // explicit on an ancestor, else env
		}
	}
	if p != "" {
		return p, nil
	}
	return tgsqlite.DefaultPath()
}

// newLogger returns the structured logger; logs go to stderr, never stdout,
// which may carry the stdio transport.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// operatorName is who runs an operator command, recorded in the history.
func operatorName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "operator"
}
