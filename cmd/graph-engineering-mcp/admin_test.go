package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// Without a yes on stdin, nothing changes and the command fails.
func TestAdminRefusesWithoutConfirmation(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	build, lint := f.tasks["build"].TaskID, f.tasks["lint"].TaskID
	before := e.fingerprint()
	for _, tc := range []struct {
		stdin string
		args  []string
	}{
		{"n\n", []string{"admin", "requeue", build, "--reason", "stuck worker"}},
		{"\n", []string{"admin", "requeue", build, "--reason", "stuck worker"}},
		{"", []string{"admin", "skip", lint, "--reason", "optional step"}}, // end of input
		{"yess\n", []string{"admin", "skip", lint, "--reason", "optional step"}},
		{"no\n", []string{"admin", "abort-workflow", "wf", "--reason", "withdrawn"}},
	} {
		r := e.cli(tc.stdin, tc.args...)
		if r.code != exitFailure || !strings.Contains(r.stderr, "aborted, nothing changed") {
			t.Errorf("%v with stdin %q: exit %d, stderr %q; want exit 1, aborted", tc.args, tc.stdin, r.code, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("%v: stdout %q, want nothing", tc.args, r.stdout)
		}
	}
	if after := e.fingerprint(); after != before {
		t.Fatalf("the database changed although nothing was confirmed:\n%s\n%s", before, after)
	}
	// The prompt shows what will happen: the task, its state and its holder.
	r := e.cli("n\n", "admin", "requeue", build, "--reason", "stuck worker", "--operator", "alice")
	for _, want := range []string{
		"About to requeue task " + build + " (node build of workflow wf).",
		"  state:    claimed\n",
		"  holder:   w2, generation 1, lease live (expires in 10m); it will be fenced out\n",
		"  operator: alice\n",
		"  reason:   stuck worker\n",
		"Requeue this task? [y/N] \n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("prompt lacks %q:\n%s", want, r.stderr)
		}
	}
	r = e.cli("n\n", "admin", "abort-workflow", "wf", "--reason", "withdrawn")
	for _, want := range []string{"About to abort workflow wf.", "cancel 3 unfinished task(s): 1 claimed, 1 pending, 1 blocked", "holders:  w2 (1); they will be fenced out"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("abort prompt lacks %q:\n%s", want, r.stderr)
		}
	}
}

func TestAdminRequiresReason(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	before := e.fingerprint()
	for _, args := range [][]string{
		{"admin", "requeue", f.tasks["build"].TaskID, "--yes"},
		{"admin", "skip", f.tasks["lint"].TaskID, "--yes", "--reason", "   "},
		{"admin", "abort-workflow", "wf", "--yes"},
		{"admin", "requeue", "--yes", "--reason", "x"},                                            // no id
		{"admin", "requeue", f.tasks["build"].TaskID, "--yes", "--reason", "x", "--operator", ""}, // empty operator
		{"admin", "skip", f.tasks["lint"].TaskID, "--yes", "--reason", strings.Repeat("x", taskgraph.MaxReasonBytes+1)},
	} {
		r := e.cli("y\n", args...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d (stderr %q), want 2", args, r.code, r.stderr)
		}
	}
	if r := e.cli("", "admin", "requeue", f.tasks["build"].TaskID, "--yes"); !strings.Contains(r.stderr, "--reason is required") {
		t.Errorf("stderr %q does not name --reason", r.stderr)
	}
	if after := e.fingerprint(); after != before {
		t.Fatal("a usage error changed the database")
	}
}

