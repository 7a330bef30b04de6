package drivertest

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// workflowTests: workflow rows and their chain heads.
var workflowTests = []test{
	{"EnsureLockAndRead", testWorkflows},
	{"IDsInByteOrder", testIDOrder},
}

// taskTests: task rows, edges and the lookups over them.
var taskTests = []test{
	{"InsertAndRead", testInsertAndRead},
	{"ListTasks", testListTasks},
	{"WorkflowTaskStates", testWorkflowTaskStates},
	{"Counts", testCounts},
	{"Usage", testUsage},
	{"EdgesAndDependencies", testEdges},
	{"DecrementUnmet", testDecrementUnmet},
	{"UnfinishedAndCancelled", testUnfinished},
}

func testWorkflows(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.write(func(tx tgdriver.Tx) error {
		if ok, err := tx.LockWorkflow(e.ctx, "b"); ok || err != nil {
			t.Errorf("LockWorkflow of a missing workflow: %v %v, want false, nil", ok, err)
		}
		if _, _, err := tx.ChainHead(e.ctx, "b"); !errors.Is(err, tgdriver.ErrNoRows) {
			t.Errorf("ChainHead of a missing workflow: %v, want ErrNoRows", err)
		}
		if n, err := tx.EnsureWorkflow(e.ctx, "b", 500); n != 0 || err != nil {
			t.Errorf("EnsureWorkflow of a new workflow: %d %v, want 0", n, err)
		}
		if n, err := tx.EnsureWorkflow(e.ctx, "b", 900); n != 0 || err != nil {
			t.Errorf("EnsureWorkflow again: %d %v, want 0", n, err)
		}
		if err := tx.AddWorkflowTasks(e.ctx, "b", 3); err != nil {
			return err
		}
		if n, err := tx.EnsureWorkflow(e.ctx, "b", 900); n != 3 || err != nil {
			t.Errorf("EnsureWorkflow after AddWorkflowTasks(3): %d %v, want 3", n, err)
		}
		if err := tx.AddWorkflowTasks(e.ctx, "b", 2); err != nil {
			return err
		}
		if ok, err := tx.LockWorkflow(e.ctx, "b"); !ok || err != nil {
			t.Errorf("LockWorkflow of an existing workflow: %v %v, want true", ok, err)
		}
		if head, n, err := tx.ChainHead(e.ctx, "b"); head != "" || n != 0 || err != nil {
			t.Errorf("ChainHead of a new workflow: %q %d %v, want \"\" 0", head, n, err)
		}
		for _, wf := range []string{"c", "a"} {
			if _, err := tx.EnsureWorkflow(e.ctx, wf, 700); err != nil {
				return err
			}
		}
		return nil
	})
	// The row is created with nowMS, and a second EnsureWorkflow changes
	// nothing of it.
	b := tgdriver.WorkflowRow{WorkflowID: "b", TaskCount: 5, CreatedAtMS: 500, UpdatedAtMS: 500}
	e.eachReads(func(r tgdriver.Reads) error {
		if w, err := r.Workflow(e.ctx, "b"); err != nil || w != b {
			return fmt.Errorf("Workflow(b) = %+v, %v; want %+v", w, err, b)
		}
		if _, err := r.Workflow(e.ctx, "none"); !errors.Is(err, tgdriver.ErrNoRows) {
			return fmt.Errorf("a missing workflow: Workflow: %v, want ErrNoRows", err)
		}
		ws, err := r.Workflows(e.ctx)
		if err != nil {
			return err
		}
		var ids []string
		for _, w := range ws {
			ids = append(ids, w.WorkflowID)
		}
		if !eq(ids, []string{"a", "b", "c"}) {
			return fmt.Errorf("the order of Workflows: %v, want [a b c] (workflow_id order)", ids)
		}
		return nil
	})
}

