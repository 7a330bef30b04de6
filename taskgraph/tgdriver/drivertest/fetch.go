package drivertest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// fetchTests: Tx.Fetch (its locks, updates and claim scans), and the
// lookups of claim-next order (NextPending, CountClaimable,
// PendingWorkflows).
var fetchTests = []test{
	{"Locks", testFetchLocks},
	{"ClaimScans", testClaimScans},
	{"NextPending", testNextPending},
	{"CountClaimableAndPendingWorkflows", testCountClaimable},
	{"RoundsInOrder", testFetchRoundsInOrder},
	{"Empty", testFetchEmpty},
}

// testFetchLocks: Fetch reads the tasks of Lock (in task id order, each
// once, missing ids left out) as they were before its updates.
func testFetchLocks(t *testing.T, h Harness) {
	e := newEnv(t, h)
	rows := e.inserted(task("wf", "c"), fullTask("wf", "a"), task("wf", "b"))
	c, a := rows[0], rows[1]
	var f tgdriver.Fetched
	e.write(func(tx tgdriver.Tx) error {
		var err error
		f, err = tx.Fetch(e.ctx, tgdriver.Fetch{
			Lock:    []string{c.TaskID, "none", a.TaskID, c.TaskID},
			Updates: []tgdriver.TaskUpdate{{TaskID: a.TaskID, Set: hit}},
		})
		return err
	})
	if len(f.Locked) != 2 {
		t.Fatalf("Locked %d rows (seqs %v), want a and c", len(f.Locked), seqsOf(f.Locked))
	}
	for i, want := range []tgdriver.TaskRow{a, c} {
		if d := diffTask(f.Locked[i], want); d != "" {
			t.Errorf("Locked[%d] (task id order, read before the updates): %s", i, d)
		}
	}
	if len(f.Updated) != 1 || !f.Updated[0].OK || f.Updated[0].Row.StatusMessage != "hit" {
		t.Errorf("Updated %+v", f.Updated)
	}
}

// claimFixture is a set of tasks whose claim-next order is known.
type claimFixture struct {
	seq map[string]int64 // by node id
}

// newClaimFixture inserts, in this order (priority, requires, state):
// wf1.p0 (0), wf2.q0 (0), wf1.p5 (5), wf1.gpu (10, gpu), wf1.cg (9, cuda
// gpu), wf1.p5b (5), wf1.later (50, due at 9000), wf1.claimed (100,
// claimed), wf1.blocked (100, blocked), wf2.q7 (7), wf1.neg (-3), wf1.a
// (0, requires a).
func newClaimFixture(e *env) claimFixture {
	e.t.Helper()
	type spec struct {
		wf, node, requires, state string
		priority                  int
		due                       int64
	}
	specs := []spec{
		{"wf1", "p0", "", "pending", 0, 0},
		{"wf2", "q0", "", "pending", 0, 0},
		{"wf1", "p5", "", "pending", 5, 0},
		{"wf1", "gpu", "gpu", "pending", 10, 0},
		{"wf1", "cg", "cuda gpu", "pending", 9, 0},
		{"wf1", "p5b", "", "pending", 5, 0},
		{"wf1", "later", "", "pending", 50, 9000},
		{"wf1", "claimed", "", "claimed", 100, 0},
		{"wf1", "blocked", "", "blocked", 100, 0},
		{"wf2", "q7", "", "pending", 7, 0},
		{"wf1", "neg", "", "pending", -3, 0},
		{"wf1", "a", "a", "pending", 0, 0},
	}
	rows := make([]tgdriver.TaskRow, len(specs))
	for i, s := range specs {
		r := task(s.wf, s.node)
		r.Requires, r.State, r.Priority, r.DueAtMS = s.requires, s.state, s.priority, s.due
		if s.state == "blocked" {
			r.Unmet = 1
		}
		rows[i] = r
	}
	f := claimFixture{seq: map[string]int64{}}
	for i, s := range e.insert(rows...) {
		f.seq[specs[i].node] = s
	}
	return f
}

// nodes names the fixture's tasks of seqs.
func (f claimFixture) nodes(seqs []int64) string {
	by := map[int64]string{}
	for n, s := range f.seq {
		by[s] = n
	}
	var out []string
	for _, s := range seqs {
		out = append(out, by[s])
	}
	return "[" + strings.Join(out, " ") + "]"
}

