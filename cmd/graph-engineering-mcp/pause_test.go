package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// admin pause and resume, of a workflow and of all claiming, with --drain:
// claims stop and resume, a live lease keeps a drain waiting, and wrong
// scopes are usage errors.
func TestAdminPauseResumeDrain(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	for _, args := range [][]string{
		{"admin", "pause", "--reason", "x", "--yes"},                // no scope
		{"admin", "pause", "wf", "--all", "--reason", "x", "--yes"}, // both scopes
		{"admin", "pause", "wf", "--yes"},                           // no reason
		{"admin", "resume", "--reason", "x", "--yes"},
	} {
		e.cli("", args...).want(t, exitUsage)
	}
	r := e.cli("", "admin", "pause", "wf", "--reason", "INC-7", "--operator", "alice", "--yes", "--json").want(t, exitOK)
	var out pauseJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Operation != "pause" || out.WorkflowID != "wf" || !out.Changed || out.Operator != "alice" {
		t.Fatalf("pause --json: %q %v", r.stdout, err)
	}
	c, ok, err := e.s.Claim(e.ctx, taskgraph.ClaimRequest{Owner: "w9", WorkflowID: "wf", Lease: claimLease})
	if ok || err != nil || c.Paused == nil || c.Paused.Reason != "INC-7" {
		t.Fatalf("claim-next in paused wf: ok=%v err=%v paused=%+v", ok, err, c.Paused)
	}
	// A live lease (build, 10 minutes on the manual clock) keeps the drain
	// of all claiming from finishing: it gives up, and the pause stays.
	r = e.cli("", "admin", "pause", "--all", "--reason", "deploy", "--yes", "--drain", "--drain-timeout", "1ms").want(t, exitFailure)
	if !strings.Contains(r.stderr, "paused but not drained") || !strings.Contains(r.stderr, "1 task(s) still claimed") {
		t.Fatalf("drain with a live lease: %s", r.stderr)
	}
	if _, ok, _ := e.s.Claim(e.ctx, taskgraph.ClaimRequest{Owner: "w9", TaskID: f.tasks["package"].TaskID, Lease: claimLease}); ok {
		t.Fatal("a claim by id was granted while all claiming is paused")
	}
	if _, err := e.s.Complete(e.ctx, holderOfClaim(f.build), json.RawMessage(`1`)); err != nil {
		t.Fatalf("the live lease could not complete while paused: %v", err)
	}
	r = e.cli("", "admin", "pause", "--all", "--reason", "deploy", "--yes", "--drain").want(t, exitOK)
	if !strings.Contains(r.stdout, "was paused already") || !strings.Contains(r.stdout, "drained all claiming on the database") {
		t.Fatalf("drain after the lease ended: %s", r.stdout)
	}
	e.cli("", "admin", "resume", "--all", "--reason", "deployed", "--yes").want(t, exitOK)
	if _, ok := e.claimNext(t, "wf"); ok {
		t.Fatal("wf was claimable with its own pause in effect after resuming all")
	}
	r = e.cli("n\n", "admin", "resume", "wf", "--reason", "fixed")
	if r.code != exitFailure || !strings.Contains(r.stderr, "About to resume workflow wf.") || !strings.Contains(r.stderr, "INC-7") {
		t.Fatalf("unconfirmed resume: exit %d %s", r.code, r.stderr)
	}
	e.cli("", "admin", "resume", "wf", "--reason", "fixed", "--yes").want(t, exitOK)
	if _, ok := e.claimNext(t, "wf"); !ok {
		t.Fatal("nothing claimable in wf after its resume")
	}
	if r = e.cli("", "admin", "resume", "wf", "--reason", "again", "--yes").want(t, exitOK); !strings.Contains(r.stdout, "not paused; nothing changed") {
		t.Fatalf("resume of a running workflow: %s", r.stdout)
	}
}

// claimNext is a claim-next within wf on the env's store.
func (e *env) claimNext(t *testing.T, wf string) (taskgraph.Claimed, bool) {
	t.Helper()
	c, ok, err := e.s.Claim(e.ctx, taskgraph.ClaimRequest{Owner: "w9", WorkflowID: wf, Lease: claimLease})
	if err != nil {
		t.Fatal(err)
	}
	return c, ok
}
