package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// withoutIDs replaces the fixture's task ids in out with <node>.
func withoutIDs(out string, f fixture) string {
	for node, t := range f.tasks {
		out = strings.ReplaceAll(out, t.TaskID, "<"+node+">")
	}
	return out
}

func TestWorkflowShowText(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	e.clock.Advance(30 * time.Second)
	r := e.cli("", "workflow", "show", "wf").want(t, exitOK)
	want := `workflow wf: 7 tasks, created 2026-03-01T12:00:00Z, updated 2026-03-01T12:00:03Z (30s ago)

NODE                  STATE      OWNER  TASK       NOTE
✓ fetch               completed  w1     <fetch>
├── ▶ build           claimed    w2     <build>    generation 1, lease expires in 9m
│   └── … test        blocked    -      <test>     waiting on build
│       └── ⊘ deploy  cancelled  -      <deploy>   cancelled: upstream node lint (task <lint>) failed
├── ○ package         pending    -      <package>
└── ✗ lint            failed     w3     <lint>     failed: lint: 3 problems second line
    └── ⊘ docs        cancelled  -      <docs>     cancelled: upstream node lint (task <lint>) failed
        └── ⊘ deploy  cancelled                    ↑ shown above

1/7 completed · 1 failed · 2 cancelled · 1 claimed · 1 pending · 1 blocked
legend: ✓ completed   ✗ failed   ⊘ cancelled   ▶ claimed   ○ pending   … blocked
`
	// Task ids are 26 characters wide; after substitution the columns
	// after TASK shift, so compare with the padding normalised.
	norm := regexp.MustCompile(` {2,}`)
	if got := norm.ReplaceAllString(withoutIDs(r.stdout, f), "  "); got != norm.ReplaceAllString(want, "  ") {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, want)
	}

	r = e.cli("", "workflow", "show", "wf", "--ascii").want(t, exitOK)
	for i, b := range []byte(r.stdout) {
		if b >= 0x80 {
			t.Fatalf("--ascii output has a non-ASCII byte at %d:\n%s", i, r.stdout)
		}
	}
	for _, l := range []string{"+ fetch", "|-- > build", "|   `-- . test", "|       `-- / deploy", "    `-- / docs", "        `-- / deploy", "^ shown above"} {
		lineWith(t, r.stdout, l)
	}
}

func TestWorkflowShowJSON(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	r := e.cli("", "workflow", "show", "wf", "--format", "json").want(t, exitOK)
	alias := e.cli("", "workflow", "show", "wf", "--json").want(t, exitOK)
	if r.stdout != alias.stdout {
		t.Fatalf("--json differs from --format json:\n%s\n%s", r.stdout, alias.stdout)
	}
	var out struct {
		WorkflowID string `json:"workflow_id"`
		Finished   bool
		Total      int
		Counts     map[string]int
		Tasks      []struct {
			TaskID string `json:"task_id"`
			NodeID string `json:"node_id"`
			State  string
		}
		Edges []struct{ Dependency, Task string }
	}
	decodeJSON(t, r.stdout, &out)
	if out.WorkflowID != "wf" || out.Finished || out.Total != 7 || len(out.Tasks) != 7 || len(out.Edges) != 7 {
		t.Fatalf("view: %+v", out)
	}
	if out.Counts["cancelled"] != 2 || out.Counts["completed"] != 1 || out.Counts["blocked"] != 1 || len(out.Counts) != 6 {
		t.Fatalf("counts: %v", out.Counts)
	}
	if out.Tasks[0].TaskID != f.tasks["fetch"].TaskID || out.Tasks[0].State != "completed" {
		t.Fatalf("first task: %+v", out.Tasks[0])
	}
}

