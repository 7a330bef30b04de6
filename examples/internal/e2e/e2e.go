// Package e2e holds the test harness of the example programs: it builds the
// real server and example binaries, runs them as processes, waits on what
// they log, and reads the database back through the operator CLI. It is
// imported only by tests.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// Bins are the built programs.
type Bins struct {
	Dir    string // holds all three; put it first on PATH
	Server string // graph-engineering-mcp
	Worker string
	Submit string
}

var (
	buildOnce sync.Once
	bins      Bins
	buildErr  error
)

// ModuleRoot is the repository root.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Build builds the server and both examples once per test binary; call
// Cleanup from TestMain to remove them.
func Build(t testing.TB) Bins {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ge-examples-bin-")
		if err != nil {
			buildErr = err
			return
		}
		bins = Bins{Dir: dir, Server: filepath.Join(dir, "graph-engineering-mcp"), Worker: filepath.Join(dir, "worker"), Submit: filepath.Join(dir, "submit")}
		if buildErr = GoBuild(dir, nil, "./cmd/graph-engineering-mcp"); buildErr != nil {
			return
		}
		var flags []string
		if raceEnabled {
			flags = []string{"-race"}
		}
		buildErr = GoBuild(dir, flags, "./examples/worker", "./examples/submit")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins
}

// GoBuild runs "go build [flags] -o dir/ pkgs..." in the module root.
func GoBuild(dir string, flags []string, pkgs ...string) error {
	args := append(append([]string{"build"}, flags...), "-o", dir+string(filepath.Separator))
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Dir = ModuleRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}

// Cleanup removes the built programs.
func Cleanup() {
	if bins.Dir != "" {
		os.RemoveAll(bins.Dir)
	}
}

// ServerCmd is a --server-cmd value serving db over stdio.
func (b Bins) ServerCmd(db string, extra ...string) string {
	if strings.ContainsAny(b.Server+db, " \t") {
		panic("paths with spaces cannot go in --server-cmd; use the -- form")
	}
	return strings.Join(append([]string{b.Server, "serve", "--database", db}, extra...), " ")
}

// Proc is a running program whose output is recorded.
type Proc struct {
	t      *testing.T
	Name   string
	cmd    *exec.Cmd
	stdout testwait.Buffer
	stderr testwait.Buffer
	done   chan struct{}
	err    error
}

// Start runs bin with args. It is killed at the end of the test if it is
// still running.
func Start(t *testing.T, name, bin string, args ...string) *Proc {
	t.Helper()
	return StartEnv(t, name, nil, bin, args...)
}

// StartEnv is Start with extra environment variables ("KEY=value").
func StartEnv(t *testing.T, name string, env []string, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, Name: name, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.Name, p.Stderr())
		}
	})
	return p
}

// Stdout returns what the program wrote on stdout so far.
func (p *Proc) Stdout() string { return p.stdout.String() }

// Stderr returns what the program logged so far.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Signal sends sig to the program.
func (p *Proc) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s: %v", p.Name, err)
	}
}

// Interrupt sends SIGINT.
func (p *Proc) Interrupt() { p.Signal(syscall.SIGINT) }

// Wait waits for the program to exit and returns its exit code. A program
// that never exits fails the test at its deadline (testwait), whatever the
// machine's speed.
func (p *Proc) Wait() int {
	p.t.Helper()
	ctx := testwait.Context(p.t)
	select {
	case <-p.done:
	case <-ctx.Done():
		p.t.Fatalf("%s never exited\nstderr:\n%s", p.Name, p.Stderr())
	}
	return p.cmd.ProcessState.ExitCode()
}

// WaitLog waits until a line of stderr contains every one of parts, and
// returns that line. It fails the test if the program exits first, or at
// the test's deadline.
func (p *Proc) WaitLog(parts ...string) string {
	p.t.Helper()
	deadline := testwait.Context(p.t).Done()
	for {
		changed := p.stderr.Changed()
		if line := p.findLine(parts); line != "" {
			return line
		}
		select {
		case <-changed:
		case <-p.done:
			if line := p.findLine(parts); line != "" {
				return line
			}
			p.t.Fatalf("%s exited (%v) before logging %q\nstderr:\n%s", p.Name, p.err, parts, p.Stderr())
		case <-deadline:
			p.t.Fatalf("%s never logged %q\nstderr:\n%s", p.Name, parts, p.Stderr())
		}
	}
}

func (p *Proc) findLine(parts []string) string {
	for _, line := range strings.Split(p.Stderr(), "\n") {
		if containsAll(line, parts) {
			return line
		}
	}
	return ""
}

