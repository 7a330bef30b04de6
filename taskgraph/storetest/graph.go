package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// graphTests: readiness, validation of the graph, cascades, retries and idempotent creation.
var graphTests = []test{
	{"DiamondOrder", testDiamondOrder},
	{"WorkflowSummaryCountsWithoutExpiring", testWorkflowSummary},
	{"WorkflowGraphWithoutBodies", testWorkflowGraph},
	{"RecentWorkflowsNewestFirst", testRecentWorkflows},
	{"PeekTaskLeavesALapsedLease", testPeekTask},
	{"RejectedGraphsWriteNothing", testRejectedGraphsWriteNothing},
	{"RefusedGraphIsAllOrNothing", testRefusedGraphIsAllOrNothing},
	{"FailureCancelsDownstream", testFailureCancelsDownstream},
	{"GraphOnAFailedNodeStartsCancelled", testGraphOnAFailedNodeStartsCancelled},
	{"RetryUpToMaxAttempts", testRetryUpToMaxAttempts},
	{"IdempotentCreate", testIdempotentCreate},
	{"BlockedStatusNamesOnlyUnfinishedDependencies", testBlockedStatusNamesOnlyUnfinishedDependencies},
}

func testDiamondOrder(t *testing.T, h Harness) {
	e := setup(t, h)
	out, err := e.S.CreateWorkflow(e.Ctx, "diamond", []tg.NodeSpec{
		{NodeID: "d", DependsOn: []string{"b", "c"}},
		{NodeID: "b", DependsOn: []string{"a"}},
		{NodeID: "c", DependsOn: []string{"a"}},
		{NodeID: "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, c := range out {
		ids[c.Task.NodeID] = c.Task.TaskID
	}
	e.WantState(t, ids["a"], tg.StatePending)
	e.WantState(t, ids["d"], tg.StateBlocked)
	step := func(wantNodes ...string) {
		t.Helper()
		var got []string
		var claims []tg.Claimed
		for {
			c, ok := e.ClaimNext(t, "w", "diamond")
			if !ok {
				break
			}
			got = append(got, c.Task.NodeID)
			claims = append(claims, c)
		}
		if strings.Join(got, ",") != strings.Join(wantNodes, ",") {
			t.Fatalf("claimable %v, want %v", got, wantNodes)
		}
		for _, c := range claims {
			if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	step("a")
	step("b", "c")
	step("d")
	step()
	v, err := e.S.Workflow(e.Ctx, "diamond")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Finished() || v.Counts[tg.StateCompleted] != 4 || len(v.Edges) != 4 {
		t.Fatalf("workflow view: counts %v edges %v", v.Counts, v.Edges)
	}
	e.Verify(t)
}

func testRejectedGraphsWriteNothing(t *testing.T, h Harness) {
	e := setup(t, h)
	e.Create(t, "wf", "root")
	before := e.DB.Snapshot(t)
	for name, nodes := range map[string][]tg.NodeSpec{
		"cycle":      {{NodeID: "x", DependsOn: []string{"y"}}, {NodeID: "y", DependsOn: []string{"z"}}, {NodeID: "z", DependsOn: []string{"x"}}},
		"self":       {{NodeID: "x", DependsOn: []string{"x"}}},
		"unknown":    {{NodeID: "x", DependsOn: []string{"root"}}, {NodeID: "y", DependsOn: []string{"nope"}}},
		"duplicates": {{NodeID: "x"}, {NodeID: "x"}},
	} {
		_, err := e.S.CreateWorkflow(e.Ctx, "wf", nodes)
		if !errors.Is(err, tg.ErrInvalid) {
			t.Errorf("%s: err = %v, want tg.ErrInvalid", name, err)
		}
		var ve *tg.ValidationError
		if !errors.As(err, &ve) || ve.Field == "" {
			t.Errorf("%s: no field named in %v", name, err)
		}
		if after := e.DB.Snapshot(t); after != before {
			t.Errorf("%s: the database changed", name)
		}
	}
	_, err := e.S.CreateWorkflow(e.Ctx, "wf", []tg.NodeSpec{{NodeID: "x", DependsOn: []string{"y"}}, {NodeID: "y", DependsOn: []string{"x"}}})
	if err == nil || !strings.Contains(err.Error(), "cycle") || !strings.Contains(err.Error(), `node "x"`) || !strings.Contains(err.Error(), "x -> y -> x") {
		t.Errorf("cycle error does not name the node and the cycle's path: %v", err)
	}
	// A node downstream of a cycle is not on it: the path is the cycle's.
	_, err = e.S.CreateWorkflow(e.Ctx, "wf", []tg.NodeSpec{{NodeID: "a", DependsOn: []string{"x"}}, {NodeID: "x", DependsOn: []string{"z"}},
		{NodeID: "y", DependsOn: []string{"x", "root"}}, {NodeID: "z", DependsOn: []string{"y"}}})
	if err == nil || !strings.Contains(err.Error(), "x -> z -> y -> x") || strings.Contains(err.Error(), "a ->") {
		t.Errorf("cycle error does not give the cycle's path: %v", err)
	}
	e.Verify(t)
}

// testRefusedGraphIsAllOrNothing: a whole graph refused late — its last node
// names an unknown dependency, or repeats an existing node with different
// content — after every other node was inserted leaves nothing behind: no
// task, no event, no workflow, the audit chain's head unchanged, and the
// history still verifies. The same graph, corrected, is then created whole,
// and created again returns the same tasks.
func testRefusedGraphIsAllOrNothing(t *testing.T, h Harness) {
	e := setup(t, h)
	e.Create(t, "old", "root")
	chain := func(n int) []tg.NodeSpec {
		specs := make([]tg.NodeSpec, n)
		for i := range specs {
			specs[i] = tg.NodeSpec{NodeID: fmt.Sprintf("n%03d", i), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
			if i > 0 {
				specs[i].DependsOn = []string{fmt.Sprintf("n%03d", i-1)}
			}
		}
		return specs
	}
	head, err := e.S.AuditHead(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := e.DB.Snapshot(t)
	unknown := append(chain(300), tg.NodeSpec{NodeID: "last", DependsOn: []string{"n299", "nope"}})
	conflict := append(chain(300), tg.NodeSpec{NodeID: "root", Payload: json.RawMessage(`{"different":true}`)})
	for _, c := range []struct {
		name, wf string
		nodes    []tg.NodeSpec
		want     error
		says     string
	}{
		{"unknown dependency, new workflow", "new", unknown, tg.ErrInvalid, `node "last" depends on "nope"`},
		{"unknown dependency, existing workflow", "old", unknown, tg.ErrInvalid, `node "last" depends on "nope"`},
		{"conflicting node", "old", conflict, tg.ErrConflict, `node "root" already exists`},
	} {
		_, err := e.S.CreateWorkflow(e.Ctx, c.wf, c.nodes)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: err = %v, want %v saying %s", c.name, err, c.want, c.says)
		}
		if e.DB.Snapshot(t) != before {
			t.Errorf("%s: the database changed", c.name)
		}
		if got, err := e.S.AuditHead(e.Ctx); err != nil || got != head {
			t.Errorf("%s: audit head %v (err %v), want %v unchanged", c.name, got, err, head)
		}
		if _, err := e.S.WorkflowSummary(e.Ctx, "new"); !errors.Is(err, tg.ErrNotFound) {
			t.Errorf("%s: workflow new exists after a refused creation (err %v)", c.name, err)
		}
	}
	e.Verify(t)
	fixed := append(chain(300), tg.NodeSpec{NodeID: "last", DependsOn: []string{"n299"}})
	made, err := e.S.CreateWorkflow(e.Ctx, "new", fixed)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.S.CreateWorkflow(e.Ctx, "new", fixed)
	if err != nil {
		t.Fatal(err)
	}
	for i := range made {
		if !made[i].Created || again[i].Created || again[i].Task.TaskID != made[i].Task.TaskID {
			t.Fatalf("node %d: first %+v, again %+v: a repeated graph must return the same tasks", i, made[i], again[i])
		}
	}
	if made[0].Task.State != tg.StatePending || made[300].Task.State != tg.StateBlocked {
		t.Errorf("states %s, %s; want pending, blocked", made[0].Task.State, made[300].Task.State)
	}
	e.Verify(t)
}

func testFailureCancelsDownstream(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	bb := e.Create(t, "wf", "b", "a")
	c := e.Create(t, "wf", "c", "b")
	other := e.Create(t, "wf", "other")
	ca := e.Claim(t, "w", a.TaskID, 0)
	failed, err := e.S.Fail(e.Ctx, holder(ca), "disk full", false)
	if err != nil {
		t.Fatal(err)
	}
	if failed.State != tg.StateFailed || failed.Error != "disk full" {
		t.Fatalf("failed task: %+v", failed)
	}
	for _, id := range []string{bb.TaskID, c.TaskID} {
		tk := e.WantState(t, id, tg.StateCancelled)
		if !strings.Contains(tk.StatusMessage, a.TaskID) || !strings.Contains(tk.StatusMessage, "failed") {
			t.Errorf("status %q does not name the upstream task", tk.StatusMessage)
		}
	}
	e.WantState(t, other.TaskID, tg.StatePending)
	// A task created on a failed dependency cannot run: it starts cancelled.
	late := e.Create(t, "wf", "late", "c")
	if late.State != tg.StateCancelled {
		t.Fatalf("late dependent is %s", late.State)
	}
	e.Verify(t)
}

// testGraphOnAFailedNodeStartsCancelled: one creation, its nodes listed
// against their dependency order, mixes a chain on a failed task (each
// link starts cancelled, caused by the link before it, itself made by
// the same creation), a node on a pending one and a node on nothing. Each
// is made in dependency order (seqs ascend along the chain), with one edge
// per dependency and the right cause, and repeating the creation makes
// nothing new.
func testGraphOnAFailedNodeStartsCancelled(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	e.Create(t, "wf", "other")
	if _, err := e.S.Fail(e.Ctx, holder(e.Claim(t, "w", a.TaskID, 0)), "disk full", false); err != nil {
		t.Fatal(err)
	}
	specs := []tg.NodeSpec{
		{NodeID: "z", DependsOn: []string{"y", "other"}}, {NodeID: "w", DependsOn: []string{"other"}},
		{NodeID: "y", DependsOn: []string{"x"}}, {NodeID: "q"}, {NodeID: "x", DependsOn: []string{"a"}},
	}
	out, err := e.S.CreateWorkflow(e.Ctx, "wf", specs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]tg.State{"z": tg.StateCancelled, "w": tg.StateBlocked, "y": tg.StateCancelled, "q": tg.StatePending, "x": tg.StateCancelled}
	for i, c := range out {
		if !c.Created || c.Task.NodeID != specs[i].NodeID || c.Task.State != want[c.Task.NodeID] {
			t.Errorf("out[%d] = node %s, %s, created %v; want node %s, %s, created", i, c.Task.NodeID, c.Task.State, c.Created, specs[i].NodeID, want[specs[i].NodeID])
		}
	}
	rows := e.DB.Query(t, `SELECT t.node_id, t.seq, COALESCE(c.node_id, '') FROM tasks t LEFT JOIN tasks c ON c.seq = t.cancel_cause
		WHERE t.workflow_id = 'wf' ORDER BY t.seq`)
	var chain []string
	causes := map[string]string{}
	for _, r := range rows {
		causes[r[0]] = r[2]
		if r[0] == "x" || r[0] == "y" || r[0] == "z" {
			chain = append(chain, r[0])
		}
	}
	if !slices.Equal(chain, []string{"x", "y", "z"}) {
		t.Errorf("the chain's tasks in seq order: %v, want [x y z] (dependency order)", chain)
	}
	if wantCauses := map[string]string{"a": "", "other": "", "z": "y", "w": "", "y": "x", "q": "", "x": "a"}; !reflect.DeepEqual(causes, wantCauses) {
		t.Errorf("cancel causes by node: %v, want %v", causes, wantCauses)
	}
	edges := e.DB.Query(t, `SELECT d.node_id, t.node_id FROM edges ed JOIN tasks d ON d.seq = ed.dep_seq JOIN tasks t ON t.seq = ed.task_seq
		WHERE t.workflow_id = 'wf' ORDER BY t.node_id, d.node_id`)
	if got, want := fmt.Sprint(edges), "[[other w] [a x] [x y] [other z] [y z]]"; got != want {
		t.Errorf("edges (dependency, task): %s, want %s", got, want)
	}
	again, err := e.S.CreateWorkflow(e.Ctx, "wf", specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range again {
		if c.Created || c.Task.TaskID != out[i].Task.TaskID {
			t.Errorf("repeated creation: out[%d] = %s created %v, want %s not created", i, c.Task.TaskID, c.Created, out[i].Task.TaskID)
		}
	}
	e.Verify(t)
}

func testRetryUpToMaxAttempts(t *testing.T, h Harness) {
	e := setup(t, h)
	c, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "flaky", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	dep := e.Create(t, "wf", "after", "flaky")
	for attempt := 1; attempt <= 3; attempt++ {
		cl, ok := e.ClaimNext(t, "w", "wf")
		if !ok || cl.Task.TaskID != c.Task.TaskID || cl.Task.Attempts != attempt {
			t.Fatalf("attempt %d: claimed %+v ok=%v", attempt, cl.Task, ok)
		}
		tk, err := e.S.Fail(e.Ctx, holder(cl), "timeout", true)
		if err != nil {
			t.Fatal(err)
		}
		want := tg.StatePending
		if attempt == 3 {
			want = tg.StateFailed
		}
		if tk.State != want {
			t.Fatalf("after attempt %d: %s, want %s", attempt, tk.State, want)
		}
		if want == tg.StatePending && (tk.Owner != "" || tk.LeaseExpiresAt != (time.Time{})) {
			t.Fatalf("retry kept the owner or lease: %+v", tk)
		}
		if want == tg.StatePending {
			// The default backoff: 1 s, doubling per retry. Not claimable
			// before it has passed.
			wait := time.Second << (attempt - 1)
			if !tk.DueAt.Equal(e.Clock.Now().Add(wait).Truncate(time.Millisecond)) || !strings.HasPrefix(tk.StatusMessage, "waiting until ") {
				t.Fatalf("after attempt %d: due %v, status %q; want due in %v", attempt, tk.DueAt, tk.StatusMessage, wait)
			}
			if _, ok := e.ClaimNext(t, "w", "wf"); ok {
				t.Fatalf("after attempt %d: claimed before the backoff passed", attempt)
			}
			e.Clock.Advance(wait)
		}
	}
	e.WantState(t, dep.TaskID, tg.StateCancelled)
	if _, ok := e.ClaimNext(t, "w", "wf"); ok {
		t.Fatal("a failed task was claimable")
	}
	st := e.S.Stats()
	if st.Retries != 2 || st.Failures != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func testIdempotentCreate(t *testing.T, h Harness) {
	e := setup(t, h)
	first, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Payload: json.RawMessage(`{"x": 1, "y": [1,2]}`)})
	if err != nil || !first.Created {
		t.Fatalf("first create: %+v %v", first, err)
	}
	e.Create(t, "wf", "b")
	before := e.DB.Snapshot(t)
	again, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "a", Payload: json.RawMessage(`{"y":[1,2],"x":1}`), MaxAttempts: tg.DefaultMaxAttempts})
	if err != nil || again.Created || again.Task.TaskID != first.Task.TaskID {
		t.Fatalf("repeat create: %+v %v", again, err)
	}
	if e.DB.Snapshot(t) != before {
		t.Fatal("an idempotent repeat wrote to the database")
	}
	for name, spec := range map[string]tg.NodeSpec{
		"payload":      {NodeID: "a", Payload: json.RawMessage(`{"x":2,"y":[1,2]}`)},
		"depends_on":   {NodeID: "a", Payload: json.RawMessage(`{"x":1,"y":[1,2]}`), DependsOn: []string{"b"}},
		"max_attempts": {NodeID: "a", Payload: json.RawMessage(`{"x":1,"y":[1,2]}`), MaxAttempts: 7},
	} {
		_, err := e.S.CreateTask(e.Ctx, "wf", spec)
		if !errors.Is(err, tg.ErrConflict) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s clash: %v", name, err)
		}
	}
	if e.DB.Snapshot(t) != before {
		t.Fatal("a conflicting create wrote to the database")
	}
	// A workflow batch that repeats existing nodes and adds new ones.
	out, err := e.S.CreateWorkflow(e.Ctx, "wf", []tg.NodeSpec{{NodeID: "b", Payload: json.RawMessage(`{"n":"b"}`)}, {NodeID: "c", DependsOn: []string{"a", "b"}}})
	if err != nil || out[0].Created || !out[1].Created || out[1].Task.State != tg.StateBlocked {
		t.Fatalf("mixed batch: %+v %v", out, err)
	}
}

func testBlockedStatusNamesOnlyUnfinishedDependencies(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	e.Create(t, "wf", "b")
	d := e.Create(t, "wf", "d", "a", "b")
	if got := e.Get(t, d.TaskID).StatusMessage; got != "waiting on a, b" {
		t.Fatalf("status %q", got)
	}
	c := e.Claim(t, "w", a.TaskID, 0)
	if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if got := e.Get(t, d.TaskID).StatusMessage; got != "waiting on b" {
		t.Fatalf("after a completed: status %q, want %q", got, "waiting on b")
	}
}

// WorkflowSummary counts a workflow's tasks by state and its stuck claims
// (lease lapsed, not yet expired) at the call's server time, agrees with
// Workflow's counts, and writes nothing: a lapsed lease stays claimed.
func testWorkflowSummary(t *testing.T, h Harness) {
	e := setup(t, h)
	if _, err := e.S.CreateWorkflow(e.Ctx, "wf", []tg.NodeSpec{
		{NodeID: "a"}, {NodeID: "b"}, {NodeID: "c", DependsOn: []string{"a"}}, {NodeID: "d"},
	}); err != nil {
		t.Fatal(err)
	}
	a, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w1", WorkflowID: "wf", Lease: 10 * time.Second})
	if err != nil || !ok || a.Task.NodeID != "a" {
		t.Fatalf("claim a: %+v ok=%v err=%v", a.Task, ok, err)
	}
	b, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w2", WorkflowID: "wf", Lease: time.Minute})
	if err != nil || !ok || b.Task.NodeID != "b" {
		t.Fatalf("claim b: %+v ok=%v err=%v", b.Task, ok, err)
	}
	want := map[tg.State]int{tg.StateBlocked: 1, tg.StatePending: 1, tg.StateClaimed: 2}
	check := func(stuck int) {
		t.Helper()
		sum, err := e.S.WorkflowSummary(e.Ctx, "wf")
		if err != nil {
			t.Fatal(err)
		}
		if sum.WorkflowID != "wf" || sum.Total != 4 || sum.Stuck != stuck || sum.CreatedAt.IsZero() || sum.UpdatedAt.Before(sum.CreatedAt) {
			t.Fatalf("summary %+v, want 4 tasks and %d stuck", sum, stuck)
		}
		for _, st := range tg.States {
			if sum.Counts[st] != want[st] {
				t.Fatalf("summary counts %v, want %v", sum.Counts, want)
			}
		}
	}
	check(0)
	e.Clock.Advance(11 * time.Second) // a's lease lapsed; nobody expired it
	before := e.DB.Snapshot(t)
	check(1)
	if after := e.DB.Snapshot(t); after != before {
		t.Fatalf("WorkflowSummary wrote to the database:\n%s\n%s", before, after)
	}
	wf, err := e.S.Workflow(e.Ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	for st, n := range wf.Counts {
		if want[st] != n {
			t.Fatalf("Workflow counts %v disagree with the summary's %v", wf.Counts, want)
		}
	}
	if _, err := e.S.WorkflowSummary(e.Ctx, "nope"); !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("summary of a missing workflow: %v, want ErrNotFound", err)
	}
	if _, err := e.S.WorkflowSummary(e.Ctx, "bad id!"); err == nil {
		t.Fatal("summary of an invalid workflow id: no error")
	}
}

// WorkflowGraph is Workflow's tasks without payloads and results (and no
// edges: DependsOn names them), at most limit of them in creation order,
// with counts over the whole workflow; it writes nothing, so a lapsed lease
// stays claimed.
func testWorkflowGraph(t *testing.T, h Harness) {
	e := setup(t, h)
	big := json.RawMessage(`{"text":"` + strings.Repeat("p", 4096) + `"}`)
	out, err := e.S.CreateWorkflow(e.Ctx, "wf", []tg.NodeSpec{
		{NodeID: "a", Payload: big}, {NodeID: "b", DependsOn: []string{"a"}, Payload: json.RawMessage(`{"n":[1,2]}`)},
		{NodeID: "c"}, {NodeID: "d", DependsOn: []string{"a", "c"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, c := range out {
		ids[c.Task.NodeID] = c.Task.TaskID
	}
	a := e.Claim(t, "w1", ids["a"], 0)
	if _, err := e.S.Complete(e.Ctx, holder(a), json.RawMessage(`{"out":"`+strings.Repeat("r", 4096)+`"}`)); err != nil {
		t.Fatal(err)
	}
	e.Claim(t, "w2", ids["b"], 5*time.Second)
	e.Clock.Advance(6 * time.Second) // b's lease lapsed; nobody expired it
	before := e.DB.Snapshot(t)
	g, err := e.S.WorkflowGraph(e.Ctx, "wf", 0)
	if err != nil {
		t.Fatal(err)
	}
	if after := e.DB.Snapshot(t); after != before {
		t.Fatalf("WorkflowGraph wrote to the database:\n%s\n%s", before, after)
	}
	full, err := e.S.Workflow(e.Ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Tasks) != 4 || g.WorkflowID != "wf" || g.Edges != nil || !g.CreatedAt.Equal(full.CreatedAt) || !g.UpdatedAt.Equal(full.UpdatedAt) {
		t.Fatalf("graph %+v, want the 4 tasks of wf, no edges, the workflow's times", g)
	}
	if !reflect.DeepEqual(g.Counts, full.Counts) {
		t.Fatalf("graph counts %v, want Workflow's %v", g.Counts, full.Counts)
	}
	for i, got := range g.Tasks {
		if string(got.Payload) != "null" || got.Result != nil {
			t.Fatalf("task %s: payload %.40s result %.40s, want null and none", got.NodeID, got.Payload, got.Result)
		}
		want := full.Tasks[i]
		if len(want.Payload) == 0 {
			t.Fatalf("Workflow's task %s has no payload", want.NodeID)
		}
		want.Payload, want.Result = got.Payload, nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("task %d without bodies:\n%+v\nwant Workflow's but payload and result:\n%+v", i, got, want)
		}
	}
	for _, got := range g.Tasks {
		if got.NodeID == "b" && (got.State != tg.StateClaimed || got.Owner != "w2") {
			t.Fatalf("b: %s held by %q, want still claimed by w2 (the lapsed lease is not expired by a read)", got.State, got.Owner)
		}
	}

	// A limit keeps the first tasks in creation order; the counts still
	// cover every task.
	g2, err := e.S.WorkflowGraph(e.Ctx, "wf", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(g2.Tasks) != 2 || g2.Tasks[0].TaskID != full.Tasks[0].TaskID || g2.Tasks[1].TaskID != full.Tasks[1].TaskID {
		t.Fatalf("limit 2: %d tasks %+v, want Workflow's first two", len(g2.Tasks), g2.Tasks)
	}
	if !reflect.DeepEqual(g2.Counts, full.Counts) {
		t.Fatalf("limit 2: counts %v, want the whole workflow's %v", g2.Counts, full.Counts)
	}
	if _, err := e.S.WorkflowGraph(e.Ctx, "nope", 0); !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("graph of a missing workflow: %v, want ErrNotFound", err)
	}
	if _, err := e.S.WorkflowGraph(e.Ctx, "bad id!", 0); err == nil {
		t.Fatal("graph of an invalid workflow id: no error")
	}
}

// RecentWorkflows lists every workflow, the most recently changed first and
// ties by id, with its task count and times; a task changing state moves
// its workflow to the front.
func testRecentWorkflows(t *testing.T, h Harness) {
	e := setup(t, h)
	if got, err := e.S.RecentWorkflows(e.Ctx); err != nil || len(got) != 0 {
		t.Fatalf("no workflows: %v (%v), want none", got, err)
	}
	create := func(wf string, nodes ...string) []tg.Created {
		t.Helper()
		var specs []tg.NodeSpec
		for _, n := range nodes {
			specs = append(specs, tg.NodeSpec{NodeID: n})
		}
		out, err := e.S.CreateWorkflow(e.Ctx, wf, specs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	b := create("b", "x", "y")
	e.Clock.Advance(time.Second)
	create("c", "x")
	create("a", "x", "y", "z")
	want := func(ids ...string) []tg.WorkflowListing {
		t.Helper()
		got, err := e.S.RecentWorkflows(e.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, w := range got {
			order = append(order, w.WorkflowID)
		}
		if !slices.Equal(order, ids) {
			t.Fatalf("recent workflows %v, want %v", order, ids)
		}
		return got
	}
	got := want("a", "c", "b") // a and c changed in the same millisecond: by id
	if got[0].Tasks != 3 || got[2].Tasks != 2 || !got[2].CreatedAt.Equal(t0) || !got[0].UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("listing %+v, want task counts 3 and 2 and the creation times", got)
	}
	e.Clock.Advance(time.Second)
	e.Claim(t, "w", b[0].Task.TaskID, 0)
	got = want("b", "a", "c")
	if !got[0].UpdatedAt.Equal(t0.Add(2*time.Second)) || !got[0].CreatedAt.Equal(t0) {
		t.Fatalf("b after a claim: %+v, want changed at the claim and created at the start", got[0])
	}
}

// PeekTask answers the stored task and writes nothing: a lapsed lease stays
// claimed (Task would expire it).
func testPeekTask(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	e.Claim(t, "w", a.TaskID, 5*time.Second)
	e.Clock.Advance(6 * time.Second)
	before := e.DB.Snapshot(t)
	got, err := e.S.PeekTask(e.Ctx, a.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != tg.StateClaimed || got.Owner != "w" || got.Generation != 1 || !got.LeaseExpiresAt.Before(e.Clock.Now()) {
		t.Fatalf("peeked %s held by %q at generation %d until %v, want the lapsed claim of w", got.State, got.Owner, got.Generation, got.LeaseExpiresAt)
	}
	if after := e.DB.Snapshot(t); after != before {
		t.Fatalf("PeekTask wrote to the database:\n%s\n%s", before, after)
	}
	if got := e.Get(t, a.TaskID); got.State == tg.StateClaimed {
		t.Fatalf("Task after the lapse: %s, want the expiry processed", got.State)
	}
	if _, err := e.S.PeekTask(e.Ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV"); !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("peek of a missing task: %v, want ErrNotFound", err)
	}
	_, peekErr := e.S.PeekTask(e.Ctx, "not a task id")
	_, taskErr := e.S.Task(e.Ctx, "not a task id")
	if peekErr == nil || peekErr.Error() != taskErr.Error() {
		t.Fatalf("peek of an invalid id: %v, want what Task answers: %v", peekErr, taskErr)
	}
}
