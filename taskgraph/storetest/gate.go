package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// gateTests: approval gates (issue 27, item 3).
var gateTests = []test{
	{"GateNeverClaimable", testGateNeverClaimable},
	{"GateAwaitsApprovalAfterDependencies", testGateAwaitsApprovalAfterDependencies},
	{"GateApprovalReadiesDependents", testGateApprovalReadiesDependents},
	{"GateRejectionCascades", testGateRejectionCascades},
	{"GateTimeoutDecides", testGateTimeoutDecides},
	{"GateDecidedOnce", testGateDecidedOnce},
	{"DecisionOnNonGateRefused", testDecisionOnNonGateRefused},
	{"GateCreateBounds", testGateCreateBounds},
	{"GateRequeueAwaitsAgain", testGateRequeueAwaitsAgain},
	{"GateKindTamperDetected", testGateKindTamperDetected},
}

var (
	approveByBob = tg.GateDecision{Approve: true, By: "bob", Via: tg.DecidedByOperator, Reason: "release notes reviewed"}
	rejectByBob  = tg.GateDecision{Approve: false, By: "bob", Via: tg.DecidedByOperator, Reason: "tests are red"}
)

func (e *env) gate(t *testing.T, wf, node string, deps ...string) tg.Task {
	t.Helper()
	return e.createSpec(t, wf, tg.NodeSpec{NodeID: node, DependsOn: deps, Kind: tg.KindGate})
}

func (e *env) decide(t *testing.T, id string, d tg.GateDecision) tg.Task {
	t.Helper()
	tk, err := e.S.DecideGate(e.Ctx, id, d)
	if err != nil {
		t.Fatalf("decide gate %s: %v", id, err)
	}
	return tk
}

// wantAwaiting asserts that gate id awaits approval: blocked (never in the
// ready indexes) and saying so.
func (e *env) wantAwaiting(t *testing.T, id string) tg.Task {
	t.Helper()
	tk := e.WantState(t, id, tg.StateBlocked)
	if !tk.AwaitingApproval || tk.Kind != tg.KindGate || !strings.HasPrefix(tk.StatusMessage, "awaiting approval") {
		t.Fatalf("gate %s: awaiting %v, kind %q, status %q; want awaiting approval", id, tk.AwaitingApproval, tk.Kind, tk.StatusMessage)
	}
	return tk
}

// No claim of any kind takes a gate, whether it waits on dependencies or
// awaits approval: claim-next passes over it, and a claim by id, a
// heartbeat, a completion and a failure presenting a made-up claim are
// refused naming the gate, with nothing written.
func testGateNeverClaimable(t *testing.T, h Harness) {
	e := setup(t, h)
	up := e.Create(t, "wf", "build")
	g := e.gate(t, "wf", "release-ok", "build")
	lone := e.gate(t, "solo", "ok")
	e.wantAwaiting(t, lone.TaskID)
	for _, id := range []string{g.TaskID, lone.TaskID} {
		before := e.DB.Snapshot(t)
		_, _, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: id})
		if !errors.Is(err, tg.ErrGate) || !errors.Is(err, tg.ErrConflict) || !strings.Contains(err.Error(), "approval gate") {
			t.Fatalf("claim by id of gate: %v; want ErrGate naming the gate", err)
		}
		h := lease.Holder{TaskID: id, Owner: "w", Generation: 1, Token: "made-up"}
		if _, err := e.S.Complete(e.Ctx, h, json.RawMessage(`{}`)); !errors.Is(err, tg.ErrGate) {
			t.Fatalf("complete of gate: %v; want ErrGate", err)
		}
		if _, err := e.S.Heartbeat(e.Ctx, h, 0); !errors.Is(err, tg.ErrGate) {
			t.Fatalf("heartbeat of gate: %v; want ErrGate", err)
		}
		if _, err := e.S.Fail(e.Ctx, h, "no", false); !errors.Is(err, tg.ErrGate) {
			t.Fatalf("fail of gate: %v; want ErrGate", err)
		}
		e.Unchanged(t, before, "writes refused on a gate")
	}
	e.completeWith(t, up.TaskID, `{"ok":true}`)
	e.wantAwaiting(t, g.TaskID)
	for _, wf := range []string{"wf", "solo", ""} {
		if c, ok := e.ClaimNext(t, "w", wf); ok {
			t.Fatalf("claim-next in %q took %s (%s)", wf, c.Task.NodeID, c.Task.Kind)
		}
	}
}

