package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// This file holds the db commands and the plumbing that every operator
// command (tasks, workflow, admin, audit, db) shares: opening the store,
// accepting flags after positional arguments, and mapping store errors to
// exit codes.

// databaseEnv is the environment variable databaseFlag reads.
const databaseEnv = "GRAPH_ENGINEERING_DATABASE"

// clockKey carries a lease.Clock in a context.Context; see contextWithClock.
type clockKey struct{}

// contextWithClock returns ctx carrying clock, which operator commands run
// under ctx then use as the store's server time. Tests use it to share a
// lease.ManualClock with the store they hold open beside the command; the
// binary never sets it, so commands use the system clock.
func contextWithClock(ctx context.Context, clock lease.Clock) context.Context {
	return context.WithValue(ctx, clockKey{}, clock)
}

func clockFrom(ctx context.Context) lease.Clock {
	if c, ok := ctx.Value(clockKey{}).(lease.Clock); ok {
		return c
	}
	return nil
}

// operatorOptions are the store options of every operator command.
func operatorOptions(c *cli.Context) taskgraph.Options {
	return taskgraph.Options{
		Clock:  clockFrom(c.Context),
		Logger: newLogger(c.App.ErrWriter, slog.LevelWarn),
	}
}

// operatorSQLite are the SQLite driver's options of every operator command:
// a one-shot command reads on one or two connections at a time.
var operatorSQLite = tgsqlite.Options{ReadConns: 2}

// noDatabase is the error of an operator command pointed at a path with no
// database: it never creates one.
func noDatabase(path string) error {
	return fmt.Errorf("no database at %s: set --database or %s to the database serve uses (serve creates it on first start)", path, databaseEnv)
}

// missingDatabase reports whether err says there is no database file at all.
func missingDatabase(err error) bool {
	return errors.Is(err, tgsqlite.ErrNoDatabase) && errors.Is(err, fs.ErrNotExist)
}

// openOperatorStore opens the database for an operator command. Unlike serve
// it never creates a database: a mistyped path must not leave an empty
// database behind and report "no tasks".
func openOperatorStore(c *cli.Context) (*taskgraph.Store, error) {
	kind, path, err := resolveDatabase(c)
	if err != nil {
		return nil, err
	}
	if kind == databasePostgres {
		return openDatabase(c, path, operatorOptions(c), operatorSQLite, openOperator)
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, noDatabase(path)
		}
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	s, _, err := openSQLite(c.Context, path, operatorOptions(c), operatorSQLite, openOperator)
	if err != nil {
		return nil, err // the store's errors name the path and the step that failed
	}
	return s, nil
}

// openReadOnlyOperatorStore opens the database for a command that only reads
// (tasks list/show, workflow show/watch, audit verify, db check, db backup):
// read-only, so it migrates nothing, checkpoints nothing, writes nothing and
// never makes a server's writer wait. Like openOperatorStore it never creates
// a database.
func openReadOnlyOperatorStore(c *cli.Context) (*taskgraph.Store, error) {
	_, path, err := resolveDatabase(c)
	if err != nil {
		return nil, err
	}
	s, err := openDatabase(c, path, operatorOptions(c), operatorSQLite, openReadOnly)
	if missingDatabase(err) {
		return nil, noDatabase(path)
	}
	return s, err // the store's errors name the path and what to do
}

// withReadOnlyStore is withOperatorStore for commands that only read: the
// store is opened with openReadOnlyOperatorStore.
func withReadOnlyStore(c *cli.Context, fn func(ctx context.Context, s *taskgraph.Store) error) error {
	return withStore(c, openReadOnlyOperatorStore, fn)
}

// withReadOnlySQLite is withReadOnlyStore for the commands that use what
// only a SQLite file has (db check, db backup): fn gets the store's driver
// too. The caller has refused a PostgreSQL --database already.
func withReadOnlySQLite(c *cli.Context, fn func(ctx context.Context, s *taskgraph.Store, d *tgsqlite.Driver) error) error {
	var d *tgsqlite.Driver
	open := func(c *cli.Context) (*taskgraph.Store, error) {
		_, path, err := resolveDatabase(c)
		if err != nil {
			return nil, err
		}
		s, drv, err := openSQLite(c.Context, path, operatorOptions(c), operatorSQLite, openReadOnly)
		if missingDatabase(err) {
			return nil, noDatabase(path)
		}
		d = drv
		return s, err // the store's errors name the path and what to do
	}
	return withStore(c, open, func(ctx context.Context, s *taskgraph.Store) error { return fn(ctx, s, d) })
}