// testInsertAndRead: InsertTasks stores every column of each row (its
// Seq is ignored), zero values of nullable columns as NULL, a result given
// with HasResult as a value (even ""), and returns seqs ascending in the
// rows' order; the three lookups read them back, or ErrNoRows, and
// TasksByNodes finds a workflow's existing nodes among those named.
func testInsertAndRead(t *testing.T, h Harness) {
	e := newEnv(t, h)
	full := fullTask("wf", "full")
	full.Seq = 12345
	zero := task("wf", "zero")
	empty := task("wf", "empty") // a result that is the empty string
	empty.HasResult = true
	var seqs []int64
	e.write(func(tx tgdriver.Tx) error {
		if _, err := tx.EnsureWorkflow(e.ctx, "wf", 1000); err != nil {
			return err
		}
		var err error
		seqs, err = tx.InsertTasks(e.ctx, []tgdriver.TaskRow{full, zero, empty})
		if err != nil || len(seqs) != 3 {
			return fmt.Errorf("InsertTasks: %v, %v", seqs, err)
		}
		got, err := tx.TasksByNodes(e.ctx, "wf", []string{"empty", "none", "full", "empty"})
		if err != nil {
			return fmt.Errorf("TasksByNodes: %w", err)
		}
		nodes := []string{}
		for _, r := range got {
			nodes = append(nodes, r.NodeID)
		}
		slices.Sort(nodes)
		if !eq(nodes, []string{"empty", "full"}) {
			t.Errorf("TasksByNodes(wf, [empty none full empty]) found %v, want [empty full], each once", nodes)
		}
		if got, err := tx.TasksByNodes(e.ctx, "other", []string{"full"}); err != nil || len(got) != 0 {
			t.Errorf("TasksByNodes of another workflow's node: %v, %v; want none", got, err)
		}
		return nil
	})
	if seqs[0] == 12345 || seqs[0] >= seqs[1] || seqs[1] >= seqs[2] {
		t.Fatalf("seqs %v: want new seqs, ascending in the rows' order (the given Seq is ignored)", seqs)
	}
	full.Seq, zero.Seq, empty.Seq = seqs[0], seqs[1], seqs[2]
	e.eachReads(func(r tgdriver.Reads) error {
		for _, want := range []tgdriver.TaskRow{full, zero, empty} {
			byID, err := r.TaskByID(e.ctx, want.TaskID)
			if err != nil {
				return fmt.Errorf("TaskByID(%s): %w", want.TaskID, err)
			}
			if d := diffTask(byID, want); d != "" {
				return fmt.Errorf("TaskByID(%s): %s", want.TaskID, d)
			}
			bySeq, err := r.TaskBySeq(e.ctx, want.Seq)
			if err != nil || diffTask(bySeq, want) != "" {
				return fmt.Errorf("TaskBySeq(%d): %v %s", want.Seq, err, diffTask(bySeq, want))
			}
			byNode, err := r.TaskByNode(e.ctx, want.WorkflowID, want.NodeID)
			if err != nil || diffTask(byNode, want) != "" {
				return fmt.Errorf("TaskByNode(%s): %v %s", want.NodeID, err, diffTask(byNode, want))
			}
		}
		if _, err := r.TaskByID(e.ctx, "none"); !errors.Is(err, tgdriver.ErrNoRows) {
			return fmt.Errorf("TaskByID of a missing task: %v, want ErrNoRows", err)
		}
		if _, err := r.TaskBySeq(e.ctx, 999999); !errors.Is(err, tgdriver.ErrNoRows) {
			return fmt.Errorf("TaskBySeq of a missing task: %v, want ErrNoRows", err)
		}
		if _, err := r.TaskByNode(e.ctx, "wf", "none"); !errors.Is(err, tgdriver.ErrNoRows) {
			return fmt.Errorf("TaskByNode of a missing node: %v, want ErrNoRows", err)
		}
		if _, err := r.TaskByNode(e.ctx, "other", "full"); !errors.Is(err, tgdriver.ErrNoRows) {
			return fmt.Errorf("TaskByNode of another workflow's node: %v, want ErrNoRows", err)
		}
		return nil
	})
	if n := e.count(`SELECT COUNT(*) FROM tasks WHERE seq = 12345`); n != 0 {
		t.Errorf("InsertTask used the given Seq")
	}
	const nullable = `SELECT owner, token_hash, lease_expires_at_ms, lease_ms, result, error, cancel_cause, created_by FROM tasks WHERE seq = ?`
	if got, want := e.raw(nullable, zero.Seq), []string{"NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL"}; !eq(got, want) {
		t.Errorf("the zero task's nullable columns are %v, want every one NULL", got)
	}
	if got, want := e.raw(nullable, full.Seq), []string{`"worker-1"`, `"\x00\x01\x02\xfe\xff"`, "9000", "3000", `"{\"r\":1}"`, `"boom"`, "77", `"alice"`}; !eq(got, want) {
		t.Errorf("the full task's nullable columns are %v, want %v", got, want)
	}
	if got := e.raw(`SELECT result FROM tasks WHERE seq = ?`, empty.Seq); got[0] != `""` {
		t.Errorf("a result \"\" given with HasResult is stored as %s, want the empty string", got[0])
	}
	// Inserting a second task of one node is refused.
	err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
		_, err := InsertTask(e.ctx, tx, task("wf", "zero"))
		return err
	})
	if err == nil {
		t.Error("InsertTask of an existing node succeeded")
	}
}