// A gate waits on its dependencies like a task, then awaits approval, with
// an await_approval event; its dependents wait on it.
func testGateAwaitsApprovalAfterDependencies(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	b := e.Create(t, "wf", "b")
	g := e.gate(t, "wf", "gate", "a", "b")
	if tk := e.WantState(t, g.TaskID, tg.StateBlocked); tk.AwaitingApproval || !strings.HasPrefix(tk.StatusMessage, "waiting on a, b") {
		t.Fatalf("before its dependencies: awaiting %v, status %q", tk.AwaitingApproval, tk.StatusMessage)
	}
	if _, err := e.S.DecideGate(e.Ctx, g.TaskID, approveByBob); !errors.Is(err, tg.ErrGateNotAwaiting) {
		t.Fatalf("approve before the dependencies completed: %v; want ErrGateNotAwaiting", err)
	}
	e.completeWith(t, a.TaskID, `1`)
	if tk := e.WantState(t, g.TaskID, tg.StateBlocked); tk.AwaitingApproval {
		t.Fatal("awaiting approval with one dependency unfinished")
	}
	e.completeWith(t, b.TaskID, `2`)
	e.wantAwaiting(t, g.TaskID)
	e.lastEvent(t, g.TaskID, tg.EventAwaitApproval)
	e.Verify(t)
}

// Approval completes the gate with the decision as its result; its
// dependents become ready and claimable; the history records the
// decider, how and why; audit verify passes.
func testGateApprovalReadiesDependents(t *testing.T, h Harness) {
	e := setup(t, h)
	g := e.gate(t, "wf", "gate")
	next := e.Create(t, "wf", "deploy", "gate")
	e.WantState(t, next.TaskID, tg.StateBlocked)
	tk := e.decide(t, g.TaskID, approveByBob)
	if tk.State != tg.StateCompleted || tk.AwaitingApproval || !strings.Contains(tk.StatusMessage, "approved by bob") {
		t.Fatalf("approved gate: %s %v %q", tk.State, tk.AwaitingApproval, tk.StatusMessage)
	}
	var res map[string]any
	if err := json.Unmarshal(tk.Result, &res); err != nil || res["decision"] != "approved" || res["decided_by"] != "bob" || res["reason"] != approveByBob.Reason {
		t.Fatalf("result %s: %v", tk.Result, err)
	}
	c, ok := e.ClaimNext(t, "w", "wf")
	if !ok || c.Task.TaskID != next.TaskID {
		t.Fatalf("claim-next after approval: %v %s", ok, c.Task.NodeID)
	}
	if len(c.Dependencies) != 1 || c.Dependencies[0].State != tg.StateCompleted {
		t.Fatalf("the dependent's upstream: %+v", c.Dependencies)
	}
	ev := e.lastEvent(t, g.TaskID, tg.EventApprove)
	var d map[string]any
	if err := json.Unmarshal(ev.Detail, &d); err != nil || d["decided_by"] != "bob" || d["via"] != tg.DecidedByOperator || d["reason"] != approveByBob.Reason {
		t.Fatalf("approve event detail %s", ev.Detail)
	}
	if ev.Actor.Kind != tg.ActorOperator || ev.Actor.Name != "bob" {
		t.Fatalf("approve event actor %+v", ev.Actor)
	}
	// A principal's decision names it as an approver.
	g2 := e.gate(t, "wf2", "gate")
	ctx := tg.WithPrincipal(e.Ctx, "carol")
	if _, err := e.S.DecideGate(ctx, g2.TaskID, tg.GateDecision{Approve: true, By: "carol", Via: tg.DecidedByPrincipal}); err != nil {
		t.Fatal(err)
	}
	if ev := e.lastEvent(t, g2.TaskID, tg.EventApprove); ev.Actor.Kind != tg.ActorApprover || ev.Actor.Principal != "carol" {
		t.Fatalf("principal's approve event actor %+v", ev.Actor)
	}
	e.Verify(t)
}