// claimCases are claim scans of the fixture and their claim-next order:
// priority DESC, then seq; pending and due only; a task that requires
// capabilities only for a claim that has them all; within a workflow.
var claimCases = []struct {
	scan tgdriver.ClaimScan
	want string
}{
	{tgdriver.ClaimScan{N: 3}, "[q7 p5 p5b]"},
	{tgdriver.ClaimScan{N: 100}, "[q7 p5 p5b p0 q0 neg]"},
	{tgdriver.ClaimScan{Caps: []string{"gpu"}, N: 100}, "[gpu q7 p5 p5b p0 q0 neg]"},
	{tgdriver.ClaimScan{Caps: []string{"cuda"}, N: 100}, "[q7 p5 p5b p0 q0 neg]"},
	{tgdriver.ClaimScan{Caps: []string{"a", "cuda", "gpu", "z"}, N: 100}, "[gpu cg q7 p5 p5b p0 q0 a neg]"},
	{tgdriver.ClaimScan{WorkflowID: "wf1", N: 100}, "[p5 p5b p0 neg]"},
	{tgdriver.ClaimScan{WorkflowID: "wf1", Caps: []string{"cuda", "gpu"}, N: 2}, "[gpu cg]"},
	{tgdriver.ClaimScan{WorkflowID: "wf2", Caps: []string{"gpu"}, N: 100}, "[q7 q0]"},
	{tgdriver.ClaimScan{WorkflowID: "none", N: 5}, "[]"},
	{tgdriver.ClaimScan{N: 0}, "[]"},
	{tgdriver.ClaimScan{N: 1}, "[q7]"},
}

// testClaimScans: each scan of one Fetch returns its claimable tasks in
// claim-next order, up to N, as full rows; a scan does not skip the tasks
// its own transaction's earlier scans locked.
func testClaimScans(t *testing.T, h Harness) {
	e := newEnv(t, h)
	fx := newClaimFixture(e)
	var scans []tgdriver.ClaimScan
	for _, c := range claimCases {
		scans = append(scans, c.scan)
	}
	var f tgdriver.Fetched
	e.write(func(tx tgdriver.Tx) error {
		var err error
		f, err = tx.Fetch(e.ctx, tgdriver.Fetch{Claims: scans})
		return err
	})
	if len(f.Claimable) != len(scans) {
		t.Fatalf("%d claim results for %d scans", len(f.Claimable), len(scans))
	}
	for i, c := range claimCases {
		if got := fx.nodes(seqsOf(f.Claimable[i])); got != c.want {
			t.Errorf("scan %+v: %s, want %s", c.scan, got, c.want)
		}
		for _, r := range f.Claimable[i] {
			if d := diffTask(r, e.task(r.Seq)); d != "" {
				t.Errorf("scan %+v: row %d: %s", c.scan, r.Seq, d)
			}
		}
	}
	// Once due (promoted), the later task ranks by its priority, and
	// nothing is due any more.
	e.write(func(tx tgdriver.Tx) error {
		_, ok, err := tx.UpdateTask(e.ctx, fx.seq["later"], tgdriver.TaskSet{DueAtMS: tgdriver.Val[int64](0), UpdatedAtMS: 2},
			tgdriver.TaskGuard{States: []string{"pending"}, DueByMS: tgdriver.Val[int64](9000)})
		if err == nil && !ok {
			err = fmt.Errorf("promotion of a due task did not apply")
		}
		if err != nil {
			return err
		}
		f, err = tx.Fetch(e.ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{N: 2}}})
		if err != nil {
			return err
		}
		if r, ok, err := tx.NextPending(e.ctx, "", nil); err != nil || !ok || r.Seq != fx.seq["later"] {
			t.Errorf("NextPending after promotion = %d %v %v, want the later task %d", r.Seq, ok, err, fx.seq["later"])
		}
		return nil
	})
	if got := fx.nodes(seqsOf(f.Claimable[0])); got != "[later q7]" {
		t.Errorf("after promotion: %s, want [later q7]", got)
	}
	e.eachReads(func(r tgdriver.Reads) error {
		if ms, ok, err := r.NextDue(e.ctx); ok || err != nil {
			return fmt.Errorf("NextDue after the only task not yet due was promoted = %d %v %v", ms, ok, err)
		}
		return nil
	})
}

// testNextPending: the first task of a claim scan, or ok false.
func testNextPending(t *testing.T, h Harness) {
	e := newEnv(t, h)
	fx := newClaimFixture(e)
	e.write(func(tx tgdriver.Tx) error {
		for _, c := range []struct {
			wf   string
			caps []string
			want string
		}{
			{"", nil, "q7"},
			{"", []string{"gpu"}, "gpu"},
			{"", []string{"cuda", "gpu"}, "gpu"},
			{"wf1", nil, "p5"},
			{"wf1", []string{"a"}, "p5"},
			{"wf2", []string{"x"}, "q7"},
			{"none", nil, ""},
		} {
			got, err := fx.next(e, tx, c.wf, c.caps)
			if err != nil {
				return err
			}
			if got != c.want {
				t.Errorf("NextPending(%q, %v) = %q, want %q", c.wf, c.caps, got, c.want)
			}
		}
		// Nothing claimable: ok false.
		for _, s := range fx.seq {
			if _, _, err := tx.UpdateTask(e.ctx, s, tgdriver.TaskSet{State: tgdriver.Val("completed"), UpdatedAtMS: 3}, tgdriver.TaskGuard{}); err != nil {
				return err
			}
		}
		if r, ok, err := tx.NextPending(e.ctx, "", []string{"a", "cuda", "gpu"}); ok || err != nil {
			t.Errorf("NextPending with nothing claimable = %d %v %v", r.Seq, ok, err)
		}
		return nil
	})
}