// testListTasks: filters, seq order, Limit, NoBodies.
func testListTasks(t *testing.T, h Harness) {
	e := newEnv(t, h)
	a, d, b := task("wf1", "a"), task("wf2", "d"), task("wf1", "b")
	ee, c := task("wf2", "e"), task("wf1", "c")
	b.State, ee.State = "claimed", "completed"
	ee.Result, ee.HasResult = `{"big":"body"}`, true
	rows := []tgdriver.TaskRow{a, d, b, ee, c}
	for i, s := range e.insert(rows...) {
		rows[i].Seq = s
	}
	a, d, b, ee, c = rows[0], rows[1], rows[2], rows[3], rows[4]
	cases := []struct {
		f    tgdriver.ListFilter
		want []tgdriver.TaskRow
	}{
		{tgdriver.ListFilter{}, []tgdriver.TaskRow{a, d, b, ee, c}},
		{tgdriver.ListFilter{WorkflowID: "wf1"}, []tgdriver.TaskRow{a, b, c}},
		{tgdriver.ListFilter{State: "pending"}, []tgdriver.TaskRow{a, d, c}},
		{tgdriver.ListFilter{WorkflowID: "wf1", State: "pending"}, []tgdriver.TaskRow{a, c}},
		{tgdriver.ListFilter{Limit: 2}, []tgdriver.TaskRow{a, d}},
		{tgdriver.ListFilter{State: "pending", Limit: 1}, []tgdriver.TaskRow{a}},
		{tgdriver.ListFilter{WorkflowID: "wf2", Limit: 10}, []tgdriver.TaskRow{d, ee}},
		{tgdriver.ListFilter{WorkflowID: "none"}, nil},
		{tgdriver.ListFilter{State: "failed"}, nil},
	}
	e.eachReads(func(r tgdriver.Reads) error {
		for _, tc := range cases {
			for _, noBodies := range []bool{false, true} {
				f := tc.f
				f.NoBodies = noBodies
				got, err := r.ListTasks(e.ctx, f)
				if err != nil {
					return fmt.Errorf("ListTasks(%+v): %w", f, err)
				}
				if !eq(seqsOf(got), seqsOf(tc.want)) {
					return fmt.Errorf("ListTasks(%+v) = seqs %v, want %v", f, seqsOf(got), seqsOf(tc.want))
				}
				for i, want := range tc.want {
					if noBodies {
						want.Payload, want.Result, want.HasResult = "null", "", false
					}
					if d := diffTask(got[i], want); d != "" {
						return fmt.Errorf("ListTasks(%+v) row %d: %s", f, i, d)
					}
				}
			}
		}
		return nil
	})
}