// Rejection fails the gate with the decision as its error and cancels
// every unfinished dependent, naming the gate, as a failure does.
func testGateRejectionCascades(t *testing.T, h Harness) {
	e := setup(t, h)
	g := e.gate(t, "wf", "gate")
	mid := e.Create(t, "wf", "deploy", "gate")
	end := e.Create(t, "wf", "announce", "deploy")
	tk := e.decide(t, g.TaskID, rejectByBob)
	if tk.State != tg.StateFailed || !strings.Contains(tk.Error, "rejected by bob (operator): tests are red") {
		t.Fatalf("rejected gate: %s %q", tk.State, tk.Error)
	}
	for _, id := range []string{mid.TaskID, end.TaskID} {
		if d := e.WantState(t, id, tg.StateCancelled); !strings.Contains(d.StatusMessage, "upstream node") {
			t.Fatalf("dependent status %q", d.StatusMessage)
		}
	}
	if ev := e.lastEvent(t, g.TaskID, tg.EventReject); ev.Actor.Name != "bob" {
		t.Fatalf("reject event actor %+v", ev.Actor)
	}
	e.Verify(t)
}

// A gate nobody decides is decided at its timeout, by server time (the
// injected clock), as on_timeout says: approve readies its dependents,
// reject cancels them. The timeout runs from when the gate starts
// awaiting approval, not from its creation.
func testGateTimeoutDecides(t *testing.T, h Harness) {
	e := setup(t, h)
	up := e.Create(t, "wf", "build")
	ok := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "auto-ok", DependsOn: []string{"build"}, Kind: tg.KindGate,
		GateTimeout: time.Minute, OnTimeout: tg.OnTimeoutApprove})
	no := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "auto-no", DependsOn: []string{"build"}, Kind: tg.KindGate,
		GateTimeout: 2 * time.Minute, OnTimeout: tg.OnTimeoutReject})
	afterOK := e.Create(t, "wf", "after-ok", "auto-ok")
	afterNo := e.Create(t, "wf", "after-no", "auto-no")
	e.Clock.Advance(time.Hour) // the dependency takes long: the gates' time has not started
	if n, err := e.S.DecideDueGates(e.Ctx); err != nil || n != 0 {
		t.Fatalf("before the gates await: decided %d %v", n, err)
	}
	e.completeWith(t, up.TaskID, `{}`)
	start := e.Clock.Now()
	if tk := e.wantAwaiting(t, ok.TaskID); !tk.DueAt.Equal(start.Add(time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("decision time %v, want %v", tk.DueAt, start.Add(time.Minute))
	}
	e.Clock.Advance(time.Minute - time.Millisecond)
	if n, err := e.S.DecideDueGates(e.Ctx); err != nil || n != 0 {
		t.Fatalf("a millisecond early: decided %d %v", n, err)
	}
	e.Clock.Advance(time.Millisecond)
	if n, err := e.S.DecideDueGates(e.Ctx); err != nil || n != 1 {
		t.Fatalf("at the first timeout: decided %d %v", n, err)
	}
	if tk := e.WantState(t, ok.TaskID, tg.StateCompleted); !strings.Contains(tk.StatusMessage, "approved by server (timeout)") {
		t.Fatalf("timed-out approval: %q", tk.StatusMessage)
	}
	e.WantState(t, afterOK.TaskID, tg.StatePending)
	e.wantAwaiting(t, no.TaskID)
	e.Clock.Advance(time.Minute)
	if n, err := e.S.DecideDueGates(e.Ctx); err != nil || n != 1 {
		t.Fatalf("at the second timeout: decided %d %v", n, err)
	}
	if tk := e.WantState(t, no.TaskID, tg.StateFailed); !strings.Contains(tk.Error, "rejected by server (timeout)") {
		t.Fatalf("timed-out rejection: %q", tk.Error)
	}
	e.WantState(t, afterNo.TaskID, tg.StateCancelled)
	if ev := e.lastEvent(t, no.TaskID, tg.EventReject); ev.Actor.Kind != tg.ActorSweeper {
		t.Fatalf("timeout's actor %+v", ev.Actor)
	}
	// A person deciding first leaves nothing for the timeout.
	g := e.createSpec(t, "wf2", tg.NodeSpec{NodeID: "g", Kind: tg.KindGate, GateTimeout: time.Second, OnTimeout: tg.OnTimeoutReject})
	e.decide(t, g.TaskID, approveByBob)
	e.Clock.Advance(time.Hour)
	if n, err := e.S.DecideDueGates(e.Ctx); err != nil || n != 0 {
		t.Fatalf("after a person decided: decided %d %v", n, err)
	}
	e.WantState(t, g.TaskID, tg.StateCompleted)
	e.Verify(t)
}