// next is the node NextPending(wf, caps) takes in tx, "" when none; it
// reports a row that is not the task's as it is stored.
func (f claimFixture) next(e *env, tx tgdriver.Tx, wf string, caps []string) (string, error) {
	r, ok, err := tx.NextPending(e.ctx, wf, caps)
	if err != nil || !ok {
		return "", err
	}
	if d := diffTask(r, mustRead(tx, e, r.Seq)); d != "" {
		e.t.Errorf("NextPending(%q, %v): row: %s", wf, caps, d)
	}
	got := f.nodes([]int64{r.Seq})
	return got[1 : len(got)-1], nil
}

// mustRead reads seq in tx (for comparisons inside a transaction).
func mustRead(tx tgdriver.Tx, e *env, seq int64) tgdriver.TaskRow {
	r, err := tx.TaskBySeq(e.ctx, seq)
	if err != nil {
		e.t.Errorf("TaskBySeq(%d): %v", seq, err)
	}
	return r
}

// testCountClaimable: CountClaimable counts, up to its limit, what a claim
// scan could take; PendingWorkflows names the workflow of each claimable
// task, routed ones included, in claim-next order.
func testCountClaimable(t *testing.T, h Harness) {
	e := newEnv(t, h)
	newClaimFixture(e)
	e.eachReads(func(r tgdriver.Reads) error {
		for _, c := range []struct {
			wf    string
			caps  []string
			limit int
			want  int
		}{
			{"", nil, 100, 6},
			{"", nil, 2, 2},
			{"", []string{"gpu"}, 100, 7},
			{"", []string{"a", "cuda", "gpu"}, 100, 9},
			{"wf1", []string{"cuda", "gpu"}, 100, 6},
			{"wf1", nil, 3, 3},
			{"wf2", nil, 100, 2},
			{"none", nil, 10, 0},
			{"", nil, 0, 0},
		} {
			if n, err := r.CountClaimable(e.ctx, c.wf, c.caps, c.limit); err != nil || n != c.want {
				return fmt.Errorf("CountClaimable(%q, %v, %d) = %d, %v; want %d", c.wf, c.caps, c.limit, n, err, c.want)
			}
		}
		all := []string{"wf1", "wf1", "wf2", "wf1", "wf1", "wf1", "wf2", "wf1", "wf1"}
		if got, err := r.PendingWorkflows(e.ctx, 100); err != nil || !eq(got, all) {
			return fmt.Errorf("PendingWorkflows(100) = %v, %v; want %v (gpu cg q7 p5 p5b p0 q0 a neg)", got, err, all)
		}
		if got, err := r.PendingWorkflows(e.ctx, 3); err != nil || !eq(got, all[:3]) {
			return fmt.Errorf("PendingWorkflows(3) = %v, %v; want %v", got, err, all[:3])
		}
		return nil
	})
}

// testFetchRoundsInOrder: Fetch takes its locks, then applies its updates,
// then scans: the scans see what the updates made claimable or took.
func testFetchRoundsInOrder(t *testing.T, h Harness) {
	e := newEnv(t, h)
	fx := newClaimFixture(e)
	var f tgdriver.Fetched
	e.write(func(tx tgdriver.Tx) error {
		var err error
		f, err = tx.Fetch(e.ctx, tgdriver.Fetch{
			Updates: []tgdriver.TaskUpdate{
				{Seq: fx.seq["q7"], Set: tgdriver.TaskSet{State: tgdriver.Val("claimed"), UpdatedAtMS: 2}, Guard: tgdriver.TaskGuard{States: []string{"pending"}}},
				{Seq: fx.seq["claimed"], Set: tgdriver.TaskSet{State: tgdriver.Val("pending"), UpdatedAtMS: 2}, Guard: tgdriver.TaskGuard{States: []string{"claimed"}}},
			},
			Claims: []tgdriver.ClaimScan{{N: 2}},
		})
		return err
	})
	if got := fx.nodes(seqsOf(f.Claimable[0])); got != "[claimed p5]" {
		t.Errorf("a scan after the updates: %s, want [claimed p5]", got)
	}
}

// testFetchEmpty: an empty Fetch reads nothing and fails nothing.
func testFetchEmpty(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.write(func(tx tgdriver.Tx) error {
		f, err := tx.Fetch(e.ctx, tgdriver.Fetch{})
		if err != nil || len(f.Locked)+len(f.Updated)+len(f.Claimable) != 0 {
			t.Errorf("empty Fetch = %+v, %v", f, err)
		}
		f, err = tx.Fetch(e.ctx, tgdriver.Fetch{Lock: []string{"none"}, Claims: []tgdriver.ClaimScan{{N: 0}, {N: 5}}})
		if err != nil || len(f.Locked) != 0 || len(f.Claimable) != 2 || len(f.Claimable[0])+len(f.Claimable[1]) != 0 {
			t.Errorf("Fetch of nothing = %+v, %v", f, err)
		}
		if err := tx.Apply(e.ctx, tgdriver.Apply{}); err != nil {
			t.Errorf("empty Apply = %v", err)
		}
		return nil
	})
}