// testWorkflowTaskStates: the audited columns of a workflow's tasks, in
// seq order, only its own; it stops at fn's first error.
func testWorkflowTaskStates(t *testing.T, h Harness) {
	e := newEnv(t, h)
	empty := task("wf", "empty")
	empty.HasResult = true
	rows := e.inserted(fullTask("wf", "full"), task("other", "x"), task("wf", "zero"), empty)
	state := func(r tgdriver.TaskRow) tgdriver.TaskStateRow {
		return tgdriver.TaskStateRow{Seq: r.Seq, TaskID: r.TaskID, Payload: r.Payload, State: r.State, Owner: r.Owner,
			Generation: r.Generation, Attempts: r.Attempts, Result: r.Result, HasResult: r.HasResult, Error: r.Error,
			NodeID: r.NodeID, DependsOn: r.DependsOn, MaxAttempts: r.MaxAttempts, Priority: r.Priority, Requires: r.Requires,
			RetryDelayMS: r.RetryDelayMS, Kind: r.Kind, GateTimeoutMS: r.GateTimeoutMS, GateOnTimeout: r.GateOnTimeout}
	}
	want := []tgdriver.TaskStateRow{state(rows[0]), state(rows[2]), state(rows[3])}
	e.eachReads(func(r tgdriver.Reads) error {
		var got []tgdriver.TaskStateRow
		if err := r.WorkflowTaskStates(e.ctx, "wf", func(s tgdriver.TaskStateRow) error { got = append(got, s); return nil }); err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("WorkflowTaskStates(wf) = %+v, want %+v", got, want)
		}
		stop, calls := errors.New("stop"), 0
		if err := r.WorkflowTaskStates(e.ctx, "wf", func(tgdriver.TaskStateRow) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
			return fmt.Errorf("WorkflowTaskStates with a failing fn: %v after %d calls", err, calls)
		}
		calls = 0
		if err := r.WorkflowTaskStates(e.ctx, "none", func(tgdriver.TaskStateRow) error { calls++; return nil }); err != nil || calls != 0 {
			return fmt.Errorf("WorkflowTaskStates of a missing workflow: %d calls, %v", calls, err)
		}
		return nil
	})
}

// testCounts: CountByState over every workflow; WorkflowCounts per state
// of one workflow with its stuck claims (lease expired at or before now;
// a claim without a lease is not stuck).
func testCounts(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.eachReads(func(r tgdriver.Reads) error {
		if m, err := r.CountByState(e.ctx); err != nil || len(m) != 0 {
			return fmt.Errorf("CountByState of an empty database: %v %v", m, err)
		}
		if m, stuck, err := r.WorkflowCounts(e.ctx, "wf1", 0); err != nil || len(m) != 0 || stuck != 0 {
			return fmt.Errorf("WorkflowCounts of a missing workflow: %v %d %v", m, stuck, err)
		}
		return nil
	})
	var rows []tgdriver.TaskRow
	add := func(wf, node, state string, lease int64) {
		r := task(wf, node)
		r.State, r.LeaseExpiresAtMS = state, lease
		rows = append(rows, r)
	}
	add("wf1", "p1", "pending", 0)
	add("wf1", "p2", "pending", 0)
	add("wf1", "c1", "claimed", 100)
	add("wf1", "c2", "claimed", 200)
	add("wf1", "c3", "claimed", 0)
	add("wf1", "done", "completed", 0)
	add("wf2", "c1", "claimed", 50)
	add("wf2", "b1", "blocked", 0)
	add("wf2", "f1", "failed", 0)
	add("wf2", "x1", "cancelled", 0)
	e.insert(rows...)
	e.eachReads(func(r tgdriver.Reads) error {
		all := map[string]int{"pending": 2, "claimed": 4, "completed": 1, "blocked": 1, "failed": 1, "cancelled": 1}
		if m, err := r.CountByState(e.ctx); err != nil || !maps.Equal(m, all) {
			return fmt.Errorf("CountByState = %v, %v; want %v", m, err, all)
		}
		wf1 := map[string]int{"pending": 2, "claimed": 3, "completed": 1}
		for _, tc := range []struct {
			now   int64
			stuck int
		}{{99, 0}, {100, 1}, {199, 1}, {200, 2}, {1 << 40, 2}} {
			m, stuck, err := r.WorkflowCounts(e.ctx, "wf1", tc.now)
			if err != nil || !maps.Equal(m, wf1) || stuck != tc.stuck {
				return fmt.Errorf("WorkflowCounts(wf1, %d) = %v, %d, %v; want %v, %d", tc.now, m, stuck, err, wf1, tc.stuck)
			}
		}
		return nil
	})
}