// A gate is decided once: a second decision, either way, is refused with
// ErrGateDecided naming who decided, and changes nothing.
func testGateDecidedOnce(t *testing.T, h Harness) {
	e := setup(t, h)
	g := e.gate(t, "wf", "gate")
	e.decide(t, g.TaskID, approveByBob)
	before := e.DB.Snapshot(t)
	for _, d := range []tg.GateDecision{approveByBob, {Approve: false, By: "eve", Via: tg.DecidedByOperator}} {
		_, err := e.S.DecideGate(e.Ctx, g.TaskID, d)
		if !errors.Is(err, tg.ErrGateDecided) || !errors.Is(err, tg.ErrConflict) || !strings.Contains(err.Error(), "already decided: approved by bob (operator): release notes reviewed") {
			t.Fatalf("second decision: %v", err)
		}
	}
	e.Unchanged(t, before, "a second decision")
	r := e.gate(t, "wf", "gate2")
	e.decide(t, r.TaskID, rejectByBob)
	if _, err := e.S.DecideGate(e.Ctx, r.TaskID, approveByBob); !errors.Is(err, tg.ErrGateDecided) || !strings.Contains(err.Error(), "rejected by bob") {
		t.Fatalf("approval after a rejection: %v", err)
	}
}

// Approving or rejecting an ordinary task is refused (ErrNotGate, which
// matches ErrInvalid), whatever its state, and writes nothing.
func testDecisionOnNonGateRefused(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "task")
	before := e.DB.Snapshot(t)
	for _, d := range []tg.GateDecision{approveByBob, rejectByBob} {
		_, err := e.S.DecideGate(e.Ctx, tk.TaskID, d)
		if !errors.Is(err, tg.ErrNotGate) || !errors.Is(err, tg.ErrInvalid) || !strings.Contains(err.Error(), "not an approval gate") {
			t.Fatalf("decision on a task: %v", err)
		}
	}
	if _, err := e.S.DecideGate(e.Ctx, "01ARZ3NDEKTSV4RRFFQ69G5FAV", approveByBob); !errors.Is(err, tg.ErrNotFound) {
		t.Fatalf("decision on an unknown task: %v", err)
	}
	if _, err := e.S.DecideGate(e.Ctx, tk.TaskID, tg.GateDecision{Approve: true, Via: tg.DecidedByOperator}); !errors.Is(err, tg.ErrInvalid) {
		t.Fatalf("decision without a decider: %v", err)
	}
	e.Unchanged(t, before, "decisions refused")
}