func TestAdminRequeue(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	lint := f.tasks["lint"].TaskID
	// Flags before the argument, confirmed on stdin.
	r := e.cli("yes\n", "admin", "requeue", "--reason", "linter fixed", "--operator", "alice", lint).want(t, exitOK)
	if !strings.Contains(r.stdout, "requeued task "+lint+" (node lint of workflow wf): failed -> pending") ||
		!strings.Contains(r.stdout, `recorded in the history: operator alice, reason "linter fixed"`) {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	if got := e.task(lint); got.State != taskgraph.StatePending || got.Attempts != 0 {
		t.Fatalf("lint is %s with %d attempts, want pending with 0", got.State, got.Attempts)
	}
	ev := e.lastEvent(lint)
	if d := detail(t, ev); ev.Kind != taskgraph.EventRequeue || d["reason"] != "linter fixed" || d["operator"] != "alice" || d["from"] != "failed" {
		t.Fatalf("last event of lint: %s %s", ev.Kind, ev.Detail)
	}
	// The dependents its failure cancelled are revived.
	if got := e.task(f.tasks["docs"].TaskID).State; got != taskgraph.StateBlocked {
		t.Fatalf("docs is %s, want blocked (revived)", got)
	}

	// Requeueing a claimed task fences out its holder.
	build := f.tasks["build"].TaskID
	r = e.cli("", "admin", "requeue", build, "--reason", "worker w2 is gone", "--yes", "--json").want(t, exitOK)
	var out struct {
		Operation, Operator, Reason, From string
		Task                              struct{ State string }
	}
	decodeJSON(t, r.stdout, &out)
	if out.Operation != "requeue" || out.From != "claimed" || out.Task.State != "pending" || out.Operator != operatorName() || out.Reason != "worker w2 is gone" {
		t.Fatalf("JSON: %+v", out)
	}
	if _, err := e.s.Complete(context.Background(), holderOfClaim(f.build), json.RawMessage(`{}`)); !errors.Is(err, taskgraph.ErrStaleClaim) {
		t.Fatalf("the fenced-out holder completed: %v", err)
	}
	if d := detail(t, e.lastEvent(build)); d["operator"] != operatorName() {
		t.Fatalf("operator recorded %v, want the login name %q", d["operator"], operatorName())
	}

	// The store's rules decide: a completed task cannot be requeued.
	before := e.fingerprint()
	r = e.cli("", "admin", "requeue", f.tasks["fetch"].TaskID, "--reason", "again", "--yes").want(t, exitFailure)
	if !strings.Contains(r.stderr, "a completed task cannot be requeued") {
		t.Fatalf("stderr %q", r.stderr)
	}
	if e.fingerprint() != before {
		t.Fatal("a rejected requeue changed the database")
	}
	e.cli("", "admin", "requeue", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--reason", "x", "--yes").want(t, exitFailure)
}

func TestAdminSkip(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	lint := f.tasks["lint"].TaskID
	r := e.cli("", "admin", "skip", lint, "--reason", "optional step", "--yes").want(t, exitOK)
	if !strings.Contains(r.stdout, "skipped task "+lint+" (node lint of workflow wf): failed -> completed") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	got := e.task(lint)
	if got.State != taskgraph.StateCompleted || string(got.Result) != "null" {
		t.Fatalf("lint is %s with result %s, want completed with null", got.State, got.Result)
	}
	ev := e.lastEvent(lint)
	if d := detail(t, ev); ev.Kind != taskgraph.EventSkip || d["reason"] != "optional step" {
		t.Fatalf("last event: %s %s", ev.Kind, ev.Detail)
	}
	// docs can run now.
	if got := e.task(f.tasks["docs"].TaskID).State; got != taskgraph.StatePending {
		t.Fatalf("docs is %s, want pending", got)
	}
}

func TestAdminAbortWorkflow(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	r := e.cli("y\n", "admin", "abort-workflow", "wf", "--reason", "release withdrawn", "--operator", "bob").want(t, exitOK)
	if !strings.Contains(r.stdout, "aborted workflow wf: cancelled 3 task(s)") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	for _, node := range []string{"build", "package", "test"} {
		id := f.tasks[node].TaskID
		if got := e.task(id).State; got != taskgraph.StateCancelled {
			t.Errorf("%s is %s, want cancelled", node, got)
		}
		ev := e.lastEvent(id)
		if d := detail(t, ev); ev.Kind != taskgraph.EventAbort || d["reason"] != "release withdrawn" || d["operator"] != "bob" {
			t.Errorf("last event of %s: %s %s", node, ev.Kind, ev.Detail)
		}
	}
	if got := e.task(f.tasks["fetch"].TaskID).State; got != taskgraph.StateCompleted {
		t.Errorf("fetch is %s; finished tasks keep their state", got)
	}
	// Nothing left to abort: no prompt, no change, success.
	before := e.fingerprint()
	r = e.cli("", "admin", "abort-workflow", "wf", "--reason", "again").want(t, exitOK)
	if !strings.Contains(r.stdout, "nothing to abort") || strings.Contains(r.stderr, "About to") {
		t.Fatalf("finished workflow: stdout %q stderr %q", r.stdout, r.stderr)
	}
	if e.fingerprint() != before {
		t.Fatal("aborting a finished workflow changed the database")
	}
	e.cli("", "admin", "abort-workflow", "nosuch", "--reason", "x", "--yes").want(t, exitFailure)
}

// signalWriter collects what is written and closes seen once it contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.seen != nil && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
		w.seen = nil
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Ctrl-C at the prompt ends the command at once, changing nothing.
func TestAdminInterruptedAtPrompt(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	before := e.fingerprint()
	stdin, stdinW := io.Pipe() // nobody answers
	t.Cleanup(func() { stdinW.Close() })
	seen := make(chan struct{})
	stderr := &signalWriter{want: "[y/N] ", seen: seen}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"graph-engineering-mcp", "admin", "requeue", f.tasks["build"].TaskID, "--reason", "x", "--database", e.path},
			stdin, io.Discard, stderr)
	}()
	testwait.Recv(t, "the confirmation prompt", seen)
	cancel() // as main does on SIGINT
	if code := testwait.Recv(t, "the command to stop waiting for an answer after the interrupt", done); code != exitFailure ||
		!strings.Contains(stderr.String(), "interrupted at the confirmation prompt, nothing changed") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if e.fingerprint() != before {
		t.Fatal("an interrupted command changed the database")
	}
}
