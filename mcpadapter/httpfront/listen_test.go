package httpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// A raw client of subscriptions/listen written from the 2026-07-28
// revision (basic/patterns/subscriptions) and the Tasks extension (§ Task
// Status Notifications): a POST whose answer is an SSE stream of JSON-RPC
// notifications.

// sseMsg is one JSON-RPC notification read from a listen stream, with the
// time it was read.
type sseMsg struct {
	Method string `json:"method"`
	Params struct {
		Meta          map[string]any  `json:"_meta"`
		TaskID        string          `json:"taskId"`
		Status        string          `json:"status"`
		StatusMessage string          `json:"statusMessage"`
		LastUpdatedAt string          `json:"lastUpdatedAt"`
		Result        json.RawMessage `json:"result"`
		Notifications struct {
			TaskIDs *[]string `json:"taskIds"`
		} `json:"notifications"`
		RequestID any    `json:"requestId"`
		Reason    string `json:"reason"`
	} `json:"params"`
	raw string
	at  time.Time
}

// listenStream is an open stream: its messages arrive on msgs, which is
// closed at the end of the stream.
type listenStream struct {
	resp *http.Response
	msgs chan sseMsg
}

// listenRequest posts a subscriptions/listen for taskIDs (declaring the
// Tasks extension when declare) and returns the response, unread.
func (f *httpFixture) listenRequest(t *testing.T, ctx context.Context, id any, token string, taskIDs []string, declare bool) *http.Response {
	t.Helper()
	var caps map[string]any
	if declare {
		caps = map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}
	}
	body := modernBody(id, wire.MethodListen, map[string]any{"notifications": map[string]any{"taskIds": taskIDs}}, caps)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range modernHeaders(wire.MethodListen) {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// listen opens a stream and reads it in the background.
func (f *httpFixture) listen(t *testing.T, id any, token string, taskIDs []string) *listenStream {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	t.Cleanup(cancel)
	resp := f.listenRequest(t, ctx, id, token, taskIDs, true)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("listen: HTTP %d %s %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &listenStream{resp: resp, msgs: make(chan sseMsg, 4096)}
	t.Cleanup(func() { resp.Body.Close() })
	go readSSE(resp.Body, s.msgs)
	return s
}

// readSSE parses SSE events (data lines joined, ended by a blank line) and
// sends each event's JSON-RPC message; it closes out at the end.
func readSSE(r io.Reader, out chan<- sseMsg) {
	defer close(out)
	br := bufio.NewReaderSize(r, 1<<20)
	var data strings.Builder
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "" && data.Len() > 0:
			m := sseMsg{raw: data.String(), at: time.Now()}
			if json.Unmarshal([]byte(m.raw), &m) != nil {
				m.Method = "unparsable"
			}
			out <- m
			data.Reset()
		}
		if err != nil {
			return
		}
	}
}

// next returns the stream's next message.
func (s *listenStream) next(t *testing.T) sseMsg {
	t.Helper()
	m, ok := testwait.RecvOK(t, "the next message of the listen stream", s.msgs)
	if !ok {
		t.Fatal("the listen stream ended")
	}
	return m
}

// ack reads the acknowledgement and returns its taskIds.
func (s *listenStream) ack(t *testing.T, id any) []string {
	t.Helper()
	m := s.next(t)
	if m.Method != wire.MethodAcknowledged || m.Params.Notifications.TaskIDs == nil {
		t.Fatalf("first message %s, want %s with taskIds", m.raw, wire.MethodAcknowledged)
	}
	checkSubscription(t, m, id)
	return *m.Params.Notifications.TaskIDs
}

func checkSubscription(t *testing.T, m sseMsg, id any) {
	t.Helper()
	if got := fmt.Sprint(m.Params.Meta[wire.MetaSubscriptionID]); got != fmt.Sprint(id) {
		t.Fatalf("%s carries subscription id %s, want %v", m.raw, got, id)
	}
}

// phase names a task's state as its notification shows it.
func phase(m sseMsg) string {
	if m.Params.Status != "working" {
		return m.Params.Status
	}
	p, _, _ := strings.Cut(m.Params.StatusMessage, ":")
	p, _, _ = strings.Cut(p, " ")
	return p // blocked, pending, claimed
}

// listenChain is the workflow of the push tests: a chain of n nodes, each
// depending on the one before.
func listenChain(t *testing.T, ctx context.Context, st *taskgraph.Store, wf string, n int) []string {
	t.Helper()
	specs := make([]taskgraph.NodeSpec, n)
	for i := range specs {
		specs[i] = taskgraph.NodeSpec{NodeID: fmt.Sprintf("n%02d", i)}
		if i > 0 {
			specs[i].DependsOn = []string{specs[i-1].NodeID}
		}
	}
	out, err := st.CreateWorkflow(ctx, wf, specs)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i, c := range out {
		ids[i] = c.Task.TaskID
	}
	return ids
}

