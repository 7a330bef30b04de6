package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// toV1 rewrites every event of workflow wf as a store before migration 0003
// wrote it (hash format 1), with the workflow's head.
func (e *env) toV1(wf string) {
	e.t.Helper()
	evs, err := e.s.WorkflowEvents(context.Background(), wf)
	if err != nil {
		e.t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+e.path+"?_busy_timeout=10000")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	prev := ""
	for _, ev := range evs {
		ev.HashVersion, ev.Actor, ev.State, ev.Content, ev.PrevHash = taskgraph.HashV1, taskgraph.Actor{}, nil, nil, prev
		h, err := taskgraph.EventHash(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE events SET hash_version = 1, actor_kind = '', actor_name = '', actor_principal = '', task_state = '', content = '',
			prev_hash = ?, hash = ? WHERE event_id = ?`, prev, h, ev.EventID); err != nil {
			e.t.Fatal(err)
		}
		prev = h
	}
	if _, err := db.Exec(`UPDATE workflows SET head_hash = ? WHERE workflow_id = ?`, prev, wf); err != nil {
		e.t.Fatal(err)
	}
}

var pyVerified = regexp.MustCompile(`^verified: (\d+) workflow\(s\), (\d+) event\(s\) \((\d+) v1, (\d+) v2\), (\d+) audit entries\n$`)

// runPy runs scripts/audit-verify.py on the export file with args.
func runPy(t *testing.T, export string, args ...string) (string, string, int) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed to run scripts/audit-verify.py")
	}
	var out, errb strings.Builder
	cmd := exec.Command("python3", append([]string{"../../scripts/audit-verify.py", export}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if x, ok := err.(*exec.ExitError); ok {
		code = x.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// The Python verifier, on an export of a database with both hash formats,
// agrees with audit verify, and catches an export edited, cut or thinned.
func TestAuditExportPythonVerifierAgrees(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fixture()
	e.toV1("other")
	if _, err := e.s.CreateTask(taskgraph.WithPrincipal(context.Background(), "ci <bot> & \u2028"), "other", taskgraph.NodeSpec{NodeID: "second", Payload: json.RawMessage(`{"é":"<&>"}`)}); err != nil {
		t.Fatal(err)
	}
	// The audit chain also holds pauses and resumes, of a workflow and of
	// all claiming, and limits (MCP.md, "Audit trail format").
	op := taskgraph.Operator{Name: "ops", Reason: "deploy"}
	for _, wf := range []string{"other", ""} {
		if _, err := e.s.PauseClaims(context.Background(), wf, op); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.s.ResumeClaims(context.Background(), "other", op); err != nil {
		t.Fatal(err)
	}
	// And an operator's change of a concurrency key's limit.
	if _, err := e.s.SetKeyLimit(context.Background(), "llm", taskgraph.KeyLimit{MaxClaimed: 2, Rate: 10, RateInterval: time.Second}, op); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		OK           bool
		Workflows    int
		Events       int64
		V1Events     int64 `json:"v1_events"`
		AuditEntries int64 `json:"audit_entries"`
	}
	decodeJSON(t, e.cli("", "audit", "verify", "--json").want(t, exitOK).stdout, &rep)
	if !rep.OK || rep.V1Events != 1 || rep.Events <= rep.V1Events {
		t.Fatalf("audit verify: %+v", rep)
	}
	export := e.cli("", "audit", "export").want(t, exitOK).stdout
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(file, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runPy(t, file)
	m := pyVerified.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("audit-verify.py: exit %d\n%s%s", code, out, errs)
	}
	if got, want := strings.Join(m[1:], " "), fmt.Sprintf("%d %d %d %d %d", rep.Workflows, rep.Events, rep.V1Events, rep.Events-rep.V1Events, rep.AuditEntries); got != want {
		t.Fatalf("python says %s (workflows events v1 v2 entries), audit verify %s", got, want)
	}
	head := strings.Fields(e.cli("", "audit", "head").want(t, exitOK).stdout)
	if len(head) != 2 {
		t.Fatalf("audit head printed %q", head)
	}
	if _, errs, code := runPy(t, file, "--expect", head[1]); code != 0 {
		t.Fatalf("--expect the current head: exit %d %s", code, errs)
	}
	// A bad anchor line is bad usage naming --anchor and its line, as
	// audit verify says it (issue 29 item 11).
	for i, bad := range []string{"garbage line", head[0] + " 1:2", "yesterday " + head[1]} {
		anchor := writeAnchor(t, strings.Join(head, " "), bad)
		_, errs, code := runPy(t, file, "--anchor", anchor)
		if want := fmt.Sprintf("--anchor %s line 2: ", anchor); code != 2 || !strings.Contains(errs, want) || strings.Contains(errs, "--expect") {
			t.Errorf("bad anchor line %d %q: exit %d, stderr %q; want 2 naming %q", i, bad, code, errs, want)
		}
		e.cli("", "audit", "verify", "--anchor", anchor).want(t, exitUsage)
	}
	// The database itself, or bytes that are not text, is bad usage that
	// says what to give it instead.
	if _, errs, code := runPy(t, e.path); code != 2 || !strings.Contains(errs, "is an SQLite database, not an export: run `graph-engineering-mcp audit export`") {
		t.Errorf("audit-verify.py on the database file: exit %d, stderr %q; want 2 pointing to audit export", code, errs)
	}
	binary := filepath.Join(t.TempDir(), "binary")
	if err := os.WriteFile(binary, []byte{0xff, 0xfe, 0x00, 0x80}, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := runPy(t, binary); code != 2 || !strings.Contains(errs, "not UTF-8 text, so not an audit export") {
		t.Errorf("audit-verify.py on bytes that are not text: exit %d, stderr %q; want 2", code, errs)
	}
	if _, errs, code := runPy(t, file, "--anchor", writeAnchor(t, strings.Join(head, " "))); code != 0 {
		t.Fatalf("--anchor with the current head: exit %d %s", code, errs)
	}

	lines := strings.Split(strings.TrimSuffix(export, "\n"), "\n")
	tampered := func(name, reason string, edit func([]string) []string) {
		t.Helper()
		ls := edit(append([]string(nil), lines...))
		f := filepath.Join(t.TempDir(), name+".jsonl")
		if err := os.WriteFile(f, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errs, code := runPy(t, f, "--expect", head[1])
		if code != 1 || !strings.Contains(errs, reason) {
			t.Errorf("%s: exit %d, stderr %q, want 1 saying %q", name, code, errs, reason)
		}
	}
	find := func(ls []string, sub string) int {
		for i, l := range ls {
			if strings.Contains(l, sub) {
				return i
			}
		}
		t.Fatalf("no export line contains %q", sub)
		return -1
	}
	tampered("edited-v2", "the event was edited", func(ls []string) []string {
		i := find(ls, `"owner":"w3"`)
		ls[i] = strings.Replace(ls[i], `"owner":"w3"`, `"owner":"w4"`, 1)
		return ls
	})
	tampered("edited-v1", "the event was edited", func(ls []string) []string {
		i := find(ls, `"v":1`)
		ls[i] = strings.Replace(ls[i], `"solo`, `"SOLO`, 1)
		return ls
	})
	tampered("deleted-event", "sequence", func(ls []string) []string {
		i := find(ls, `"kind":"claim"`)
		return append(ls[:i], ls[i+1:]...)
	})
	tampered("workflow-gone", "is missing (deleted whole)", func(ls []string) []string {
		var out []string
		for _, l := range ls {
			if !strings.Contains(l, `"workflow_id":"other"`) || strings.Contains(l, `"chain":"audit"`) {
				out = append(out, l)
			}
		}
		return out
	})
	tampered("tail-dropped", "the anchor counted", func(ls []string) []string {
		// The last event of wf, whose chain stays consistent without it.
		last := -1
		for i, l := range ls {
			if strings.Contains(l, `"workflow_id":"wf"`) && !strings.Contains(l, `"chain"`) {
				last = i
			}
		}
		return append(ls[:last], ls[last+1:]...)
	})
}

// audit head prints a head that audit verify --expect and --anchor accept,
// and that a database with its last events dropped no longer extends.
func TestAuditHeadAndAnchors(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	line := e.cli("", "audit", "head").want(t, exitOK).stdout
	h, err := taskgraph.ParseAuditHead(line)
	if err != nil || h.Entries != 3 || h.Events == 0 {
		t.Fatalf("audit head %q: %+v %v", line, h, err)
	}
	var js struct{ Head, Hash string }
	decodeJSON(t, e.cli("", "audit", "head", "--json").want(t, exitOK).stdout, &js)
	if js.Head != h.String() || js.Hash != h.Hash {
		t.Fatalf("--json %+v, text %q", js, line)
	}
	anchor := filepath.Join(t.TempDir(), "anchor")
	if err := os.WriteFile(anchor, []byte("# kept by ops\n"+line), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.cli("", "audit", "verify", "--anchor", anchor, "--expect", h.String()).want(t, exitOK)
	if !strings.Contains(r.stdout, "extends 2 anchored head(s)") {
		t.Fatalf("stdout %q", r.stdout)
	}
	e.cli("", "audit", "verify", "--expect", "1:2").want(t, exitUsage)

	// Drop the newest event of wf, with its head moved back.
	evs, _ := e.s.WorkflowEvents(context.Background(), "wf")
	last := evs[len(evs)-1]
	db, err := sql.Open("sqlite3", "file:"+e.path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		fmt.Sprintf(`DELETE FROM events WHERE event_id = %d`, last.EventID),
		fmt.Sprintf(`UPDATE workflows SET event_count = %d, head_hash = '%s' WHERE workflow_id = 'wf'`, len(evs)-1, last.PrevHash),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	r = e.cli("", "audit", "verify", "--anchor", anchor).want(t, exitFailure)
	if !strings.Contains(r.stderr, "does not extend the anchored audit head") && !strings.Contains(r.stderr, "does not verify") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// serve --audit-anchor appends the head at start and at shutdown, and the
// file is what audit verify --anchor reads.
func TestServeAuditAnchor(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	anchor := filepath.Join(t.TempDir(), "anchor")
	e.cliCtx(context.Background(), "", "serve", "--database", e.path, "--audit-anchor", anchor, "--log-level", "error").want(t, exitOK)
	b, err := os.ReadFile(anchor)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 1 {
		t.Fatalf("anchor file %q", b)
	}
	// The fixture's workflows wf and other, at start and again at shutdown
	// when their heads moved meanwhile: a serve that ran more than the
	// lease clock's pause gap between two looks at its clocks (a loaded
	// machine) gives the fixture's live lease that time back, a lease
	// shift event of wf.
	wfs := map[string]bool{}
	for _, l := range lines {
		if taskgraph.IsWorkflowHeadLine(l) {
			h, err := taskgraph.ParseWorkflowHead(l)
			if err != nil {
				t.Fatal(err)
			}
			wfs[h.WorkflowID] = true
		} else if _, err := taskgraph.ParseAuditHead(l); err != nil {
			t.Fatal(err)
		}
	}
	if len(wfs) != 2 || !wfs["wf"] || !wfs["other"] {
		t.Errorf("anchor file has the heads of workflows %v, want wf and other:\n%s", wfs, b)
	}
	if _, err := e.s.CreateTask(context.Background(), "third", taskgraph.NodeSpec{NodeID: "x"}); err != nil {
		t.Fatal(err)
	}
	e.cli("", "audit", "verify", "--anchor", anchor).want(t, exitOK)
}

// writeAnchor writes lines as an anchor file and returns its path.
func writeAnchor(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "anchor")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