// testEdges: InsertEdges counts each edge in its dependency's dependents,
// a dependency named twice in one call twice; Dependencies, WorkflowEdges
// and LockDependencies read them.
func testEdges(t *testing.T, h Harness) {
	e := newEnv(t, h)
	rows := []tgdriver.TaskRow{task("wf", "a"), task("wf", "b"), task("wf", "c"), task("wf", "d"), task("other", "x"), task("other", "y")}
	rows[2].State, rows[2].Unmet, rows[3].State, rows[3].Unmet = "blocked", 2, "blocked", 1
	rows[1].State = "completed"
	s := e.insert(rows...)
	a, b, c, d, x, y := s[0], s[1], s[2], s[3], s[4], s[5]
	e.write(func(tx tgdriver.Tx) error {
		return tx.InsertEdges(e.ctx, []tgdriver.Edge{{Dep: b, Task: c}, {Dep: a, Task: c}, {Dep: a, Task: d}, {Dep: x, Task: y}})
	})
	e.eachReads(func(r tgdriver.Reads) error {
		for seq, want := range map[int64]int{a: 2, b: 1, c: 0, d: 0, x: 1} {
			if got, err := r.TaskBySeq(e.ctx, seq); err != nil || got.Dependents != want {
				return fmt.Errorf("task %d has Dependents %d (%v), want %d", seq, got.Dependents, err, want)
			}
		}
		deps, err := r.Dependencies(e.ctx, c)
		want := []tgdriver.DepRow{{Seq: a, TaskID: "wf.a", NodeID: "a", State: "pending"}, {Seq: b, TaskID: "wf.b", NodeID: "b", State: "completed"}}
		if err != nil || !reflect.DeepEqual(deps, want) {
			return fmt.Errorf("Dependencies(c) = %+v, %v; want %+v (seq order)", deps, err, want)
		}
		if deps, err := r.Dependencies(e.ctx, a); err != nil || len(deps) != 0 {
			return fmt.Errorf("a task without dependencies: Dependencies = %+v, %v", deps, err)
		}
		edges, err := r.WorkflowEdges(e.ctx, "wf")
		wantEdges := []tgdriver.EdgeRow{{Dependency: "a", Task: "c"}, {Dependency: "b", Task: "c"}, {Dependency: "a", Task: "d"}}
		if err != nil || !reflect.DeepEqual(edges, wantEdges) {
			return fmt.Errorf("WorkflowEdges(wf) = %+v, %v; want %+v (task seq, then dependency seq)", edges, err, wantEdges)
		}
		return nil
	})
	e.write(func(tx tgdriver.Tx) error {
		got, err := LockDependency(e.ctx, tx, "wf", "a")
		want := rows[0]
		want.Seq, want.Dependents = a, 2
		if err != nil || diffTask(got, want) != "" {
			t.Errorf("LockDependency(wf, a): %v %s", err, diffTask(got, want))
		}
		if _, err := LockDependency(e.ctx, tx, "wf", "none"); !errors.Is(err, tgdriver.ErrNoRows) {
			t.Errorf("LockDependency of a missing node: %v, want ErrNoRows", err)
		}
		if _, err := LockDependency(e.ctx, tx, "other", "a"); !errors.Is(err, tgdriver.ErrNoRows) {
			t.Errorf("LockDependency of another workflow's node: %v, want ErrNoRows", err)
		}
		rows, err := tx.LockDependencies(e.ctx, "wf", []string{"b", "none", "a", "b"})
		var seqs []int64
		for _, r := range rows {
			seqs = append(seqs, r.Seq)
		}
		slices.Sort(seqs)
		if err != nil || !slices.Equal(seqs, []int64{a, b}) {
			t.Errorf("LockDependencies(wf, [b none a b]) = seqs %v, %v; want %v, each once", seqs, err, []int64{a, b})
		}
		return nil
	})
}

