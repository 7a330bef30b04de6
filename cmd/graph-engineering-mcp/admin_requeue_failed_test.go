package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// admin requeue --workflow --failed: the dry run lists the failed tasks
// with their causes and writes nothing (text and JSON); a declined prompt
// writes nothing; confirmed, it requeues them (reviving their dependents)
// with the operator in each history, and a second run finds nothing.
func TestAdminRequeueFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.fixture()
	lint, docs := f.tasks["lint"].TaskID, f.tasks["docs"].TaskID
	before := e.fingerprint()

	r := e.cli("", "admin", "requeue", "--workflow", "wf", "--failed", "--dry-run").want(t, exitOK)
	for _, want := range []string{"dry run, nothing written: would requeue 1 failed task(s) of workflow wf and refuse 0", lint, "lint", "-> pending", "cause: lint: 3 problems"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = e.cli("", "admin", "requeue", "--workflow", "wf", "--failed", "--dry-run", "--json").want(t, exitOK)
	var out requeueFailedJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if !out.DryRun || out.Requeued != 1 || len(out.Tasks) != 1 || out.Tasks[0].TaskID != lint || out.Tasks[0].State != "pending" || !strings.HasPrefix(out.Tasks[0].Cause, "lint: 3 problems") || out.Reason != "" {
		t.Errorf("dry run JSON: %+v", out)
	}
	r = e.cli("n\n", "admin", "requeue", "--workflow", "wf", "--failed", "--reason", "linter fixed").want(t, exitFailure)
	if !strings.Contains(r.stderr, "About to requeue the 1 failed task(s) of workflow wf") || !strings.Contains(r.stderr, lint) || !strings.Contains(r.stderr, "aborted, nothing changed") {
		t.Errorf("declined prompt:\n%s", r.stderr)
	}
	if e.fingerprint() != before {
		t.Fatal("a dry run or a declined prompt changed the database")
	}

	r = e.cli("", "admin", "requeue", "--workflow", "wf", "--failed", "--reason", "linter fixed", "--operator", "alice", "--yes").want(t, exitOK)
	if !strings.Contains(r.stdout, "requeued 1 failed task(s) of workflow wf, refused 0") || !strings.Contains(r.stdout, `operator alice, reason "linter fixed"`) {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if got := e.task(lint); got.State != taskgraph.StatePending || got.Attempts != 0 {
		t.Errorf("lint after the requeue: %s, %d attempts", got.State, got.Attempts)
	}
	if got := e.task(docs); got.State != taskgraph.StateBlocked {
		t.Errorf("docs was not revived: %s", got.State)
	}
	evs, err := e.s.TaskEvents(context.Background(), lint)
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Kind != taskgraph.EventRequeue || last.Actor.Name != "alice" || !strings.Contains(string(last.Detail), "linter fixed") {
		t.Errorf("last event of lint: %s by %+v: %s", last.Kind, last.Actor, last.Detail)
	}
	r = e.cli("", "admin", "requeue", "--workflow", "wf", "--failed", "--reason", "again", "--yes").want(t, exitOK)
	if !strings.Contains(r.stdout, "workflow wf has no failed tasks; nothing to requeue, nothing changed") {
		t.Errorf("second run:\n%s", r.stdout)
	}
}

// The bulk form's usage errors (exit 2) and an unknown workflow (exit 1)
// change nothing; the single-task form still takes exactly one TASK_ID.
func TestAdminRequeueFailedUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.fixture()
	before := e.fingerprint()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"admin", "requeue", "--failed", "--yes", "--reason", "x"}, "need --workflow"},
		{[]string{"admin", "requeue", "--workflow", "wf", "--yes", "--reason", "x"}, "--workflow needs --failed"},
		{[]string{"admin", "requeue", f.tasks["lint"].TaskID, "--workflow", "wf", "--failed", "--yes", "--reason", "x"}, "not both"},
		{[]string{"admin", "requeue", "--workflow", "wf", "--failed", "--yes"}, "--reason is required"},
		{[]string{"admin", "requeue", "--yes", "--reason", "x"}, "takes TASK_ID, or --workflow WORKFLOW_ID --failed"},
	} {
		r := e.cli("y\n", tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", tc.args, r.code, r.stderr, tc.says)
		}
	}
	e.cli("", "admin", "requeue", "--workflow", "nosuch", "--failed", "--dry-run").want(t, exitFailure)
	if e.fingerprint() != before {
		t.Fatal("a refused command changed the database")
	}
}
