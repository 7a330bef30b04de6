package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// leaseTimeEnv is the built server over HTTP and one worker's MCP session.
type leaseTimeEnv struct {
	t   *testing.T
	srv *soakServer
	ctx context.Context
	cs  *mcp.ClientSession
}

func newLeaseTimeEnv(t *testing.T) *leaseTimeEnv {
	t.Helper()
	bin := builtBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := &soakServer{t: t, bin: bin, db: filepath.Join(t.TempDir(), "tasks.db"), addr: addr, token: "lease-token-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	srv.start()
	t.Cleanup(func() {
		srv.mu.Lock()
		srv.cmd.Process.Signal(syscall.SIGCONT)
		srv.mu.Unlock()
		srv.kill()
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &leaseTimeEnv{t: t, srv: srv, ctx: ctx}
	e.connect()
	return e
}

func (e *leaseTimeEnv) connect() {
	e.t.Helper()
	httpClient := &http.Client{Transport: bearer{e.srv.token, http.DefaultTransport}, Timeout: 60 * time.Second}
	c := mcp.NewClient(&mcp.Implementation{Name: "lease-time", Version: "1"}, nil)
	cs, err := c.Connect(e.ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + e.srv.addr + "/mcp", HTTPClient: httpClient, MaxRetries: -1}, nil)
	if err != nil {
		e.t.Fatalf("connect: %v\n%s", err, e.srv.logs.String())
	}
	e.t.Cleanup(func() { cs.Close() })
	e.cs = cs
}

// call runs a tool and fails the test on a tool error.
func (e *leaseTimeEnv) call(tool string, args map[string]any) map[string]any {
	e.t.Helper()
	res, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		e.t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		b, _ := json.Marshal(res.Content)
		e.t.Fatalf("%s was rejected: %s", tool, b)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	return out
}

// claim creates a task and claims it with leaseMS; it returns the holder
// arguments.
func (e *leaseTimeEnv) claim(leaseMS int) map[string]any {
	e.t.Helper()
	e.call(manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "n"})
	out := e.call(manifest.ToolClaim, map[string]any{"owner": "w1", "lease_ms": leaseMS})
	l := out["lease"].(map[string]any)
	return map[string]any{"task_id": out["task"].(map[string]any)["task_id"], "owner": "w1", "generation": l["generation"], "claim_token": l["claim_token"]}
}

// finish heartbeats and completes with the same claim and checks the task
// was completed on its first attempt.
func (e *leaseTimeEnv) finish(h map[string]any) {
	e.t.Helper()
	e.call(manifest.ToolHeartbeat, h)
	done := map[string]any{"result": map[string]any{"ok": true}}
	for k, v := range h {
		done[k] = v
	}
	out := e.call(manifest.ToolComplete, done)
	task := out["task"].(map[string]any)
	if task["state"] != "completed" || task["attempts"] != float64(1) || task["generation"] != float64(1) {
		e.t.Fatalf("task after complete: %v", task)
	}
}

// SIGSTOP of the server for longer than the lease, then SIGCONT: a heartbeat
// sent during the stop and the same claim's complete succeed, and the task is
// completed on its first attempt.
func TestServerPauseLongerThanLeaseCostsNoLease(t *testing.T) {
	if testing.Short() {
		t.Skip("real-process pause: skipped with -short")
	}
	t.Parallel()
	e := newLeaseTimeEnv(t)
	h := e.claim(2000)
	e.srv.mu.Lock()
	if err := e.srv.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		e.srv.mu.Unlock()
		t.Fatal(err)
	}
	e.srv.mu.Unlock()
	queued := make(chan error, 1)
	go func() {
		res, err := e.cs.CallTool(e.ctx, &mcp.CallToolParams{Name: manifest.ToolHeartbeat, Arguments: h})
		if err == nil && res.IsError {
			b, _ := json.Marshal(res.Content)
			err = &toolErr{string(b)}
		}
		queued <- err
	}()
	time.Sleep(4 * time.Second) // the process is stopped: twice the lease passes on the wall clock
	e.srv.mu.Lock()
	err := e.srv.cmd.Process.Signal(syscall.SIGCONT)
	e.srv.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-queued; err != nil {
		t.Fatalf("the heartbeat queued during a 4 s SIGSTOP (lease 2 s) failed: %v\n%s", err, e.srv.logs.String())
	}
	e.finish(h)
}

// SIGKILL of the server and a restart after a downtime longer than the
// lease: the same claim's heartbeat and complete succeed, and the task is
// completed on its first attempt.
func TestServerRestartAfterLongDowntimeCostsNoLease(t *testing.T) {
	if testing.Short() {
		t.Skip("real-process restart: skipped with -short")
	}
	t.Parallel()
	e := newLeaseTimeEnv(t)
	h := e.claim(5000)
	e.srv.kill()
	time.Sleep(6 * time.Second) // down for longer than the lease
	e.srv.start()
	e.connect()
	e.finish(h)
}

type toolErr struct{ msg string }

func (e *toolErr) Error() string { return "tool error: " + e.msg }