// testDecrementUnmet: the unmet count of every blocked, pending or claimed
// dependent of the tasks given goes down by the number of them it depends
// on, and only theirs; each comes back whole, in task id order, with those
// of the given tasks it depends on and the dependencies it still waits
// for.
func testDecrementUnmet(t *testing.T, h Harness) {
	e := newEnv(t, h)
	dep, dep2, other := task("wf", "dep"), task("wf", "dep2"), task("wf", "other")
	dep.State, dep2.State = "completed", "completed"
	rows := []tgdriver.TaskRow{dep, dep2, other}
	for _, st := range []string{"blocked", "pending", "claimed", "completed", "failed", "cancelled"} {
		r := task("wf", st)
		r.State, r.Unmet = st, 2
		if st == "blocked" { // it waits for dep, dep2 and other
			r.Kind, r.Unmet = tgdriver.KindGate, 3
		}
		rows = append(rows, r)
	}
	lone := task("wf", "lone")
	rows = append(rows, lone)
	s := e.insert(rows...)
	e.write(func(tx tgdriver.Tx) error {
		edges := []tgdriver.Edge{{Dep: s[1], Task: s[3]}, {Dep: s[2], Task: s[3]}}
		for _, d := range s[3:9] {
			edges = append(edges, tgdriver.Edge{Dep: s[0], Task: d})
		}
		return tx.InsertEdges(e.ctx, edges)
	})
	var got []tgdriver.Dependent
	e.write(func(tx tgdriver.Tx) error {
		var err error
		if got, err = tx.DecrementUnmet(e.ctx, []int64{s[1], s[0]}); err != nil {
			return err
		}
		if none, err := tx.DecrementUnmet(e.ctx, []int64{s[9]}); err != nil || len(none) != 0 {
			t.Errorf("DecrementUnmet of a task without dependents = %+v, %v", none, err)
		}
		return nil
	})
	type brief struct {
		Node, State, Kind string
		Unmet             int
		By                []int64
		Waiting           []string
	}
	var briefs []brief
	for _, d := range got {
		if d.Row.Seq == 0 || d.Row.WorkflowID != "wf" || d.Row.Payload == "" {
			t.Errorf("DecrementUnmet returned %+v: want the whole row", d.Row)
		}
		briefs = append(briefs, brief{d.Row.NodeID, d.Row.State, d.Row.Kind, d.Row.Unmet, d.By, d.Waiting})
	}
	want := []brief{{"blocked", "blocked", tgdriver.KindGate, 1, []int64{s[0], s[1]}, []string{"other"}},
		{"claimed", "claimed", tgdriver.KindTask, 1, []int64{s[0]}, nil}, {"pending", "pending", tgdriver.KindTask, 1, []int64{s[0]}, nil}}
	if !reflect.DeepEqual(briefs, want) {
		t.Fatalf("DecrementUnmet = %+v, want %+v (task id order)", briefs, want)
	}
	for i, wantUnmet := range []int{1, 1, 1, 2, 2, 2} {
		if r := e.task(s[3+i]); r.Unmet != wantUnmet {
			t.Errorf("%s dependent: unmet %d, want %d", r.State, r.Unmet, wantUnmet)
		}
	}
	// A dependency whose dependents are all finished changes nothing.
	e.write(func(tx tgdriver.Tx) error {
		for _, seq := range s[3:6] {
			if _, _, err := tx.UpdateTask(e.ctx, seq, tgdriver.TaskSet{State: tgdriver.Val("cancelled"), UpdatedAtMS: 2}, tgdriver.TaskGuard{}); err != nil {
				return err
			}
		}
		if none, err := tx.DecrementUnmet(e.ctx, []int64{s[0]}); err != nil || len(none) != 0 {
			t.Errorf("DecrementUnmet with every dependent finished = %+v, %v", none, err)
		}
		return nil
	})
}