func TestWorkflowShowErrors(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	r := e.cli("", "workflow", "show", "nosuch").want(t, exitFailure)
	if !strings.Contains(r.stderr, `workflow "nosuch" not found`) {
		t.Fatalf("stderr %q", r.stderr)
	}
	for _, args := range [][]string{
		{"workflow", "show", "wf", "--format", "yaml"},
		{"workflow", "show", "wf", "--json", "--format", "dot"},
		{"workflow", "show"},
		{"workflow", "show", "bad id!"},
		{"workflow", "watch", "wf", "--interval", "1ms"},
		{"workflow", "watch", "wf", "--interval", "soon"},
	} {
		if r := e.cli("", args...); r.code != exitUsage {
			t.Errorf("%v: exit %d (stderr %q), want 2", args, r.code, r.stderr)
		}
	}
}

var (
	dotNodeRE = regexp.MustCompile(`^  "([^"\\]+)" \[label="([^"\\]*(?:\\n[^"\\]*)*)", style="[a-z,]+", fillcolor="#[0-9a-f]{6}", color="#[0-9a-f]{6}", tooltip="task [0-9A-Z]{26}"\];$`)
	dotEdgeRE = regexp.MustCompile(`^  "([^"\\]+)" -> "([^"\\]+)";$`)
)

func TestWorkflowShowDOT(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	r := e.cli("", "workflow", "show", "wf", "--format", "dot").want(t, exitOK)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	i := 0
	for i < len(lines) && strings.HasPrefix(lines[i], "//") {
		i++
	}
	if i >= len(lines) || lines[i] != `digraph "workflow wf" {` || lines[len(lines)-1] != "}" {
		t.Fatalf("not a digraph:\n%s", r.stdout)
	}
	labels := map[string]string{}
	var edges [][2]string
	for _, l := range lines[i+1 : len(lines)-1] {
		switch {
		case strings.HasPrefix(l, "  graph ["), strings.HasPrefix(l, "  node ["), strings.HasPrefix(l, "  edge ["):
		case dotNodeRE.MatchString(l):
			m := dotNodeRE.FindStringSubmatch(l)
			labels[m[1]] = m[2]
		case dotEdgeRE.MatchString(l):
			m := dotEdgeRE.FindStringSubmatch(l)
			edges = append(edges, [2]string{m[1], m[2]})
		default:
			t.Fatalf("unexpected DOT line %q", l)
		}
	}
	wantLabels := map[string]string{
		"fetch": `fetch\ncompleted`, "build": `build\nclaimed\nw2`, "package": `package\npending`, "lint": `lint\nfailed`,
		"test": `test\nblocked`, "docs": `docs\ncancelled`, "deploy": `deploy\ncancelled`,
	}
	for n, l := range wantLabels {
		if labels[n] != l {
			t.Errorf("node %s label %q, want %q", n, labels[n], l)
		}
	}
	if len(labels) != len(wantLabels) {
		t.Errorf("nodes %v, want %v", labels, wantLabels)
	}
	wantEdges := map[[2]string]bool{{"fetch", "build"}: true, {"fetch", "package"}: true, {"fetch", "lint"}: true,
		{"build", "test"}: true, {"lint", "docs"}: true, {"test", "deploy"}: true, {"docs", "deploy"}: true}
	for _, ed := range edges {
		if !wantEdges[ed] {
			t.Errorf("unexpected edge %v", ed)
		}
		delete(wantEdges, ed)
	}
	if len(wantEdges) != 0 {
		t.Errorf("missing edges %v", wantEdges)
	}
	// Render it when Graphviz is installed.
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Log("dot (Graphviz) not installed; rendering not checked")
		return
	}
	svg := filepath.Join(t.TempDir(), "wf.svg")
	cmd := exec.Command(dot, "-Tsvg", "-o", svg)
	cmd.Stdin = strings.NewReader(r.stdout)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dot rejected the output: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Fatalf("dot produced no SVG: %v", err)
	}
}

func TestDOTQuote(t *testing.T) {
	if got := dotQuote("a\"b\\c\nd"); got != `"a\"b\\c\nd"` {
		t.Fatalf("dotQuote = %s", got)
	}
}

// watchRun runs workflow watch in the background with stdout on a pipe, so
// the test reads each line as it is written: no sleeping, no polling.
type watchRun struct {
	lines  chan string
	done   chan result
	stderr *bytes.Buffer
}

