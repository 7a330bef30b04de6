package tgpostgres

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// UndoTaskRules turns a database of this package back to schema 26
// (0027 undone): the tasks' rules are CHECK constraints again, named as
// PostgreSQL named them, over plain columns, and the domains are gone.
// The triggers on tasks are created again from their own definitions.
// It starts with UndoEventPacks (0029). Exported (as the start of
// UndoJournalRows) for the tests of package tgpostgres_test.
var UndoTaskRules = append(slices.Clone(UndoEventPacks),
	`DO $$
	DECLARE
		defs text[];
		d text;
	BEGIN
		SELECT array_agg(pg_get_triggerdef(oid)) INTO defs FROM pg_trigger WHERE tgrelid = 'tasks'::regclass AND NOT tgisinternal;
		FOR d IN SELECT tgname FROM pg_trigger WHERE tgrelid = 'tasks'::regclass AND NOT tgisinternal LOOP
			EXECUTE format('DROP TRIGGER %I ON tasks', d);
		END LOOP;
		ALTER TABLE tasks
			ALTER COLUMN state TYPE TEXT, ALTER COLUMN generation TYPE BIGINT, ALTER COLUMN lease_ms TYPE BIGINT,
			ALTER COLUMN attempts TYPE BIGINT, ALTER COLUMN max_attempts TYPE BIGINT, ALTER COLUMN unmet TYPE BIGINT,
			ALTER COLUMN priority TYPE INTEGER, ALTER COLUMN created_by TYPE TEXT, ALTER COLUMN due_at_ms TYPE BIGINT,
			ALTER COLUMN retry_delay_ms TYPE BIGINT, ALTER COLUMN dependents TYPE BIGINT, ALTER COLUMN kind TYPE TEXT,
			ALTER COLUMN gate_timeout_ms TYPE BIGINT, ALTER COLUMN gate_on_timeout TYPE TEXT,
			ADD CONSTRAINT tasks_state_check CHECK (state IN ('blocked', 'pending', 'claimed', 'completed', 'failed', 'cancelled')),
			ADD CONSTRAINT tasks_generation_check CHECK (generation >= 0),
			ADD CONSTRAINT tasks_lease_ms_check CHECK (lease_ms IS NULL OR lease_ms > 0),
			ADD CONSTRAINT tasks_attempts_check CHECK (attempts >= 0),
			ADD CONSTRAINT tasks_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 100),
			ADD CONSTRAINT tasks_unmet_check CHECK (unmet >= 0),
			ADD CONSTRAINT tasks_priority_check CHECK (priority BETWEEN -100 AND 100),
			ADD CONSTRAINT tasks_created_by_check CHECK (created_by IS NULL OR length(created_by) BETWEEN 1 AND 128),
			ADD CONSTRAINT tasks_due_at_ms_check CHECK (due_at_ms >= 0),
			ADD CONSTRAINT tasks_retry_delay_ms_check CHECK (retry_delay_ms BETWEEN 0 AND 900000),
			ADD CONSTRAINT tasks_dependents_check CHECK (dependents >= 0),
			ADD CONSTRAINT tasks_kind_check CHECK (kind IN ('task', 'gate')),
			ADD CONSTRAINT tasks_gate_timeout_ms_check CHECK (gate_timeout_ms >= 0),
			ADD CONSTRAINT tasks_gate_on_timeout_check CHECK (gate_on_timeout IN ('', 'approve', 'reject'));
		FOREACH d IN ARRAY defs LOOP
			EXECUTE d;
		END LOOP;
	END
	$$`,
	`DROP DOMAIN tg_task_state, tg_task_kind, tg_gate_on_timeout, tg_created_by, tg_nonnegative, tg_lease_ms,
		tg_max_attempts, tg_retry_delay_ms, tg_priority`,
	`UPDATE schema_version SET version = 26`,
)

