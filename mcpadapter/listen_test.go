package mcpadapter

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// stdioLine is one message the server wrote on stdout.
type stdioLine struct {
	ID     any    `json:"id"`
	Method string `json:"method"`
	Error  *struct {
		Code int64 `json:"code"`
	} `json:"error"`
	Params struct {
		Meta          map[string]any `json:"_meta"`
		TaskID        string         `json:"taskId"`
		Status        string         `json:"status"`
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
	} `json:"params"`
	raw string
}

// On stdio, subscriptions/listen shares the connection with calls: the
// acknowledgement, then the task's current state and its changes, each
// tagged with the listen's id; calls are answered meanwhile; a
// notifications/cancelled for the listen's id ends the stream; and taskIds
// without the Tasks extension declared is -32021.
func TestStdioListen(t *testing.T) {
	f := newFixture(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- f.srv.ServeStdio(f.ctx, inR, outW) }()
	lines := make(chan stdioLine, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := stdioLine{raw: sc.Text()}
			_ = json.Unmarshal(sc.Bytes(), &l)
			lines <- l
		}
	}()
	send := func(v map[string]any) {
		t.Helper()
		b, _ := json.Marshal(v)
		if _, err := inW.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	next := func() stdioLine {
		t.Helper()
		l, ok := testwait.RecvOK(t, "a line on stdout", lines)
		if !ok {
			t.Fatal("stdout ended")
		}
		return l
	}
	created, err := f.store.CreateTask(f.ctx, "stdio-push", taskgraph.NodeSpec{NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	tid := created.Task.TaskID
	tasksCaps := map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}
	listen := func(id any, caps map[string]any) {
		send(map[string]any{"jsonrpc": "2.0", "id": id, "method": wire.MethodListen,
			"params": map[string]any{"_meta": modernMeta(caps), "notifications": map[string]any{"taskIds": []string{tid}}}})
	}
	listen("undeclared", nil)
	if l := next(); l.ID != "undeclared" || l.Error == nil || l.Error.Code != -32021 {
		t.Fatalf("undeclared listen: %s, want -32021", l.raw)
	}
	listen("sub", tasksCaps)
	if l := next(); l.Method != wire.MethodAcknowledged || fmt.Sprint(l.Params.Notifications.TaskIDs) != "["+tid+"]" || l.Params.Meta[wire.MetaSubscriptionID] != "sub" {
		t.Fatalf("first message %s, want the acknowledgement of %s tagged sub", l.raw, tid)
	}
	if l := next(); l.Method != wire.MethodTaskStatus || l.Params.TaskID != tid || l.Params.Status != "working" || l.Params.Meta[wire.MetaSubscriptionID] != "sub" {
		t.Fatalf("second message %s, want the task's current state", l.raw)
	}
	// A call is answered while the stream is open.
	send(map[string]any{"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": map[string]any{"_meta": modernMeta(nil)}})
	if l := next(); fmt.Sprint(l.ID) != "5" || l.Error != nil {
		t.Fatalf("tools/list during the stream: %s", l.raw)
	}
	c, ok, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: tid})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := f.store.Complete(f.ctx, lease.Holder{TaskID: tid, Owner: "w", Generation: c.Task.Generation, Token: c.Lease.Token}, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	for {
		l := next()
		if l.Method != wire.MethodTaskStatus || l.Params.Meta[wire.MetaSubscriptionID] != "sub" {
			t.Fatalf("got %s, want notifications/tasks for sub", l.raw)
		}
		if l.Params.Status == "completed" {
			break
		}
	}
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": "sub"}})
	testwait.For(t, "the cancelled stream to end", func() bool { open, _ := f.srv.ListenStats(); return open == 0 })
	inW.Close()
	if err := testwait.Recv(t, "ServeStdio to return at end of input", served); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	for l := range lines {
		t.Fatalf("after the client cancelled the stream: %s", l.raw)
	}
}
