package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// The WAL deleted after a SIGKILL: a real serve process with --audit-anchor
// acknowledges creates, its anchor file records a head covering them, it is
// SIGKILLed and the -wal file deleted, losing every transaction since the
// last checkpoint. The database left behind is consistent, so audit verify
// alone reports it intact (nothing inside it shows what is gone); audit
// verify --anchor FILE fails and says what is missing.
func TestAuditAnchorCatchesDeletedWAL(t *testing.T) {
	bin := builtBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "tasks.db")
	anchor := filepath.Join(dir, "anchor")
	ctx := testwait.Context(t)

	// serve starts a stdio server with the anchor and returns its session.
	serve := func() (*exec.Cmd, *mcp.ClientSession, *testwait.Buffer) {
		t.Helper()
		cmd := exec.Command(bin, "serve", "--database", db, "--audit-anchor", anchor, "--log-level", "warn")
		stderr := &testwait.Buffer{}
		cmd.Stderr = stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "wal-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, stderr.String())
		}
		return cmd, cs, stderr
	}
	create := func(cs *mcp.ClientSession, wf string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			out, isErr, err := soakCall(ctx, cs, manifest.ToolCreate, map[string]any{"workflow_id": wf, "node_id": fmt.Sprintf("n%03d", i)})
			if err != nil || isErr {
				t.Fatalf("create %s/n%03d: %v %v", wf, i, err, out)
			}
		}
	}

	// A first run, stopped cleanly: its work is checkpointed into the
	// database file and the WAL is gone.
	cmd, cs, stderr := serve()
	create(cs, "before", 20)
	// Closing the session closes the server's stdin and waits for it.
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Fatalf("first serve did not stop cleanly: %v\n%s", cmd.ProcessState, stderr)
	}
	if _, err := os.Stat(db + "-wal"); err == nil {
		t.Fatal("a clean stop left a WAL")
	}
	before := readAnchorHeads(t, anchor)

	// The second run: acknowledged creates in an existing workflow and in
	// new ones, then wait for the anchor to cover them.
	cmd, cs, stderr = serve()
	create(cs, "before", 30) // n000..n019 exist: idempotent; n020..n029 new
	create(cs, "after-1", 20)
	create(cs, "after-2", 20)
	const wantEvents = 20 + 10 + 20 + 20 // one create event each
	var covering taskgraph.AuditHead
	func() {
		defer func() {
			if t.Failed() {
				t.Logf("server stderr:\n%s", stderr)
			}
		}()
		testwait.For(t, fmt.Sprintf("the anchor file to record a head covering %d events", wantEvents), func() bool {
			hs := readAnchorHeads(t, anchor)
			covering = hs[len(hs)-1]
			return covering.Events >= wantEvents
		})
	}()
	if covering.Entries <= before[len(before)-1].Entries {
		t.Fatalf("the covering head %s records no more workflows than %s", covering, before[len(before)-1])
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cs.Close() // waits for the killed process
	if fi, err := os.Stat(db + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no WAL to delete after the SIGKILL (%v): the test would prove nothing", err)
	}
	if err := os.Remove(db + "-wal"); err != nil {
		t.Fatal(err)
	}
	os.Remove(db + "-shm")

	// Without the anchor the database verifies: what is left is a
	// consistent older state (the transactions SQLite had checkpointed
	// into the file before the kill, at least the first run's).
	var rep struct {
		OK           bool
		Events       int64
		AuditEntries int64 `json:"audit_entries"`
	}
	r := runCLI(t, "audit", "verify", "--database", db, "--json")
	if r.code != exitOK {
		t.Fatalf("audit verify without the anchor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	decodeJSON(t, r.stdout, &rep)
	if !rep.OK || rep.Events < 20 {
		t.Fatalf("audit verify without the anchor: %+v", rep)
	}
	if rep.Events >= wantEvents {
		t.Fatalf("every acknowledged create survived the deleted WAL (%d events): the test proves nothing", rep.Events)
	}
	t.Logf("without the anchor: intact, %d of %d acknowledged creates left, %d audit entries of %d", rep.Events, wantEvents, rep.AuditEntries, covering.Entries)
	// With it, verify fails naming what is missing: the file's workflow
	// heads are checked first, so the workflow that lost events is named.
	r = runCLI(t, "audit", "verify", "--database", db, "--anchor", anchor)
	if r.code != exitFailure || !strings.Contains(r.stderr, "does not extend the anchored audit head") ||
		!lostWorkflow.MatchString(r.stderr) {
		t.Fatalf("audit verify --anchor after the WAL was deleted: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("with the anchor: %s", strings.TrimSpace(r.stderr))
	// The covering head alone: the workflows created since it are missing,
	// or (when the file kept them all) the events.
	want := fmt.Sprintf("the anchor counted %d: %d events are gone", covering.Events, covering.Events-rep.Events)
	if rep.AuditEntries < covering.Entries {
		want = fmt.Sprintf("the audit chain has %d entries, the anchor names entry %d (the database was truncated", rep.AuditEntries, covering.Entries)
	}
	r = runCLI(t, "audit", "verify", "--database", db, "--expect", covering.String())
	if r.code != exitFailure || !strings.Contains(r.stderr, "anchor "+covering.String()) || !strings.Contains(r.stderr, want) {
		t.Fatalf("audit verify --expect %s: exit %d, want it to say %q\n%s", covering, r.code, want, r.stderr)
	}
	// The verifier outside Go agrees: the export alone verifies; with the
	// anchor file it fails, naming a workflow that lost events.
	r = runCLI(t, "audit", "export", "--database", db)
	if r.code != 0 {
		t.Fatalf("audit export: exit %d\n%s", r.code, r.stderr)
	}
	export := filepath.Join(dir, "export.jsonl")
	if err := os.WriteFile(export, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runPy(t, export); code != 0 {
		t.Fatalf("audit-verify.py without the anchor: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code := runPy(t, export, "--anchor", anchor)
	if code != 1 || !pyLost.MatchString(errs) {
		t.Fatalf("audit-verify.py --anchor after the WAL was deleted: exit %d, want 1 naming the loss\n%s%s", code, out, errs)
	}
	t.Logf("audit-verify.py with the anchor: %s", strings.TrimSpace(errs))
}

// pyLost is how scripts/audit-verify.py --anchor names a lost tail.
var pyLost = regexp.MustCompile(`broken: anchor: workflow (before holds \d+ events, the anchor recorded \d+: events \d+ to \d+ of workflow before are gone|after-[12] (is gone|holds \d+ events))`)

// lostWorkflow is how audit verify --anchor names a workflow that lost
// events since its anchored head.
var lostWorkflow = regexp.MustCompile(`anchor workflow (before|after-1|after-2) \d+:[0-9a-f]{64} of \S+: workflow (before holds \d+ events, the anchor recorded \d+: events \d+ to \d+ of workflow before are gone|after-[12] (is gone|holds \d+ events))`)

// readAnchorHeads reads the heads serve --audit-anchor appended to path; it
// fails the test when there are none.
func readAnchorHeads(t *testing.T, path string) []taskgraph.AuditHead {
	t.Helper()
	hs, _, err := readAnchors(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) == 0 {
		t.Fatalf("anchor file %s holds no head", path)
	}
	return hs
}