// withOperatorStore opens the store, runs fn, and closes the store. Every
// write fn makes is one short store transaction; nothing holds the write lock
// while a human reads a prompt.
func withOperatorStore(c *cli.Context, fn func(ctx context.Context, s *taskgraph.Store) error) error {
	return withStore(c, openOperatorStore, fn)
}

// withStore opens a store with open, runs fn and closes the store; a close
// error is reported when fn succeeded.
func withStore(c *cli.Context, open func(*cli.Context) (*taskgraph.Store, error), fn func(ctx context.Context, s *taskgraph.Store) error) error {
	s, err := open(c)
	if err != nil {
		return err
	}
	ferr := fn(c.Context, s)
	if cerr := s.Close(); cerr != nil && ferr == nil {
		ferr = fmt.Errorf("close database: %w", cerr)
	}
	return ferr
}

// usageIfInvalid turns a store validation error (an argument broke a rule)
// into a usage error, exit code 2; other errors pass through.
func usageIfInvalid(err error) error {
	if err != nil && errors.Is(err, taskgraph.ErrInvalid) {
		return usagef("%v", err)
	}
	return err
}

// leafAction wraps the action of a command that takes the positional
// arguments named in args. urfave/cli v2 stops parsing flags at the first
// positional argument, so "admin requeue ID --reason x" would leave --reason
// unset; leafAction parses flags found after the arguments too. A wrong number
// of arguments is a usage error.
func leafAction(args []string, fn func(c *cli.Context, args []string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		got, help, err := interspersedArgs(c)
		if err != nil {
			return err
		}
		if help {
			return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
		}
		if len(got) != len(args) {
			want := "no arguments"
			if len(args) > 0 {
				want = fmt.Sprintf("%d argument(s): %s", len(args), strings.Join(args, " "))
			}
			return usagef("%s takes %s (got %d: %q); see --help", commandPath(c), want, len(got), got)
		}
		return fn(c, got)
	}
}

// interspersedArgs splits what urfave/cli left in c.Args() into positional
// arguments and flags, and sets those flags on c. Identifiers never start
// with '-', so every such word is a flag; "--" ends flag parsing.
func interspersedArgs(c *cli.Context) (positional []string, help bool, err error) {
	raw := c.Args().Slice()
	for i := 0; i < len(raw); i++ {
		a := raw[i]
		if a == "--" {
			return append(positional, raw[i+1:]...), help, nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "help" || name == "h" {
			help = true
			continue
		}
		f := findFlag(c.Command.Flags, name)
		if f == nil {
			return nil, false, usagef("flag provided but not defined: %s", a)
		}
		if !takesValue(f) {
			if !hasValue {
				value = "true"
			}
		} else if !hasValue {
			if i+1 >= len(raw) {
				return nil, false, usagef("flag needs an argument: %s", a)
			}
			i++
			value = raw[i]
		}
		if err := c.Set(f.Names()[0], value); err != nil {
			return nil, false, usagef("invalid value %q for flag %s: %v", value, a, err)
		}
	}
	return positional, help, nil
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// groupAction is the action of a command that only groups subcommands: it
// shows the group's help and fails with a usage error naming the
// subcommands. polishGroups answers a mistyped subcommand before it runs.
func groupAction(c *cli.Context) error {
	var names []string
	for _, sc := range c.Command.Subcommands {
		if !sc.Hidden {
			names = append(names, sc.Name)
		}
	}
	if err := cli.ShowSubcommandHelp(c); err != nil {
		return err
	}
	return usagef("%s needs a command: %s", commandPath(c), strings.Join(names, ", "))
}

// commandPath is the command's name as typed after the program name: "tasks show".
func commandPath(c *cli.Context) string {
	return strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ")
}

// maxAgeRE matches a day count, optionally followed by a Go duration: 30d, 1.5d, 1d12h.
var maxAgeRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)d(.*)$`)

// parseAge parses a positive age: a Go duration (72h, 90m) or days with a
// "d" suffix (30d, 1.5d, 1d12h).
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if m := maxAgeRE.FindStringSubmatch(s); m != nil {
		days, err := strconv.ParseFloat(m[1], 64)
		if err != nil || days > 100*365 {
			return 0, fmt.Errorf("%q: the day count must be a number of at most 36500", s)
		}
		d = time.Duration(days * float64(24*time.Hour))
		if m[2] != "" {
			rest, err := time.ParseDuration(m[2])
			if err != nil {
				return 0, fmt.Errorf("%q: after the days, %w", s, err)
			}
			d += rest
		}
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q is not a duration: use a Go duration (72h, 90m) or days with a d suffix (30d, 1d12h)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: the duration must be positive", s)
	}
	return d, nil
}

func dbCommand() *cli.Command {
	return &cli.Command{
		Name:  "db",
		Usage: "database maintenance: integrity check, WAL checkpoint, backup, pruning old workflows",
		Description: `Maintenance of the SQLite database. Safe while a server runs on the same
database: check and backup only read it (read-only, never making the server
wait); checkpoint never waits for anyone; prune writes in short transactions.`,
		Subcommands: []*cli.Command{dbCheckCommand(), dbCheckpointCommand(), dbPruneCommand(), dbBackupCommand()},
		Action:      groupAction,
	}
}

func dbCheckCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "check the database's integrity and report its WAL's size",
		UsageText: "graph-engineering-mcp db check [--database PATH] [--json]",
		Description: `Runs SQLite's integrity check, reports the size of the write-ahead log (the
-wal file), and prints the task counts by state. It opens the database
read-only: it writes nothing, checkpoints nothing and never makes a running
server wait. A running server checkpoints the WAL itself as it writes, without
waiting for readers, and folds it into the database file when it stops.