// testUnfinished: UnfinishedDependents, CancelledBy, UnfinishedInWorkflow.
func testUnfinished(t *testing.T, h Harness) {
	e := newEnv(t, h)
	rows := []tgdriver.TaskRow{task("wf", "root"), task("wf", "root2")}
	for _, st := range []string{"completed", "claimed", "blocked", "failed", "pending", "cancelled", "cancelled"} {
		r := task("wf", fmt.Sprintf("%s%d", st, len(rows)))
		r.State = st
		rows = append(rows, r)
	}
	other := task("other", "p")
	rows = append(rows, other)
	s := e.insert(rows...)
	root, root2 := s[0], s[1]
	// completed, claimed, blocked, failed, pending depend on root; the two
	// cancelled ones were cancelled by root and root2.
	e.write(func(tx tgdriver.Tx) error {
		for _, d := range s[2:7] {
			if err := InsertEdge(e.ctx, tx, root, d); err != nil {
				return err
			}
		}
		if err := InsertEdge(e.ctx, tx, root2, s[3]); err != nil {
			return err
		}
		return nil
	})
	e.set(s[7], tgdriver.TaskSet{CancelCause: tgdriver.Val(root), UpdatedAtMS: 2})
	e.set(s[8], tgdriver.TaskSet{CancelCause: tgdriver.Val(root2), UpdatedAtMS: 2})
	// A failed task with a cancel cause is not cancelled by it.
	e.set(s[5], tgdriver.TaskSet{CancelCause: tgdriver.Val(root), UpdatedAtMS: 2})
	e.write(func(tx tgdriver.Tx) error {
		if got, err := tx.UnfinishedDependents(e.ctx, root); err != nil || !eq(got, []int64{s[3], s[4], s[6]}) {
			t.Errorf("UnfinishedDependents(root) = %v, %v; want %v (blocked, pending, claimed, in seq order)", got, err, []int64{s[3], s[4], s[6]})
		}
		if got, err := tx.UnfinishedDependents(e.ctx, s[2]); err != nil || len(got) != 0 {
			t.Errorf("UnfinishedDependents without dependents = %v, %v", got, err)
		}
		if got, err := tx.CancelledBy(e.ctx, root); err != nil || !eq(got, []int64{s[7]}) {
			t.Errorf("CancelledBy(root) = %v, %v; want [%d]", got, err, s[7])
		}
		if got, err := tx.CancelledBy(e.ctx, root2); err != nil || !eq(got, []int64{s[8]}) {
			t.Errorf("CancelledBy(root2) = %v, %v; want [%d]", got, err, s[8])
		}
		if got, err := tx.CancelledBy(e.ctx, s[3]); err != nil || len(got) != 0 {
			t.Errorf("CancelledBy of a task that cancelled none = %v, %v", got, err)
		}
		want := []int64{root, root2, s[3], s[4], s[6]}
		if got, err := tx.UnfinishedInWorkflow(e.ctx, "wf"); err != nil || !eq(got, want) {
			t.Errorf("UnfinishedInWorkflow(wf) = %v, %v; want %v", got, err, want)
		}
		if got, err := tx.UnfinishedInWorkflow(e.ctx, "none"); err != nil || len(got) != 0 {
			t.Errorf("UnfinishedInWorkflow of a missing workflow = %v, %v", got, err)
		}
		return nil
	})
}

// testIDOrder: "workflow id order" and "task id order" (Reads.Workflows,
// Tx.LockChains, the locks of Tx.Fetch) are the ids' byte order, as Go's
// strings.Compare and the domain's sorts, whatever the database's
// collation: a database whose text sorts as a person would ("a" before
// "B") must not change which row comes, or is locked, first.
func testIDOrder(t *testing.T, h Harness) {
	e := newEnv(t, h)
	ids := []string{"b", "a", "B", "A", "a-b", "a b", "é", "z"}
	var rows []tgdriver.TaskRow
	for _, id := range ids {
		rows = append(rows, task(id, "n"))
	}
	e.insert(rows...)
	want := slices.Clone(ids)
	slices.Sort(want) // bytewise
	var taskIDs []string
	for _, id := range ids {
		taskIDs = append(taskIDs, id+".n")
	}
	wantTasks := slices.Clone(taskIDs)
	slices.Sort(wantTasks) // "a b.n" < "a-b.n" < "a.n": not the workflows' order
	e.eachReads(func(r tgdriver.Reads) error {
		ws, err := r.Workflows(e.ctx)
		var got []string
		for _, w := range ws {
			got = append(got, w.WorkflowID)
		}
		if err != nil || !eq(got, want) {
			return fmt.Errorf("Workflows() = %q, %v; want %q (byte order)", got, err, want)
		}
		return nil
	})
	e.write(func(tx tgdriver.Tx) error {
		ws, err := tx.LockChains(e.ctx, ids)
		if err != nil {
			return err
		}
		var got []string
		for _, w := range ws {
			got = append(got, w.WorkflowID)
		}
		if !eq(got, want) {
			t.Errorf("LockChains(%q) = %q, want %q (byte order)", ids, got, want)
		}
		f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Lock: taskIDs})
		if err != nil {
			return err
		}
		got = got[:0]
		for _, r := range f.Locked {
			got = append(got, r.TaskID)
		}
		if !eq(got, wantTasks) {
			t.Errorf("Fetch locked %q, want %q (byte order)", got, wantTasks)
		}
		return nil
	})
}

