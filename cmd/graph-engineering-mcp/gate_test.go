package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// admin approve and reject: the prompt, the decision with and without a
// reason, the --json answer, a second decision refused naming who
// decided, a decision on an ordinary task a usage error; tasks show a gate
// awaiting approval.
func TestAdminApproveReject(t *testing.T) {
	e := newEnv(t)
	mk := func(wf, node string, deps ...string) taskgraph.Task {
		c, err := e.s.CreateTask(e.ctx, wf, taskgraph.NodeSpec{NodeID: node, DependsOn: deps, Kind: taskgraph.KindGate})
		if err != nil {
			t.Fatal(err)
		}
		return c.Task
	}
	ok, no := mk("rel", "ok"), mk("rel", "no")
	created, err := e.s.CreateTask(e.ctx, "rel", taskgraph.NodeSpec{NodeID: "deploy", DependsOn: []string{"ok"}})
	if err != nil {
		t.Fatal(err)
	}
	after := created.Task
	before := e.fingerprint()
	r := e.cli("n\n", "admin", "approve", ok.TaskID, "--operator", "alice")
	if r.code != exitFailure || !strings.Contains(r.stderr, "About to approve gate "+ok.TaskID+" (node ok of workflow rel).") ||
		!strings.Contains(r.stderr, "state:    blocked (awaiting approval)") || !strings.Contains(r.stderr, "Approve this gate? [y/N]") {
		t.Fatalf("unconfirmed approve: exit %d\n%s", r.code, r.stderr)
	}
	if e.fingerprint() != before {
		t.Fatal("an unconfirmed approval changed the database")
	}
	r = e.cli("", "admin", "approve", ok.TaskID, "--operator", "alice", "--reason", "notes reviewed", "--yes", "--json").want(t, exitOK)
	var out gateResultJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Operation != "approve" || out.Operator != "alice" ||
		out.Task.State != "completed" || out.Task.Kind != "gate" || out.Task.AwaitingApproval {
		t.Fatalf("approve --json: %s %v", r.stdout, err)
	}
	if tk, _ := e.s.Task(e.ctx, after.TaskID); tk.State != taskgraph.StatePending {
		t.Fatalf("the approved gate's dependent is %s", tk.State)
	}
	r = e.cli("", "admin", "reject", ok.TaskID, "--operator", "bob", "--yes").want(t, exitFailure)
	if !strings.Contains(r.stderr, "already decided: approved by alice (operator): notes reviewed") {
		t.Fatalf("second decision: %s", r.stderr)
	}
	r = e.cli("", "admin", "reject", no.TaskID, "--operator", "bob", "--yes").want(t, exitOK)
	if !strings.Contains(r.stdout, "rejected gate "+no.TaskID) || !strings.Contains(r.stdout, "status: rejected by bob (operator)") {
		t.Fatalf("reject: %s", r.stdout)
	}
	r = e.cli("", "admin", "approve", after.TaskID, "--yes").want(t, exitUsage)
	if !strings.Contains(r.stderr, "not an approval gate") {
		t.Fatalf("approve of a task: %s", r.stderr)
	}
	g := mk("rel2", "wait")
	r = e.cli("", "tasks", "show", g.TaskID, "--json").want(t, exitOK)
	if !strings.Contains(r.stdout, `"awaiting_approval": true`) && !strings.Contains(r.stdout, `"awaiting_approval":true`) {
		t.Fatalf("tasks show of a gate: %s", r.stdout)
	}
}