func containsAll(s string, parts []string) bool {
	for _, part := range parts {
		if !strings.Contains(s, part) {
			return false
		}
	}
	return true
}

// Run runs the server binary's operator command and returns its stdout; a
// non-zero exit fails the test.
func (b Bins) Run(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(b.Server, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("graph-engineering-mcp %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// Show is the output of "tasks show ID --json".
type Show struct {
	Task struct {
		TaskID        string          `json:"task_id"`
		WorkflowID    string          `json:"workflow_id"`
		NodeID        string          `json:"node_id"`
		State         string          `json:"state"`
		StatusMessage string          `json:"status_message"`
		Owner         string          `json:"owner"`
		Generation    int64           `json:"generation"`
		Attempts      int             `json:"attempts"`
		Result        json.RawMessage `json:"result"`
		Error         string          `json:"error"`
	} `json:"task"`
	Lease struct {
		Status string `json:"status"`
		Owner  string `json:"owner"`
	} `json:"lease"`
	Events []Event `json:"events"`
}

// Event is one event of a task's history.
type Event struct {
	Seq        int64           `json:"seq"`
	Kind       string          `json:"kind"`
	Owner      string          `json:"owner"`
	Generation int64           `json:"generation"`
	Detail     json.RawMessage `json:"detail"`
}

// TasksShow reads a task and its history with the operator CLI.
func (b Bins) TasksShow(t *testing.T, db, taskID string) Show {
	t.Helper()
	var s Show
	if err := json.Unmarshal(b.Run(t, "tasks", "show", taskID, "--json", "--database", db), &s); err != nil {
		t.Fatalf("tasks show --json: %v", err)
	}
	// The CLI indents; compact the result so tests can compare bytes.
	if len(s.Task.Result) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, s.Task.Result); err != nil {
			t.Fatalf("tasks show --json: result: %v", err)
		}
		s.Task.Result = buf.Bytes()
	}
	return s
}

// WorkflowTasks maps the node ids of a workflow to their task ids.
func (b Bins) WorkflowTasks(t *testing.T, db, workflow string) map[string]string {
	t.Helper()
	var list struct {
		Tasks []struct {
			TaskID string `json:"task_id"`
			NodeID string `json:"node_id"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(b.Run(t, "tasks", "list", "--workflow", workflow, "--json", "--database", db), &list); err != nil {
		t.Fatalf("tasks list --json: %v", err)
	}
	out := map[string]string{}
	for _, task := range list.Tasks {
		out[task.NodeID] = task.TaskID
	}
	return out
}

// holderKinds are the events only the holder of the live claim can cause.
var holderKinds = map[string]bool{"heartbeat": true, "complete": true, "fail": true, "retry": true, "release": true}

// CheckHolderWrites asserts from a task's history that every holder write
// (heartbeat, complete, fail, retry, release) was made by the owner and generation of
// the claim live at that moment: nobody wrote to a task they did not hold.
func CheckHolderWrites(t *testing.T, s Show) {
	t.Helper()
	var owner string
	var gen int64
	held := false
	for _, e := range s.Events {
		switch {
		case e.Kind == "claim":
			owner, gen, held = e.Owner, e.Generation, true
		case holderKinds[e.Kind]:
			if !held || e.Owner != owner || e.Generation != gen {
				t.Errorf("task %s: %s by %s at generation %d while the live claim was %s/%d (held=%v)", s.Task.TaskID, e.Kind, e.Owner, e.Generation, owner, gen, held)
			}
			if e.Kind != "heartbeat" {
				held = false
			}
		default:
			// Anything else (expire, requeue, cancel, abort…) ends the claim.
			held = false
		}
	}
}

// CreateTask creates a task through a real server process and returns its id.
func (b Bins) CreateTask(t *testing.T, db, workflow, node string, payload map[string]any) string {
	t.Helper()
	ctx, cancel := testwait.Bound(t, context.Background())
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "examples-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(b.Server, "serve", "--database", db)}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	args := map[string]any{"workflow_id": workflow, "node_id": node}
	if payload != nil { // an explicit null payload is refused, as the schema says
		args["payload"] = payload
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "graph_task_create", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("create: %v %+v", err, res)
	}
	var out struct {
		Task struct {
			TaskID string `json:"task_id"`
		} `json:"task"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil || out.Task.TaskID == "" {
		t.Fatalf("create result: %s", raw)
	}
	return out.Task.TaskID
}