func startWatch(t *testing.T, e *env, ctx context.Context, args ...string) *watchRun {
	t.Helper()
	pr, pw := io.Pipe()
	w := &watchRun{lines: make(chan string, 100), done: make(chan result, 1), stderr: &bytes.Buffer{}}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	go func() {
		argv := append([]string{"graph-engineering-mcp", "workflow", "watch"}, args...)
		argv = append(argv, "--database", e.path)
		code := run(ctx, argv, strings.NewReader(""), pw, w.stderr)
		pw.Close()
		w.done <- result{code: code}
	}()
	t.Cleanup(func() { pr.Close() })
	return w
}

// next returns the next line the watch prints, failing at the test's
// deadline if it prints nothing (the watch polls every few milliseconds).
func (w *watchRun) next(t *testing.T) string {
	t.Helper()
	l, ok := testwait.RecvOK(t, "the watch to print a line", w.lines)
	if !ok {
		t.Fatal("watch output ended")
	}
	return l
}

// until reads lines until one contains want, and returns it.
func (w *watchRun) until(t *testing.T, want string) string {
	t.Helper()
	for {
		if l := w.next(t); strings.Contains(l, want) {
			return l
		}
	}
}

func (w *watchRun) wait(t *testing.T) result {
	t.Helper()
	r := testwait.Recv(t, "the watch to return", w.done)
	r.stderr = w.stderr.String()
	return r
}