// Gate fields are checked at creation, and a repeated creation must repeat
// them.
func testGateCreateBounds(t *testing.T, h Harness) {
	e := setup(t, h)
	for _, tc := range []struct {
		spec  tg.NodeSpec
		field string
	}{
		{tg.NodeSpec{NodeID: "x", Kind: "approval"}, "kind"},
		{tg.NodeSpec{NodeID: "x", GateTimeout: time.Minute, OnTimeout: "approve"}, "gate_timeout_ms"},
		{tg.NodeSpec{NodeID: "x", Kind: tg.KindGate, GateTimeout: time.Minute}, "on_timeout"},
		{tg.NodeSpec{NodeID: "x", Kind: tg.KindGate, OnTimeout: "approve"}, "on_timeout"},
		{tg.NodeSpec{NodeID: "x", Kind: tg.KindGate, GateTimeout: time.Minute, OnTimeout: "maybe"}, "on_timeout"},
		{tg.NodeSpec{NodeID: "x", Kind: tg.KindGate, GateTimeout: time.Millisecond, OnTimeout: "approve"}, "gate_timeout_ms"},
		{tg.NodeSpec{NodeID: "x", Kind: tg.KindGate, GateTimeout: tg.MaxGateTimeout + time.Millisecond, OnTimeout: "approve"}, "gate_timeout_ms"},
		{tg.NodeSpec{NodeID: "x", Kind: tg.KindGate, Requires: []string{"gpu"}}, "requires"},
		{tg.NodeSpec{NodeID: "x", Kind: tg.KindGate, NotBefore: time.Now().Add(time.Hour)}, "not_before"},
	} {
		_, err := e.S.CreateTask(e.Ctx, "wf", tc.spec)
		var ve *tg.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("create %+v: %v; want invalid %s", tc.spec, err, tc.field)
		}
	}
	e.createSpec(t, "wf", tg.NodeSpec{NodeID: "g", Kind: tg.KindGate, GateTimeout: time.Hour, OnTimeout: tg.OnTimeoutReject})
	if _, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "g", Kind: tg.KindGate}); !errors.Is(err, tg.ErrConflict) {
		t.Fatalf("repeat without the timeout: %v", err)
	}
	if _, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "g"}); !errors.Is(err, tg.ErrConflict) {
		t.Fatalf("repeat as a task: %v", err)
	}
	c, err := e.S.CreateTask(e.Ctx, "wf", tg.NodeSpec{NodeID: "g", Kind: tg.KindGate, GateTimeout: time.Hour, OnTimeout: tg.OnTimeoutReject})
	if err != nil || c.Created || c.Task.GateTimeout != time.Hour || c.Task.OnTimeout != tg.OnTimeoutReject {
		t.Fatalf("identical repeat: %+v %v", c, err)
	}
}

// An operator's requeue of a rejected gate makes it await a decision
// again (never pending) and revives its dependents as blocked.
func testGateRequeueAwaitsAgain(t *testing.T, h Harness) {
	e := setup(t, h)
	g := e.gate(t, "wf", "gate")
	next := e.Create(t, "wf", "deploy", "gate")
	e.decide(t, g.TaskID, rejectByBob)
	e.WantState(t, next.TaskID, tg.StateCancelled)
	if _, err := e.S.Requeue(e.Ctx, g.TaskID, alice); err != nil {
		t.Fatal(err)
	}
	e.wantAwaiting(t, g.TaskID)
	e.WantState(t, next.TaskID, tg.StateBlocked)
	if _, ok := e.ClaimNext(t, "w", "wf"); ok {
		t.Fatal("claimed something after the gate's requeue")
	}
	e.decide(t, g.TaskID, approveByBob)
	e.WantState(t, next.TaskID, tg.StatePending)
	e.Verify(t)
}

// Turning a gate into a task (or changing its timeout) behind the store's
// back, which would make it claimable, is caught by audit verify against
// its create event.
func testGateKindTamperDetected(t *testing.T, h Harness) {
	for _, tc := range []struct{ name, sql, reason string }{
		{"gate to task", `UPDATE tasks SET kind = 'task' WHERE node_id = 'g'`, `stored kind "task", but its create event 1 recorded "gate"`},
		{"timeout", `UPDATE tasks SET gate_timeout_ms = 1000 WHERE node_id = 'g'`, "stored gate_timeout_ms 1000, but its create event 1 recorded 60000"},
		{"on timeout", `UPDATE tasks SET gate_on_timeout = 'approve' WHERE node_id = 'g'`, `stored gate_on_timeout "approve", but its create event 1 recorded "reject"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, h)
			g := e.createSpec(t, "wf", tg.NodeSpec{NodeID: "g", Kind: tg.KindGate, GateTimeout: time.Minute, OnTimeout: tg.OnTimeoutReject})
			e.Verify(t)
			e.DB.Exec(t, tc.sql)
			rep, err := e.S.VerifyHistory(e.Ctx)
			if !errors.Is(err, tg.ErrBrokenChain) || rep.Broken == nil || rep.Broken.TaskID != g.TaskID || !strings.Contains(rep.Broken.Reason, tc.reason) {
				t.Fatalf("verify after %s: %v %+v", tc.sql, err, rep.Broken)
			}
		})
	}
}