// taskRule is one rule on a value of tasks: a value of the column it
// refuses, and the values at its edges it accepts.
type taskRule struct {
	column string
	bad    string
	good   []string
}

var taskRules = []taskRule{
	{"state", "'bogus'", []string{"'blocked'", "'cancelled'"}},
	{"generation", "-1", []string{"0"}},
	{"lease_ms", "0", []string{"NULL", "1"}},
	{"attempts", "-1", []string{"0"}},
	{"max_attempts", "0", []string{"1", "100"}},
	{"max_attempts", "101", nil},
	{"unmet", "-1", []string{"0"}},
	{"priority", "101", []string{"100", "-100"}},
	{"priority", "-101", nil},
	{"created_by", "''", []string{"NULL", "'" + strings.Repeat("p", 128) + "'"}},
	{"created_by", "'" + strings.Repeat("p", 129) + "'", nil},
	{"due_at_ms", "-1", []string{"0"}},
	{"retry_delay_ms", "900001", []string{"0", "900000"}},
	{"retry_delay_ms", "-1", nil},
	{"dependents", "-1", []string{"0"}},
	{"kind", "'job'", []string{"'gate'", "'task'"}},
	{"gate_timeout_ms", "-1", []string{"0"}},
	{"gate_on_timeout", "'maybe'", []string{"'approve'", "'reject'", "''"}},
}

// insertTask is an INSERT of a new task with column set to value.
func insertTask(column, value string) string {
	cols := []string{"task_id", "workflow_id", "node_id", "payload", "depends_on", "state", "max_attempts", "unmet", "created_at_ms", "updated_at_ms"}
	vals := []string{"'rules-new'", "'rules-w'", "'new'", "'{}'", "'[]'", "'pending'", "3", "0", "1", "1"}
	if i := slices.Index(cols, column); i >= 0 {
		vals[i] = value
	} else {
		cols, vals = append(cols, column), append(vals, value)
	}
	return `INSERT INTO tasks (` + strings.Join(cols, ", ") + `) VALUES (` + strings.Join(vals, ", ") + `)`
}

// checkTaskRules checks that every rule of tasks refuses its bad value,
// by an UPDATE of each column and by an INSERT, with SQLSTATE 23514 and
// nothing written, and accepts the values at its edges.
func checkTaskRules(t *testing.T, c *pgx.Conn, when string) {
	t.Helper()
	ctx := testCtx(t)
	exec := func(q string) error {
		// Each statement in a transaction rolled back, so that none
		// changes the row the next ones write.
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, q)
		return err
	}
	refused := func(q string) {
		t.Helper()
		var pe *pgconn.PgError
		if err := exec(q); !errors.As(err, &pe) || pe.Code != "23514" {
			t.Errorf("%s: %s: %v, want SQLSTATE 23514 (a rule refused it)", when, q, err)
		}
	}
	for _, r := range taskRules {
		refused(`UPDATE tasks SET ` + r.column + ` = ` + r.bad + ` WHERE task_id = 'rules-t'`)
		refused(insertTask(r.column, r.bad))
		for _, v := range r.good {
			if err := exec(`UPDATE tasks SET ` + r.column + ` = ` + v + ` WHERE task_id = 'rules-t'`); err != nil {
				t.Errorf("%s: %s = %s refused: %v, want it accepted", when, r.column, v, err)
			}
		}
	}
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE task_id = 'rules-new'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%s: %d refused rows written (%v), want 0", when, n, err)
	}
}

// ruledColumns reads which columns of tasks have a domain, and how many
// CHECK constraints tasks has.
func ruledColumns(t *testing.T, c *pgx.Conn) (domains map[string]string, checks int) {
	t.Helper()
	ctx := testCtx(t)
	rows, err := c.Query(ctx, `SELECT column_name, domain_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'tasks' AND domain_name IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	domains = map[string]string{}
	for rows.Next() {
		var col, dom string
		if err := rows.Scan(&col, &dom); err != nil {
			t.Fatal(err)
		}
		domains[col] = dom
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE conrelid = 'tasks'::regclass AND contype = 'c'`).Scan(&checks); err != nil {
		t.Fatal(err)
	}
	return domains, checks
}