func TestWorkflowWatchLines(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	ctx := context.Background()
	w := startWatch(t, e, e.ctx, "wf", "--interval", "10ms")
	first := w.next(t)
	if first != "2026-03-01T12:00:03Z workflow wf: 1/7 completed, 1 claimed, 1 failed, 2 cancelled, 1 pending, 1 blocked" {
		t.Fatalf("first line %q", first)
	}
	e.clock.Advance(time.Second)
	if _, err := e.s.Complete(ctx, holderOfClaim(f.build), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if l := w.next(t); l != "2026-03-01T12:00:04Z workflow wf: 2/7 completed, 0 claimed, 1 failed, 2 cancelled, 2 pending, 0 blocked" {
		t.Fatalf("after build completed: %q", l)
	}
	for _, node := range []string{"package", "test"} {
		c := e.claim("w9", f.tasks[node].TaskID)
		if _, err := e.s.Complete(ctx, holderOfClaim(c), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	last := w.until(t, "(finished)")
	if !strings.HasSuffix(last, "workflow wf: 4/7 completed, 0 claimed, 1 failed, 2 cancelled, 0 pending, 0 blocked (finished)") {
		t.Fatalf("last line %q", last)
	}
	if r := w.wait(t); r.code != exitOK || r.stderr != "" {
		t.Fatalf("watch of a finished workflow: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, ok := <-w.lines; ok {
		t.Fatal("output after the finished line")
	}
}

func TestWorkflowWatchInterrupted(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	w := startWatch(t, e, ctx, "wf", "--interval", "10ms")
	w.next(t)
	cancel() // as main does on SIGINT
	r := w.wait(t)
	if r.code != exitFailure || !strings.Contains(r.stderr, "watch interrupted; workflow wf has not finished: workflow wf: 1/7 completed") {
		t.Fatalf("interrupted watch: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestWorkflowWatchJSONAndFinished(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	e.cli("", "admin", "abort-workflow", "wf", "--reason", "test", "--yes").want(t, exitOK)
	r := e.cli("", "workflow", "watch", "wf", "--json").want(t, exitOK)
	if strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("a finished workflow: want one line, got:\n%s", r.stdout)
	}
	var p struct {
		WorkflowID string `json:"workflow_id"`
		Total      int
		Finished   bool
		Counts     map[string]int
	}
	decodeJSON(t, r.stdout, &p)
	if p.WorkflowID != "wf" || p.Total != 7 || !p.Finished || p.Counts["cancelled"] != 5 {
		t.Fatalf("progress: %+v", p)
	}
	r = e.cli("", "workflow", "watch", "nosuch").want(t, exitFailure)
	if !strings.Contains(r.stderr, `workflow "nosuch" not found`) {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// On a terminal the view is redrawn in place; the frame logic is tested on
// a buffer since the test has no terminal.
func TestWatchRedraw(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	view := func() taskgraph.WorkflowView {
		v, err := e.s.Workflow(context.Background(), "wf")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var buf bytes.Buffer
	wv := &watchView{w: &buf, mode: watchRedraw, style: unicodeStyle}
	if err := wv.update(view(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	first := buf.String()
	if !strings.HasPrefix(first, ansiHideCursor+ansiNoWrap+ansiClearDown+"workflow wf  ████░") {
		t.Fatalf("first frame %q", first)
	}
	for _, want := range []string{"1/7 completed (14%)", "1 claimed · 1 failed · 2 cancelled · 1 pending · 1 blocked",
		"  ▶ build  claimed by w2 (generation 1)\n", "  ✗ lint  failed: lint: 3 problems second line\n"} {
		if !strings.Contains(first, want) {
			t.Errorf("first frame lacks %q:\n%s", want, first)
		}
	}
	frameLines := strings.Count(first, "\n")
	buf.Reset()
	e.clock.Advance(time.Minute) // time alone changes nothing on screen
	if err := wv.update(view(), e.clock.Now()); err != nil || buf.Len() != 0 {
		t.Fatalf("an unchanged workflow was redrawn: %q (%v)", buf.String(), err)
	}
	// A lease that lapsed unprocessed is flagged.
	lapsed := redrawFrame(view(), e.clock.Now().Add(claimLease), unicodeStyle)
	if !strings.Contains(lapsed, "  ▶ build  claimed by w2 (generation 1), lease expired\n") {
		t.Fatalf("lapsed lease not flagged:\n%s", lapsed)
	}
	if _, err := e.s.Complete(context.Background(), holderOfClaim(f.build), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := wv.update(view(), e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if want := "\r\x1b[" + strconv.Itoa(frameLines) + "A" + ansiClearDown + "workflow wf"; !strings.HasPrefix(buf.String(), want) {
		t.Fatalf("redraw %q does not start by moving up %d lines", buf.String(), frameLines)
	}
	buf.Reset()
	wv.close()
	if buf.String() != ansiWrap+ansiShowCursor {
		t.Fatalf("close wrote %q, want the terminal restored", buf.String())
	}
}

// A long chain is drawn with bounded indentation, every node once.
func TestWorkflowShowDeepChain(t *testing.T) {
	e := newEnv(t)
	const n = maxTreeIndent + 6
	nodes := make([]taskgraph.NodeSpec, n)
	for i := range nodes {
		nodes[i].NodeID = "n" + strconv.Itoa(i)
		if i > 0 {
			nodes[i].DependsOn = []string{"n" + strconv.Itoa(i-1)}
		}
	}
	if _, err := e.s.CreateWorkflow(context.Background(), "chain", nodes); err != nil {
		t.Fatal(err)
	}
	r := e.cli("", "workflow", "show", "chain").want(t, exitOK)
	deepest := lineWith(t, r.stdout, "n"+strconv.Itoa(n-1)+" ")
	if !strings.Contains(deepest, "(depth "+strconv.Itoa(n-1)+")") {
		t.Fatalf("deepest line %q does not give its depth", deepest)
	}
	treeWidth := len([]rune(strings.SplitN(deepest, " blocked", 2)[0]))
	if limit := 4*maxTreeIndent + 2 + len("n99") + 2; treeWidth > limit {
		t.Fatalf("deepest node drawn %d runes wide, want at most %d:\n%s", treeWidth, limit, r.stdout)
	}
	for i := 0; i < n; i++ {
		if c := strings.Count(r.stdout, " n"+strconv.Itoa(i)+" "); c != 1 {
			t.Fatalf("n%d appears %d times:\n%s", i, c, r.stdout)
		}
	}
}