// driveAndWatch claims and completes each task of the chain in turn on
// writer, waiting for the stream to show each change, and checks that every
// task is seen going blocked (the first) or pending, claimed, completed, in
// that order, every message tagged with id. It returns the delays from
// each write's start to its notification.
func driveAndWatch(t *testing.T, ctx context.Context, writer *taskgraph.Store, s *listenStream, id any, ids []string) []time.Duration {
	t.Helper()
	seen := map[string][]string{}
	var delays []time.Duration
	await := func(task, want string, start time.Time) {
		t.Helper()
		// Notifications are ordered per task, not across tasks: the hub
		// reads the tasks one by one, so a dependent made pending by a
		// completion can be read (and sent) before the completion itself.
		if l := seen[task]; start.IsZero() && len(l) > 0 && l[len(l)-1] == want {
			return
		}
		for {
			m := s.next(t)
			if m.Method != wire.MethodTaskStatus {
				t.Fatalf("got %s, want %s", m.raw, wire.MethodTaskStatus)
			}
			checkSubscription(t, m, id)
			ph := phase(m)
			if l := seen[m.Params.TaskID]; len(l) == 0 || l[len(l)-1] != ph {
				seen[m.Params.TaskID] = append(l, ph)
			}
			if m.Params.TaskID == task && ph == want {
				if !start.IsZero() {
					delays = append(delays, m.at.Sub(start))
				}
				return
			}
		}
	}
	// The stream starts with every task's current state.
	for i, tid := range ids {
		want := "blocked"
		if i == 0 {
			want = "pending"
		}
		await(tid, want, time.Time{})
	}
	for i, tid := range ids {
		start := time.Now()
		c, ok, err := writer.Claim(ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: tid})
		if err != nil || !ok {
			t.Fatalf("claim %s: %v %v", tid, ok, err)
		}
		await(tid, "claimed", start)
		start = time.Now()
		h := lease.Holder{TaskID: tid, Owner: "w", Generation: c.Task.Generation, Token: c.Lease.Token}
		if _, err := writer.Complete(ctx, h, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
		await(tid, "completed", start)
		if i+1 < len(ids) {
			await(ids[i+1], "pending", time.Time{})
		}
	}
	for i, tid := range ids {
		want := []string{"pending", "claimed", "completed"}
		if i > 0 {
			want = append([]string{"blocked"}, want...)
		}
		if !slices.Equal(seen[tid], want) {
			t.Errorf("task %d was seen %v, want %v", i, seen[tid], want)
		}
	}
	return delays
}

// logDelays logs p50 and p99 of the delays from a write's start to the
// notification of its change.
func logDelays(t *testing.T, what string, d []time.Duration) {
	t.Helper()
	if len(d) == 0 {
		return
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	pct := func(p float64) time.Duration { return d[min(len(d)-1, int(float64(len(d))*p))] }
	t.Logf("%s: commit to notification over %d changes: p50 %s, p99 %s, max %s", what, len(d), pct(0.50), pct(0.99), d[len(d)-1])
}

// A raw client that declares the Tasks extension gets the acknowledgement
// first, then every state change of a 25-node workflow, each as the full
// task tasks/get returns, every message tagged with its subscription id.
func TestListenReceivesEveryStateChange(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, Options{})
	ids := listenChain(t, f.ctx, f.store, "push", 25)
	s := f.listen(t, "sub-1", "", ids)
	if got := s.ack(t, "sub-1"); !slices.Equal(got, ids) {
		t.Fatalf("acknowledged %v, want %v", got, ids)
	}
	logDelays(t, "sqlite, one process", driveAndWatch(t, f.ctx, f.store, s, "sub-1", ids))
	// The last notification is what tasks/get answers, less resultType.
	get := f.tasksCall("tasks/get", "", ids[len(ids)-1])
	var want map[string]any
	if err := json.Unmarshal(get.rpc.Result, &want); err != nil {
		t.Fatal(err)
	}
	// resultType and _meta serverInfo belong to a response, not to a task.
	delete(want, "resultType")
	delete(want["_meta"].(map[string]any), wire.MetaServerInfo)
	if want["status"] != "completed" || want["result"] == nil {
		t.Fatalf("tasks/get: %s", clipBody(get.body))
	}
	again := f.listen(t, 2, "", ids[len(ids)-1:])
	again.ack(t, 2)
	var got map[string]any
	if err := json.Unmarshal([]byte(again.next(t).raw), &got); err != nil {
		t.Fatal(err)
	}
	params := got["params"].(map[string]any)
	meta := params["_meta"].(map[string]any)
	if meta[wire.MetaSubscriptionID] != float64(2) {
		t.Fatalf("notification _meta %v", meta)
	}
	delete(meta, wire.MetaSubscriptionID)
	if gb, wb := mustJSON(t, params), mustJSON(t, want); gb != wb {
		t.Fatalf("notifications/tasks params\n%s\nwant what tasks/get returns (less resultType and serverInfo)\n%s", gb, wb)
	}
	again.resp.Body.Close()
	// The close of the stream ends the listener.
	s.resp.Body.Close()
	testwait.For(t, "the listener to be gone", func() bool { open, _ := f.srv.ListenStats(); return open == 0 })
}