Exits 0 when the integrity check passes and 1 when it does not. On PostgreSQL
it reports the task counts and says to run pg_amcheck: PostgreSQL checks its
own pages, and there is no write-ahead log file of ours to report.

Example:
   graph-engineering-mcp db check --database /var/lib/graph-engineering/tasks.db`,
		Flags:  []cli.Flag{databaseFlag(), jsonFlag()},
		Action: leafAction(nil, dbCheckAction),
	}
}

// checkJSON is the --json output of db check.
type checkJSON struct {
	Database  string         `json:"database"`
	OK        bool           `json:"ok"`
	Integrity []string       `json:"integrity"`
	WAL       walJSON        `json:"wal"`
	Tasks     map[string]int `json:"tasks"`
}

// walJSON describes the write-ahead log, which db check reads but never
// checkpoints.
type walJSON struct {
	Bytes int64 `json:"bytes"`
}

func dbCheckAction(c *cli.Context, _ []string) error {
	if kind, _, err := resolveDatabase(c); err != nil {
		return err
	} else if kind == databasePostgres {
		return withReadOnlyStore(c, func(ctx context.Context, s *taskgraph.Store) error {
			return dbCheckOther(c, ctx, s) // a database that checks itself
		})
	}
	return withReadOnlySQLite(c, func(ctx context.Context, s *taskgraph.Store, d *tgsqlite.Driver) error {
		res, err := d.Check(ctx)
		if err != nil {
			return fmt.Errorf("check database %s: %w", s.Path(), err)
		}
		counts, err := s.CountByState(ctx)
		if err != nil {
			return err
		}
		w := c.App.Writer
		if c.Bool("json") {
			out := checkJSON{Database: s.Path(), OK: res.OK(), Integrity: res.Integrity, Tasks: stateCountsJSON(counts),
				WAL: walJSON{Bytes: res.WALBytes}}
			if err := writeJSON(w, out); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(w, "database:   %s\n", s.Path())
			if res.OK() {
				fmt.Fprintln(w, "integrity:  ok")
			} else {
				fmt.Fprintf(w, "integrity:  %d problem(s)\n", len(res.Integrity))
				for _, line := range res.Integrity {
					fmt.Fprintf(w, "  %s\n", line)
				}
			}
			fmt.Fprintf(w, "wal:        %d bytes, not checkpointed (db check only reads; the server checkpoints)\n", res.WALBytes)
			fmt.Fprintf(w, "tasks:      %s\n", describeCounts(counts))
		}
		if !res.OK() {
			first := ""
			if len(res.Integrity) > 0 {
				first = ": " + res.Integrity[0]
			}
			return fmt.Errorf("database %s failed its integrity check (%d problem(s))%s", s.Path(), len(res.Integrity), first)
		}
		return nil
	})
}

func dbPruneCommand() *cli.Command {
	return &cli.Command{
		Name:      "prune",
		Usage:     "permanently remove finished workflows older than a duration",
		UsageText: "graph-engineering-mcp db prune --older-than DURATION [--yes] [--json] [--database PATH]",
		Description: `Removes every finished workflow (all of its tasks completed, failed or
cancelled) whose last change is older than DURATION, with its tasks, edges and
events. The store records each removed workflow's final chain hash, so
"audit verify" keeps passing. Workflows with unfinished tasks are never
removed.

DURATION is a Go duration (72h, 90m) or a number of days with a d suffix
(30d, 1.5d, 1d12h). The cut-off is the server's time minus DURATION.

It asks for confirmation on stdin unless --yes is given; any answer but y or
yes leaves the database unchanged and exits 1. With nothing to prune it says
so and exits 0 without asking.