// casts are the casts to a domain's base type that PostgreSQL prints in a
// trigger's WHEN over a domain column.
var casts = regexp.MustCompile(`\(((?:old|new)\.\w+)\)::(?:text|bigint)`)

// taskTriggers reads the definitions of the triggers on tasks, without the
// casts of domain columns.
func taskTriggers(t *testing.T, c *pgx.Conn) []string {
	t.Helper()
	rows, err := c.Query(testCtx(t), `SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'tasks'::regclass AND NOT tgisinternal ORDER BY tgname`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range defs {
		defs[i] = casts.ReplaceAllString(d, "$1")
	}
	return defs
}

// TestTaskRulesHold: the rules on the tasks' values are domains (0027),
// no CHECK constraint is left for PostgreSQL to read and plan again for
// every statement that writes tasks, and every rule still refuses what it
// refused as a CHECK, by an INSERT or an UPDATE (SQLSTATE 23514), both on
// a new database and on one migrated from schema 26 (its rows kept, its
// triggers the same).
func TestTaskRulesHold(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	c := raw(t, url)
	execAll(t, c,
		`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('rules-w', 1, 1)`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, priority, created_by)
			VALUES ('rules-t', 'rules-w', 'n', '{"x":1}', '[]', 'pending', 3, 0, 1, 1, 7, 'alice')`,
	)
	const ruled = 14
	domains, checks := ruledColumns(t, c)
	if len(domains) != ruled || checks != 0 {
		t.Errorf("new database: %d columns of tasks with a domain (%v) and %d CHECK constraints, want %d and 0", len(domains), domains, checks, ruled)
	}
	for _, r := range taskRules {
		if domains[r.column] == "" {
			t.Errorf("new database: column %s has no domain, want its rule in one", r.column)
		}
	}
	checkTaskRules(t, c, "new database")
	triggers := taskTriggers(t, c)
	if len(triggers) != 6 { // the keys' five and task_nodes' (0031)
		t.Fatalf("%d triggers on tasks, want 6: %q", len(triggers), triggers)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	execAll(t, c, UndoTaskRules...)
	if domains, checks := ruledColumns(t, c); len(domains) != 0 || checks != ruled {
		t.Fatalf("schema 26: %d columns with a domain and %d CHECK constraints, want 0 and %d", len(domains), checks, ruled)
	}
	// Schema 26 has the keys' triggers as they are now, without task_nodes' (0031).
	keys := slices.DeleteFunc(slices.Clone(triggers), func(d string) bool { return strings.Contains(d, "tasks_nodes_insert") })
	if got := taskTriggers(t, c); !slices.Equal(got, keys) {
		t.Fatalf("schema 26: triggers %q, want %q", got, keys)
	}
	checkTaskRules(t, c, "schema 26")

	open(t, url, Options{}) // migrates
	domains, checks = ruledColumns(t, c)
	if len(domains) != ruled || checks != 0 {
		t.Errorf("migrated from schema 26: %d columns with a domain and %d CHECK constraints, want %d and 0", len(domains), checks, ruled)
	}
	if got := taskTriggers(t, c); !slices.Equal(got, triggers) {
		t.Errorf("migrated from schema 26: triggers %q, want %q", got, triggers)
	}
	var payload, by string
	var prio int
	if err := c.QueryRow(ctx, `SELECT payload, priority, created_by FROM tasks WHERE task_id = 'rules-t'`).Scan(&payload, &prio, &by); err != nil ||
		payload != `{"x":1}` || prio != 7 || by != "alice" {
		t.Errorf("migrated from schema 26: task %q %d %q (%v), want its row kept", payload, prio, by, err)
	}
	checkTaskRules(t, c, "migrated from schema 26")
}