// taskIds from a client that does not declare the Tasks extension: -32021
// with the extension it needs, before any stream opens.
func TestListenWithoutTheExtensionIsRefused(t *testing.T) {
	t.Parallel()
	f := newHTTPFixture(t, Options{})
	resp := f.listenRequest(t, f.ctx, 7, "", []string{missingTaskID}, false)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		ID    any `json:"id"`
		Error struct {
			Code int64           `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != http.StatusBadRequest || r.Error.Code != -32021 ||
		!strings.Contains(string(r.Error.Data), manifest.TasksExtension) || fmt.Sprint(r.ID) != "7" {
		t.Fatalf("HTTP %d %s, want 400 with -32021 naming %s", resp.StatusCode, b, manifest.TasksExtension)
	}
	// The legacy era still does not serve it.
	legacy := f.post(`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}}}`, map[string]string{wire.HeaderProtocolVersion: "2025-11-25"})
	if legacy.rpc.Error == nil && legacy.status < 400 {
		t.Fatalf("legacy listen: HTTP %d %s, want an error", legacy.status, clipBody(legacy.body))
	}
}

// A principal is acknowledged, and notified about, only the tasks tasks/get
// would show it: another's task is left out exactly like a missing one.
func TestListenShowsOnlyTheCallersTasks(t *testing.T) {
	t.Parallel()
	f, _ := newPrincipalFixture(t)
	planner := f.client("", tokPlanner, nil)
	other := f.client("", tokOther, nil)
	pRes, pOut := callTool(t, planner, manifest.ToolCreate, map[string]any{"workflow_id": "release-9", "node_id": "n"})
	oRes, oOut := callTool(t, other, manifest.ToolCreate, map[string]any{"workflow_id": "other-9", "node_id": "n"})
	if pRes.IsError || oRes.IsError {
		t.Fatal(toolText(pRes), toolText(oRes))
	}
	theirs := pOut["task"].(map[string]any)["task_id"].(string)
	mine := oOut["task"].(map[string]any)["task_id"].(string)
	s := f.listen(t, 3, tokOther, []string{theirs, missingTaskID, mine})
	if got := s.ack(t, 3); !slices.Equal(got, []string{mine}) {
		t.Fatalf("acknowledged %v, want only the caller's own task %s", got, mine)
	}
	// Both tasks change, the other principal's first; the stream says
	// nothing about it.
	for _, tid := range []string{theirs, mine} {
		if _, _, err := f.store.CancelTask(f.ctx, tid, "test"); err != nil {
			t.Fatal(err)
		}
	}
	for {
		m := s.next(t)
		if m.Params.TaskID != mine || m.Method != wire.MethodTaskStatus {
			t.Fatalf("got %s, want only notifications about %s", m.raw, mine)
		}
		if m.Params.Status == "cancelled" {
			break
		}
	}
}

// A listener that stops reading never slows a writer: its queue is bounded
// (here 4 notifications), and once it is full the stream is ended with a
// notifications/cancelled saying why, which the client reads when it reads
// again, followed by the end of the stream. Large results fill the
// connection's buffers so that the server's writes really stall.
func TestListenStalledListenerIsEndedWithAReason(t *testing.T) {
	t.Parallel()
	// Only the bound on the queue ends the stream here, never a write
	// deadline, however slow the machine.
	f := newHTTPFixture(t, Options{ListenWriteTimeout: time.Hour}, func(c *mcpadapter.Config) { c.Listen = mcpadapter.ListenOptions{Buffer: 4} })
	const n = 48
	specs := make([]taskgraph.NodeSpec, n)
	for i := range specs {
		specs[i] = taskgraph.NodeSpec{NodeID: fmt.Sprintf("big%02d", i)}
	}
	out, err := f.store.CreateWorkflow(f.ctx, "stall", specs)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i, c := range out {
		ids[i] = c.Task.TaskID
	}
	churn := ids[n-1]
	ids = ids[:n-1]
	// A client that reads nothing after the response's header: the
	// notifications pile up in the connection, then in the server.
	conn := listenWithoutReading(t, f.ts.URL, append(ids, churn))
	testwait.For(t, "the stream to open", func() bool { open, _ := f.srv.ListenStats(); return open == 1 })
	// Writers complete every task, each with a result of about 200 KB,
	// while nobody reads: each completion returns.
	big := json.RawMessage(`{"blob":"` + strings.Repeat("x", 200<<10) + `"}`)
	for _, tid := range ids {
		c, ok, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: tid})
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if _, err := f.store.Complete(f.ctx, lease.Holder{TaskID: tid, Owner: "w", Generation: c.Task.Generation, Token: c.Lease.Token}, big); err != nil {
			t.Fatal(err)
		}
	}
	changes := churnUntil(t, f.ctx, f.store, churn, "the stalled stream to be ended", func() bool {
		open, overflowed := f.srv.ListenStats()
		return open == 0 && overflowed == 1
	})
	// Reading again, the client gets what was written, then the reason,
	// then the end of the stream.
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan sseMsg, 4096)
	go readSSE(resp.Body, msgs)
	var last sseMsg
	count := 0
	for m := range msgs {
		last = m
		count++
	}
	if last.Method != wire.MethodCancelled || !strings.Contains(last.Params.Reason, "fell behind") ||
		fmt.Sprint(last.Params.RequestID) != "9" || fmt.Sprint(last.Params.Meta[wire.MetaSubscriptionID]) != "9" {
		t.Fatalf("after %d messages the stream ended with %.300s, want notifications/cancelled for request 9 saying it fell behind", count, last.raw)
	}
	if all := 2*len(ids) + changes; count >= all {
		t.Fatalf("the stalled stream carried %d messages, want fewer than the %d changes: it should have been ended", count, all)
	}
	// /metrics counts it.
	r := f.do(http.MethodGet, f.ts.URL+MetricsPath, nil, nil)
	for _, want := range []string{`graph_engineering_listen_streams_ended_total{reason="fell_behind"} 1`, `graph_engineering_listen_streams_open 0`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// churnUntil claims and releases tid, watched by a stalled stream, until
// done holds, and returns how many changes (two per claim and release) it
// made. The hub queues a task's id once per scan that sees it changed, so
// however many writes a scan coalesces on a busy machine, each new
// generation adds to the stalled stream's queue until its bound is passed:
// the large results before it have filled the connection's buffers, so
// nothing more is written. A fixed number of writes could fall short of the
// bound and wait forever.
func churnUntil(t *testing.T, ctx context.Context, st *taskgraph.Store, tid, what string, done func() bool) int {
	t.Helper()
	changes := 0
	testwait.For(t, what, func() bool {
		if done() {
			return true
		}
		c, ok, err := st.Claim(ctx, taskgraph.ClaimRequest{Owner: "churn", TaskID: tid})
		if err != nil || !ok {
			t.Fatalf("claim %s to churn it: %v %v", tid, ok, err)
		}
		if _, err := st.Release(ctx, lease.Holder{TaskID: tid, Owner: "churn", Generation: c.Task.Generation, Token: c.Lease.Token}); err != nil {
			t.Fatalf("release %s: %v", tid, err)
		}
		changes += 2
		return done()
	})
	return changes
}

// smallSendBufferServer serves h on loopback with each accepted
// connection's send buffer set to 64 KB, so that a client that stops
// reading stalls the server's writes after a known amount whatever the
// machine's tcp_wmem allows.
func smallSendBufferServer(h http.Handler) *httptest.Server {
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if tc, ok := c.(*net.TCPConn); ok && s == http.StateNew {
			_ = tc.SetWriteBuffer(64 << 10)
		}
	}
	ts.Start()
	return ts
}

// listenWithoutReading opens a subscriptions/listen stream (2026-07-28) on
// the server at base for the tasks ids over a raw connection with a small
// read buffer, and never reads its answer: what the server sends piles up
// in the connection, then in the server. It returns the connection, which
// closes at the test's end.
func listenWithoutReading(t *testing.T, base string, ids []string) net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	caps := map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}
	body := modernBody(9, wire.MethodListen, map[string]any{"notifications": map[string]any{"taskIds": ids}}, caps)
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"%s: %s\r\n%s: %s\r\nContent-Length: %d\r\n\r\n%s",
		MCPPath, addr, wire.HeaderProtocolVersion, modern, wire.HeaderMethod, wire.MethodListen, len(body), body); err != nil {
		t.Fatal(err)
	}
	return conn
}
