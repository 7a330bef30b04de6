package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; when
// empty, the module version recorded by the Go toolchain is used.
var version string

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// databaseFlag is the --database flag every command that touches the store takes.
func databaseFlag() *cli.StringFlag {
	return &cli.StringFlag{
		Name:    "database",
		Aliases: []string{"db"},
		Usage:   "SQLite database `PATH` (default $XDG_STATE_HOME/graph-engineering/tasks.db, else ~/.local/state/graph-engineering/tasks.db)",
		EnvVars: []string{"GRAPH_ENGINEERING_DATABASE"},
	}
}

// jsonFlag is the --json flag of read commands.
func jsonFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON instead of text"}
}

// databasePath resolves --database or the default path.
func databasePath(c *cli.Context) (string, error) {
	if p := c.String("database"); p != "" {
		return p, nil
	}
	return taskgraph.DefaultPath()
}

// openStore opens the database for a command. Operator commands do not run
// the lease sweeper: a server on the same database does that.
func openStore(c *cli.Context, opts taskgraph.Options) (*taskgraph.Store, error) {
	path, err := databasePath(c)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = newLogger(c.App.ErrWriter, slog.LevelWarn)
	}
	return taskgraph.Open(c.Context, path, opts)
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

// withStore opens the store, runs fn, and closes the store.
func withStore(c *cli.Context, fn func(ctx context.Context, s *taskgraph.Store) error) error {
	s, err := openStore(c, taskgraph.Options{})
	if err != nil {
		return err
	}
	ferr := fn(c.Context, s)
	if cerr := s.Close(); cerr != nil && ferr == nil {
		ferr = fmt.Errorf("close database: %w", cerr)
	}
	return ferr
}