// testUsage: a task's report and usage columns are set by UpdateTask
// (Report to a value or NULL, Usage and PriorUsage as numbers, floats
// exactly), read back with the task, and summed by WorkflowUsage per
// workflow and over all ("" ) without reading the rows.
func testUsage(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.eachReads(func(r tgdriver.Reads) error {
		if u, err := r.WorkflowUsage(e.ctx, ""); err != nil || u != (tgdriver.Usage{}) {
			return fmt.Errorf("WorkflowUsage of an empty database: %+v, %v", u, err)
		}
		return nil
	})
	s := e.insert(task("wf1", "a"), task("wf1", "b"), task("wf2", "c"))
	if r := e.task(s[0]); r.Report != "" || r.Usage != (tgdriver.Usage{}) || r.PriorUsage != (tgdriver.Usage{}) {
		t.Fatalf("a new task has report %q, usage %+v, prior %+v; want none", r.Report, r.Usage, r.PriorUsage)
	}
	rep := `{"generation":1,"status_message":"héllo"}`
	got := e.set(s[0], tgdriver.TaskSet{Report: tgdriver.Val(rep), Usage: tgdriver.Val(tgdriver.Usage{InputTokens: 1 << 40, OutputTokens: 7, CostUSD: 0.1}),
		PriorUsage: tgdriver.Val(tgdriver.Usage{InputTokens: 3, OutputTokens: 4, CostUSD: 0.2}), UpdatedAtMS: 2000})
	for _, r := range []tgdriver.TaskRow{got, e.task(s[0])} {
		if r.Report != rep || r.Usage != (tgdriver.Usage{InputTokens: 1 << 40, OutputTokens: 7, CostUSD: 0.1}) || r.PriorUsage != (tgdriver.Usage{InputTokens: 3, OutputTokens: 4, CostUSD: 0.2}) {
			t.Fatalf("after the update: report %q, usage %+v, prior %+v", r.Report, r.Usage, r.PriorUsage)
		}
	}
	e.set(s[1], tgdriver.TaskSet{Usage: tgdriver.Val(tgdriver.Usage{InputTokens: 10, CostUSD: 0.25}), UpdatedAtMS: 2000})
	e.set(s[2], tgdriver.TaskSet{PriorUsage: tgdriver.Val(tgdriver.Usage{OutputTokens: 5, CostUSD: 1}), UpdatedAtMS: 2000})
	if r := e.set(s[0], tgdriver.TaskSet{Report: tgdriver.Null[string](), UpdatedAtMS: 3000}); r.Report != "" || r.Usage.OutputTokens != 7 {
		t.Fatalf("Report set to NULL: report %q, usage %+v; want no report and the usage left alone", r.Report, r.Usage)
	}
	e.eachReads(func(r tgdriver.Reads) error {
		for _, tc := range []struct {
			wf   string
			want tgdriver.Usage
		}{
			{"wf1", tgdriver.Usage{InputTokens: 1<<40 + 13, OutputTokens: 11, CostUSD: 0.1 + 0.2 + 0.25}},
			{"wf2", tgdriver.Usage{OutputTokens: 5, CostUSD: 1}},
			{"none", tgdriver.Usage{}},
		} {
			u, err := r.WorkflowUsage(e.ctx, tc.wf)
			if err != nil || u.InputTokens != tc.want.InputTokens || u.OutputTokens != tc.want.OutputTokens || math.Abs(u.CostUSD-tc.want.CostUSD) > 1e-9 {
				return fmt.Errorf("WorkflowUsage(%q) = %+v, %v; want %+v", tc.wf, u, err, tc.want)
			}
		}
		u, err := r.WorkflowUsage(e.ctx, "")
		if err != nil || u.InputTokens != 1<<40+13 || u.OutputTokens != 16 || math.Abs(u.CostUSD-1.55) > 1e-9 {
			return fmt.Errorf("WorkflowUsage over all = %+v, %v", u, err)
		}
		return nil
	})
	var bad tgdriver.TaskSet
	bad.Usage, bad.UpdatedAtMS = tgdriver.Null[tgdriver.Usage](), 1
	if err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
		_, _, err := tx.UpdateTask(e.ctx, s[0], bad, tgdriver.TaskGuard{})
		return err
	}); !errors.Is(err, tgdriver.ErrBadUpdate) {
		t.Fatalf("Usage set to NULL: %v, want ErrBadUpdate", err)
	}
}
