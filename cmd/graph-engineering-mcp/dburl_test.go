package main

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestDatabaseKind(t *testing.T) {
	for _, tc := range []struct {
		in, kind, location string
	}{
		{"postgres://u:p@db.internal:5432/tasks?sslmode=require", databasePostgres, "postgres://u:p@db.internal:5432/tasks?sslmode=require"},
		{"postgresql://u@db/tasks", databasePostgres, "postgresql://u@db/tasks"},
		{"postgres:///tasks?host=/run/postgresql", databasePostgres, "postgres:///tasks?host=/run/postgresql"},
		{"postgres://u:p@h1:5432,h2:5433/tasks", databasePostgres, "postgres://u:p@h1:5432,h2:5433/tasks"},
		// The scheme is case-insensitive; pgx knows only lower case.
		{"POSTGRES://u@db/tasks", databasePostgres, "postgres://u@db/tasks"},
		{"PostgreSQL://u@db/tasks", databasePostgres, "postgresql://u@db/tasks"},
		// File paths keep meaning SQLite, whatever they look like.
		{"/var/lib/graph-engineering/tasks.db", databaseSQLite, "/var/lib/graph-engineering/tasks.db"},
		{"tasks.db", databaseSQLite, "tasks.db"},
		{"./postgres/tasks.db", databaseSQLite, "./postgres/tasks.db"},
		{"postgres", databaseSQLite, "postgres"},
		{"postgres:tasks.db", databaseSQLite, "postgres:tasks.db"},
		{"C:/data/tasks.db", databaseSQLite, "C:/data/tasks.db"},
		{"host=db dbname=tasks", databaseSQLite, "host=db dbname=tasks"},
		// Any other scheme:// is a mistake, not a file name.
		{"mysql://u:p@db/tasks", databaseUnsupported, "mysql"},
		{"sqlite:///var/lib/tasks.db", databaseUnsupported, "sqlite"},
		{"File://tasks.db", databaseUnsupported, "file"},
	} {
		kind, location := databaseKind(tc.in)
		if kind != tc.kind || location != tc.location {
			t.Errorf("databaseKind(%q) = %q, %q; want %q, %q", tc.in, kind, location, tc.kind, tc.location)
		}
	}
}

func TestRedactDatabase(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"/var/lib/tasks.db", "/var/lib/tasks.db"},
		{"postgres://ge:s3cret@db.internal:5432/tasks?sslmode=require", "postgres://ge:xxxxx@db.internal:5432/tasks?sslmode=require"},
		{"postgres://ge@db/tasks", "postgres://ge@db/tasks"},
		{"postgresql://ge:s3cret@h1,h2:5433/tasks", "postgresql://ge:xxxxx@h1,h2:5433/tasks"},
		{"postgres://db/tasks?user=ge&password=s3cret", "postgres://db/tasks?password=xxxxx&user=ge"},
		{"postgres://db/tasks?PassWord=s3cret&sslpassword=s3cret", "postgres://db/tasks?PassWord=xxxxx&sslpassword=xxxxx"},
		{"POSTGRES://ge:s3cret@db/tasks", "postgres://ge:xxxxx@db/tasks"},
		{"mysql://ge:s3cret@db/tasks", "mysql://..."},
	} {
		if got := redactDatabase(tc.in); got != tc.want {
			t.Errorf("redactDatabase(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
	// Malformed URLs whose parts cannot be trusted are not shown at all.
	for _, in := range []string{
		"postgres://ge:s3#cret@db/tasks",
		"postgres://ge:12#34@db/tasks",
		"postgres://ge:s3?cret@db/tasks",
		"postgres://ge:s3cret@db/tasks?password=%zz",
		"postgres://ge:s3cret@db:port/tasks",
		"postgres://ge:s3cret@[db/tasks",
	} {
		got := redactDatabase(in)
		if strings.Contains(got, "s3") || strings.Contains(got, "cret") || strings.Contains(got, "34") {
			t.Errorf("redactDatabase(%q) = %q: it shows the password", in, got)
		}
		if !strings.HasPrefix(got, "postgres://") {
			t.Errorf("redactDatabase(%q) = %q: want it to still say postgres://", in, got)
		}
	}
}

// TestResolveDatabaseSources checks that a PostgreSQL URL reaches
// resolveDatabase by every route a path does: the command's --database, one
// before the command name, and GRAPH_ENGINEERING_DATABASE (the flag's
// EnvVars), with the command's own flag winning over the environment.
func TestResolveDatabaseSources(t *testing.T) {
	const pg = "postgres://ge:s3cret@db.internal/tasks"
	file := filepath.Join(t.TempDir(), "tasks.db")
	resolve := func(args ...string) (kind, location string, err error) {
		t.Helper()
		app := &cli.App{
			Name: "graph-engineering-mcp", Writer: io.Discard, ErrWriter: io.Discard,
			Flags: []cli.Flag{databaseFlag()},
			Commands: []*cli.Command{{
				Name: "probe", Flags: []cli.Flag{databaseFlag()},
				Action: func(c *cli.Context) error {
					kind, location, err = resolveDatabase(c)
					return nil
				},
			}},
		}
		if rerr := app.Run(append([]string{"graph-engineering-mcp"}, args...)); rerr != nil {
			t.Fatalf("run %q: %v", args, rerr)
		}
		return kind, location, err
	}
	want := func(what, kind, location, wantKind, wantLocation string, err error) {
		t.Helper()
		if err != nil || kind != wantKind || location != wantLocation {
			t.Errorf("%s: got %q, %q, %v; want %q, %q", what, kind, location, err, wantKind, wantLocation)
		}
	}

	t.Setenv(databaseEnv, "")
	k, l, err := resolve("probe", "--database", pg)
	want("--database on the command", k, l, databasePostgres, pg, err)
	k, l, err = resolve("--database", pg, "probe")
	want("--database before the command", k, l, databasePostgres, pg, err)
	k, l, err = resolve("probe", "--db", file)
	want("--db FILE", k, l, databaseSQLite, file, err)

	t.Setenv(databaseEnv, pg)
	k, l, err = resolve("probe")
	want(databaseEnv, k, l, databasePostgres, pg, err)
	k, l, err = resolve("probe", "--database", file)
	want("--database over "+databaseEnv, k, l, databaseSQLite, file, err)

	t.Setenv(databaseEnv, "mysql://ge:s3cret@db/tasks")
	_, _, err = resolve("probe")
	var ue *usageError
	if !errors.As(err, &ue) || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "postgres://") {
		t.Errorf("an unsupported scheme: got %v; want a usage error that names postgres:// and not the password", err)
	}
}