Example:
   graph-engineering-mcp db prune --older-than 30d
   graph-engineering-mcp db prune --older-than 90d --yes --json`,
		Flags: []cli.Flag{
			databaseFlag(),
			&cli.StringFlag{Name: "older-than", Usage: "remove finished workflows unchanged for longer than `DURATION` (e.g. 30d, 72h); required"},
			yesFlag(),
			jsonFlag(),
		},
		Action: leafAction(nil, dbPruneAction),
	}
}

// pruneJSON is the --json output of db prune.
type pruneJSON struct {
	Before    time.Time `json:"before"`
	Workflows []string  `json:"workflows"`
	Tasks     int64     `json:"tasks"`
	Events    int64     `json:"events"`
}

func dbPruneAction(c *cli.Context, _ []string) error {
	raw := c.String("older-than")
	if raw == "" {
		return usagef("--older-than is required: say how old a finished workflow must be to be removed (e.g. 30d, 72h)")
	}
	age, err := parseAge(raw)
	if err != nil {
		return usagef("invalid --older-than: %v", err)
	}
	return withOperatorStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		before := s.Clock().Now().Add(-age).UTC()
		// Nothing to confirm when nothing would go. Prune itself decides
		// again, under its guard, what goes.
		some, err := somePrunable(ctx, s, before)
		if err != nil {
			return err
		}
		if !some {
			return reportPrune(c, before, taskgraph.PruneResult{})
		}
		prompt := fmt.Sprintf(`About to permanently remove every finished workflow (all tasks completed, failed
or cancelled) unchanged since %s (older than %s), with its tasks and events.
The removal is recorded with each workflow's final chain hash; it cannot be undone.
`, before.Format(time.RFC3339), raw)
		if err := confirm(c, prompt, "Prune"); err != nil {
			return err
		}
		res, err := s.Prune(ctx, before)
		if err != nil {
			return err
		}
		return reportPrune(c, before, res)
	})
}

// somePrunable reports whether a workflow looks prunable now: finished and
// unchanged since before.
func somePrunable(ctx context.Context, s *taskgraph.Store, before time.Time) (bool, error) {
	wfs, err := s.RecentWorkflows(ctx)
	if err != nil {
		return false, err
	}
	for _, w := range wfs {
		if !w.UpdatedAt.Before(before) {
			continue
		}
		sum, err := s.WorkflowSummary(ctx, w.WorkflowID)
		if errors.Is(err, taskgraph.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if sum.Counts[taskgraph.StateBlocked]+sum.Counts[taskgraph.StatePending]+sum.Counts[taskgraph.StateClaimed] == 0 {
			return true, nil
		}
	}
	return false, nil
}

// reportPrune prints what a prune removed.
func reportPrune(c *cli.Context, before time.Time, res taskgraph.PruneResult) error {
	if c.Bool("json") {
		ids := res.Workflows
		if ids == nil {
			ids = []string{}
		}
		return writeJSON(c.App.Writer, pruneJSON{Before: before, Workflows: ids, Tasks: res.Tasks, Events: res.Events})
	}
	if len(res.Workflows) == 0 {
		_, err := fmt.Fprintf(c.App.Writer, "nothing to prune: no finished workflow unchanged since %s\n", before.Format(time.RFC3339))
		return err
	}
	_, err := fmt.Fprintf(c.App.Writer, "removed %d workflow(s) (%d tasks, %d events): %s\n",
		len(res.Workflows), res.Tasks, res.Events, strings.Join(res.Workflows, ", "))
	return err
}

func init() {
	registerCommands(func() []*cli.Command { return []*cli.Command{dbCommand()} })
}

// pgIntegrity is db check's integrity line on PostgreSQL, which checks its
// own pages: this command reports what it can see and says what to run.
const pgIntegrity = "not checked here: PostgreSQL verifies its own pages; run pg_amcheck (or amcheck) on the database for an integrity check"

// dbCheckOther is db check on a database other than SQLite: the database
// answered, the task counts, and where its integrity check lives.
func dbCheckOther(c *cli.Context, ctx context.Context, s *taskgraph.Store) error {
	if err := s.Ping(ctx); err != nil {
		return fmt.Errorf("check database %s: %w", s.Path(), err)
	}
	counts, err := s.CountByState(ctx)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("json") {
		return writeJSON(w, checkJSON{Database: s.Path(), OK: true, Integrity: []string{pgIntegrity}, Tasks: stateCountsJSON(counts)})
	}
	fmt.Fprintf(w, "database:   %s (%s)\n", s.Path(), s.Driver())
	fmt.Fprintf(w, "integrity:  %s\n", pgIntegrity)
	_, err = fmt.Fprintf(w, "tasks:      %s\n", describeCounts(counts))
	return err
}
