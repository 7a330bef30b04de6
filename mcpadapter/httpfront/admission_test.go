package httpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// fleetCall calls a tool from a worker goroutine: a transport error or a
// tool error is returned, never fatal.
func fleetCall(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s: tool error: %s", name, toolText(res))
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%s: result: %w", name, err)
	}
	return out, nil
}

// connectOwnTransport connects an SDK client with an HTTP transport of its
// own, so that its first request opens a new TCP connection.
func (f *httpFixture) connectOwnTransport(version, token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, nil)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	tr := &http.Transport{}
	f.t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: clientRT{next: tr, token: token}}
	return c.Connect(f.ctx, &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: hc, MaxRetries: -1}, opts)
}

func TestIsLongPoll(t *testing.T) {
	for body, want := range map[string]bool{
		`{"name":"graph_task_claim","arguments":{"owner":"w","wait_ms":5000}}`:                   true,
		`{"name":"graph_task_claim","arguments":{"owner":"w","workflow_id":"x","wait_ms":1}}`:    true,
		`{"name":"graph_task_claim","arguments":{"owner":"w","wait_ms":0}}`:                      false,
		`{"name":"graph_task_claim","arguments":{"owner":"w"}}`:                                  false,
		`{"name":"graph_task_claim","arguments":{"owner":"w","wait_ms":"5000"}}`:                 false,
		`{"name":"graph_task_claim","arguments":{"owner":"w","wait_ms":1.5}}`:                    false,
		`{"name":"graph_task_claim","arguments":{"owner":"w","wait_ms":5,"wait_ms":6}}`:          false,
		`{"Name":"graph_task_claim","arguments":{"owner":"w","wait_ms":5000}}`:                   false,
		`{"name":"graph_task_claim","arguments":{"owner":"w","wait_ms":30001}}`:                  false,
		`{"name":"graph_task_claim","arguments":{"owner":"w","wait_ms":-5}}`:                     false,
		`{"name":"graph_task_claim","arguments":{"owner":"w","task_id":"T","wait_ms":5000}}`:     false,
		`{"name":"graph_task_heartbeat","arguments":{"owner":"w","wait_ms":5000}}`:               false,
		`{"name":"graph_task_claim","arguments":[1]}`:                                            false,
		`{"name":"graph_task_claim","arguments":{"owner":"w","wait_ms":5000},"_meta":{"a":"b"}}`: true,
	} {
		msg, fail := wire.ParseBody([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + body + `}`))
		if fail != nil {
			t.Fatalf("%s: %s", body, fail.Msg)
		}
		if got := isLongPoll(msg); got != want {
			t.Errorf("isLongPoll(%s) = %v, want %v", body, got, want)
		}
	}
	msg, _ := wire.ParseBody([]byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"graph_task_claim","arguments":{"owner":"w","wait_ms":5000}}}`))
	if isLongPoll(msg) {
		t.Error("a notification was taken for a long poll")
	}
}

// fleetWorker runs the README loop: claim-next with wait_ms; on a claim,
// heartbeat three times and complete. Any failure of a holder write ends it
// with an error; the end of ctx ends it cleanly.
func fleetWorker(ctx context.Context, cs *mcp.ClientSession, owner string, completed *atomic.Int64, lat *latencies) error {
	for ctx.Err() == nil {
		out, err := fleetCall(ctx, cs, manifest.ToolClaim, map[string]any{"owner": owner, "workflow_id": "fleet", "wait_ms": 5000})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if out["claimed"] != true {
			continue
		}
		holder := holderArgs(out)
		work := context.WithoutCancel(ctx)
		for range 3 {
			start := time.Now()
			if _, err := fleetCall(work, cs, manifest.ToolHeartbeat, holder); err != nil {
				return fmt.Errorf("%s holding %v: %w", owner, holder["task_id"], err)
			}
			lat.add(time.Since(start))
		}
		done := maps.Clone(holder)
		done["result"] = owner
		start := time.Now()
		if _, err := fleetCall(work, cs, manifest.ToolComplete, done); err != nil {
			return fmt.Errorf("%s holding %v: %w", owner, holder["task_id"], err)
		}
		lat.add(time.Since(start))
		completed.Add(1)
	}
	return nil
}

// fleet is a running fleet of fleetWorkers, half of them speaking
// 2026-07-28 and half keeping a legacy session.
type fleet struct {
	completed    atomic.Int64
	holderWrites latencies
	cancel       context.CancelFunc
	wg           sync.WaitGroup
	errs         chan error
}

// startFleet connects workers clients to f, starts a fleetWorker on each
// and waits until every one waits for work in the store.
func startFleet(t *testing.T, f *httpFixture, workers int) *fleet {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	t.Cleanup(cancel)
	fl := &fleet{cancel: cancel, errs: make(chan error, workers)}
	for i := range workers {
		version := ""
		if i%2 == 1 {
			version = "2025-11-25"
		}
		cs, err := f.connect(version, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		fl.wg.Add(1)
		go func() {
			defer fl.wg.Done()
			fl.errs <- fleetWorker(ctx, cs, fmt.Sprintf("w%d", i), &fl.completed, &fl.holderWrites)
		}()
	}
	testwait.Progress(t, "the whole fleet to wait for work", func() (bool, int64) {
		n := f.store.Waiters()
		return n == workers, int64(n)
	})
	return fl
}

// progress reports whether every one of tasks was completed, and the
// fleet's holder writes so far: each heartbeat and complete is progress.
func (fl *fleet) progress(tasks int64) (bool, int64) {
	n, _, _ := fl.holderWrites.summary()
	return fl.completed.Load() == tasks, int64(n)
}

// stop ends the fleet and fails t with every worker's error.
func (fl *fleet) stop(t *testing.T) {
	t.Helper()
	fl.cancel()
	fl.wg.Wait()
	close(fl.errs)
	for err := range fl.errs {
		if err != nil {
			t.Errorf("worker: %v", err)
		}
	}
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// summary returns the count, median and maximum.
func (l *latencies) summary() (int, time.Duration, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(l.d)
	return len(l.d), l.d[len(l.d)/2], l.d[len(l.d)-1]
}

// Rule 1 (HTTP half): a hundred workers long-polling, more than the 64
// concurrency slots, never take the capacity holders and producers need.
func TestHTTPFleetOfLongPollsLeavesSlotsToHolders(t *testing.T) {
	const workers, tasks = 100, 16
	f, st := newHTTPStore(t)
	srv := f.serveOn(t, Options{}) // the defaults: 64 slots
	fl := startFleet(t, f, workers)
	if got := testutil.ToFloat64(f.metrics.longPolls); got != workers {
		t.Fatalf("long polls in flight = %v, want %d", got, workers)
	}
	// A producer creates work while every worker waits; each create is a
	// short call and must be served.
	producer := f.client("", "", nil)
	for i := range tasks {
		if _, err := fleetCall(f.ctx, producer, manifest.ToolCreate, map[string]any{"workflow_id": "fleet", "node_id": fmt.Sprintf("n%d", i)}); err != nil {
			t.Fatalf("create while %d workers wait: %v", workers, err)
		}
	}
	testwait.Progress(t, "every task to be completed", func() (bool, int64) { return fl.progress(tasks) })
	fl.stop(t)
	n, median, worst := fl.holderWrites.summary()
	t.Logf("%d workers (half legacy) long-polling with wait_ms 5000, 64 slots, %d tasks: %d holder writes, median %v, max %v", workers, tasks, n, median, worst)
	if got := testutil.ToFloat64(f.metrics.rejections.WithLabelValues("busy")); got != 0 {
		t.Errorf("%v requests were refused as busy", got)
	}
	counts, err := st.CountByState(f.ctx)
	if err != nil || counts[taskgraph.StateCompleted] != tasks {
		t.Fatalf("states %v (%v), want %d completed", counts, err, tasks)
	}
	srv.stop()
}

// slowConn is a client that sends its request slowly: headers one line at a
// time, or (with a body) the headers whole and the body a byte at a time.
type slowConn struct {
	c      net.Conn
	closed atomic.Bool // the server closed it
}

func dialSlow(t *testing.T, addr, token string, body bool) *slowConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &slowConn{c: c}
	head := "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\n"
	if body {
		head += "Authorization: Bearer " + token + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 4096\r\n\r\n{"
	}
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	go func() { // the server closing the connection ends this read
		_, _ = io.Copy(io.Discard, c)
		s.closed.Store(true)
	}()
	go func() {
		next := "X-Slow: 1\r\n"
		if body {
			next = " "
		}
		for !s.closed.Load() {
			if _, err := io.WriteString(c, next); err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { c.Close() })
	return s
}

// Rule 2: slow and unauthenticated clients, more than the connection cap,
// neither delay a worker's heartbeat until their timeouts nor take the
// concurrency slots.
func TestServeSlowClientsDoNotStarveWorkers(t *testing.T) {
	const (
		token                   = "fleet-token-0123456789"
		slowHeaders, slowBodies = 300, 64 // slowBodies = every concurrency slot
		maxConns                = 256
	)
	f, st := newHTTPStore(t)
	srv := f.serveOn(t, Options{AuthToken: token, MaxConnections: maxConns})
	task, err := st.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := f.connectOwnTransport("", token)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	claim, err := fleetCall(f.ctx, worker, manifest.ToolClaim, map[string]any{"owner": "w", "task_id": task.Task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	holder := holderArgs(claim)
	var latencies []time.Duration
	heartbeat := func(cs *mcp.ClientSession, what string) {
		t.Helper()
		start := time.Now()
		if _, err := fleetCall(f.ctx, cs, manifest.ToolHeartbeat, holder); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		latencies = append(latencies, time.Since(start))
	}
	heartbeat(worker, "heartbeat before the slow clients")

	var slow []*slowConn
	for range slowBodies {
		slow = append(slow, dialSlow(t, srv.addr, token, true))
		heartbeat(worker, "heartbeat while bodies trickle")
	}
	for i := range slowHeaders {
		slow = append(slow, dialSlow(t, srv.addr, "", false))
		if i%10 == 0 {
			heartbeat(worker, "heartbeat while headers trickle")
		}
	}
	// More connections than the cap arrived: the server closed enough slow
	// ones to make room (the oldest, evicted at the cap; on a loaded
	// machine, where dialling them all outlasts the header timeout, some
	// by that timeout instead), so none waited in the backlog.
	evicted := func() float64 { return testutil.ToFloat64(f.metrics.evictions.WithLabelValues("connection")) }
	closedSlow := func() int {
		n := 0
		for _, s := range slow {
			if s.closed.Load() {
				n++
			}
		}
		return n
	}
	testwait.Progress(t, "the connections beyond the cap to be accepted", func() (bool, int64) {
		n := closedSlow()
		return n >= slowHeaders+slowBodies+1-maxConns, int64(n)
	})
	for range 10 {
		heartbeat(worker, "heartbeat at the connection cap")
	}
	// A worker that joins now opens a new connection and is served at once.
	late, err := f.connectOwnTransport("", token)
	if err != nil {
		t.Fatalf("a worker joining at the connection cap: %v", err)
	}
	defer late.Close()
	start := time.Now()
	if _, err := fleetCall(f.ctx, late, manifest.ToolInspect, map[string]any{"task_id": task.Task.TaskID}); err != nil {
		t.Fatalf("a worker joining at the connection cap: %v", err)
	}
	joined := time.Since(start)
	open := 0
	for _, s := range slow {
		if !s.closed.Load() {
			open++
		}
	}
	slices.Sort(latencies)
	worst := latencies[len(latencies)-1]
	t.Logf("%d heartbeats with %d slow-header and %d slow-body clients at MaxConnections %d: median %v, max %v; a joining worker's first call %v; %v connections evicted, %d slow clients still open",
		len(latencies), slowHeaders, slowBodies, maxConns, latencies[len(latencies)/2], worst, joined, evicted(), open)
	// Behaviour, not speed: the worker was served while slow clients still
	// held their connections, so it waited for none of their timeouts (the
	// header timeout is 10 s; the bound is generous).
	if open == 0 {
		t.Fatal("every slow client had been closed: the worker may have waited for their timeouts")
	}
	if worst >= readHeaderTimeout || joined >= readHeaderTimeout {
		t.Fatalf("a heartbeat took %v and a joining worker %v: they waited as long as the slow clients' header timeout %v", worst, joined, readHeaderTimeout)
	}
	if got := testutil.ToFloat64(f.metrics.rejections.WithLabelValues("busy")); got != 0 {
		t.Fatalf("%v requests refused as busy while bodies trickled", got)
	}
	srv.stop()
	if err := <-srv.done; err != nil {
		t.Fatal(err)
	}
}

func bareInitialize(f *httpFixture, t *testing.T) string {
	t.Helper()
	r := f.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"burst","version":"1"}}}`, nil)
	id := r.header.Get(wire.HeaderSessionID)
	if r.status != http.StatusOK || id == "" {
		t.Fatalf("bare initialize: HTTP %d %s (session %q)", r.status, clipBody(r.body), id)
	}
	return id
}

// Rule 10: a burst of bare initializes closes its own sessions, oldest
// first, never those of the clients that use theirs.
func TestHTTPInitializeBurstCannotLockOutRealClients(t *testing.T) {
	const maxSessions, workers, burst = 32, 4, 256
	f := newHTTPFixture(t, Options{MaxSessions: maxSessions, SessionIdleTimeout: time.Hour})
	type held struct {
		cs     *mcp.ClientSession
		holder map[string]any
	}
	var real []held
	for i := range workers {
		if _, err := f.store.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: fmt.Sprintf("n%d", i)}); err != nil {
			t.Fatal(err)
		}
		cs := f.client("2025-11-25", "", nil)
		owner := fmt.Sprintf("w%d", i)
		out, err := fleetCall(f.ctx, cs, manifest.ToolClaim, map[string]any{"owner": owner})
		if err != nil || out["claimed"] != true {
			t.Fatalf("claim: %v %v", out, err)
		}
		real = append(real, held{cs, holderArgs(out)})
	}
	var bare []string
	for i := range burst {
		bare = append(bare, bareInitialize(f, t))
		if i%16 == 0 {
			// All but the last keep working through the burst; the last is
			// idle (but initialized) all along, and survives too, since the
			// sessions that never got past initialize go first.
			for _, w := range real[:workers-1] {
				if _, err := fleetCall(f.ctx, w.cs, manifest.ToolHeartbeat, w.holder); err != nil {
					t.Fatalf("heartbeat during the burst, after %d bare initializes: %v", i+1, err)
				}
			}
		}
	}
	for _, w := range real {
		done := maps.Clone(w.holder)
		done["result"] = "ok"
		if _, err := fleetCall(f.ctx, w.cs, manifest.ToolComplete, done); err != nil {
			t.Fatalf("complete after the burst: %v", err)
		}
	}
	// A new real client still gets in.
	late := f.client("2025-11-25", "", nil)
	if _, err := late.ListTools(f.ctx, nil); err != nil {
		t.Fatalf("a client arriving after the burst: %v", err)
	}
	live := f.h.liveSessionIDs()
	for _, w := range append(real, held{cs: late}) {
		if !live[w.cs.ID()] {
			t.Errorf("session of a client in use was closed")
		}
	}
	keep := maxSessions - workers - 1 // the newest bare sessions survive
	for i, id := range bare {
		if want := i >= burst-keep; live[id] != want {
			t.Errorf("bare session %d of %d: live %v, want %v (oldest closed first)", i+1, burst, live[id], want)
		}
	}
	if got, want := testutil.ToFloat64(f.metrics.evictions.WithLabelValues("session")), float64(burst+1-(maxSessions-workers)); got != want {
		t.Errorf("session evictions = %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(f.metrics.rejections.WithLabelValues("too_many_sessions")); got != 0 {
		t.Errorf("%v initializes refused", got)
	}
}

// Rule 10: among initialized sessions the one idle the longest is closed for
// room; one with a request in flight (a claim waiting for work) never is.
func TestHTTPSessionCapClosesTheLongestIdle(t *testing.T) {
	f := newHTTPFixture(t, Options{MaxSessions: 3, SessionIdleTimeout: time.Hour})
	a := f.client("2025-11-25", "", nil)
	b := f.client("2025-11-25", "", nil)
	c := f.client("2025-06-18", "", nil)
	claim := make(chan error, 1)
	go func() {
		out, err := fleetCall(f.ctx, a, manifest.ToolClaim, map[string]any{"owner": "a", "workflow_id": "later", "wait_ms": 30000})
		if err == nil && out["claimed"] != true {
			err = fmt.Errorf("claim returned %v", out)
		}
		claim <- err
	}()
	testwait.For(t, "a's claim to wait", func() bool { return f.store.Waiters() == 1 })
	for _, cs := range []*mcp.ClientSession{b, c} { // b is now idle longer than c
		if _, err := cs.ListTools(f.ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	d := f.client("2025-11-25", "", nil)
	if _, err := d.ListTools(f.ctx, nil); err != nil {
		t.Fatalf("the new session: %v", err)
	}
	if _, err := b.ListTools(f.ctx, nil); err == nil {
		t.Fatal("the longest idle session b still works after a fourth session opened at MaxSessions 3")
	}
	if _, err := c.ListTools(f.ctx, nil); err != nil {
		t.Fatalf("session c, used more recently than b, was closed: %v", err)
	}
	if _, err := f.store.CreateTask(f.ctx, "later", taskgraph.NodeSpec{NodeID: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := <-claim; err != nil {
		t.Fatalf("the waiting claim of the oldest session: %v", err)
	}
	if _, err := a.ListTools(f.ctx, nil); err != nil {
		t.Fatalf("session a, busy when the fourth opened, was closed: %v", err)
	}
}

// A claim that waits for work outlives the server's ReadTimeout: once the
// body is read the deadline is lifted, so the server does not take the
// wait for a client that went away and cancel it. (The server's real
// ReadTimeout, 30 s, equals the longest claim wait.)
func TestHTTPLongPollOutlivesTheReadTimeout(t *testing.T) {
	f, _ := newHTTPStore(t)
	h, err := New(f.srv, Options{Metrics: f.metrics, Logger: f.logger})
	if err != nil {
		t.Fatal(err)
	}
	hs := h.newServer()
	hs.ReadTimeout = 100 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(newConnLimiter(ln, 16, nil))
	t.Cleanup(func() { hs.Close() })
	f.url = "http://" + ln.Addr().String() + MCPPath
	for _, version := range []string{"", "2025-11-25"} {
		cs, err := f.connect(version, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		out, err := fleetCall(f.ctx, cs, manifest.ToolClaim, map[string]any{"owner": "w", "workflow_id": "empty", "wait_ms": 1000})
		if err != nil || out["claimed"] != false {
			t.Fatalf("version %q: a claim waiting 1 s behind a 100 ms ReadTimeout: %v %v, want claimed: false", version, out, err)
		}
	}
}

func TestServeWarnsOfAConnectionCapAboveTheOpenFilesLimit(t *testing.T) {
	limit, ok := openFilesLimit()
	if !ok || limit > 1<<40 {
		t.Skip("no finite open-files limit here")
	}
	f, _ := newHTTPStore(t)
	srv := f.serveOn(t, Options{MaxConnections: int(limit)})
	testwait.For(t, "the warning", func() bool { return strings.Contains(f.logs.String(), "exceeds the open-files limit") })
	srv.stop()
	if err := <-srv.done; err != nil {
		t.Fatal(err)
	}
	g, _ := newHTTPStore(t)
	srv = g.serveOn(t, Options{MaxConnections: 1})
	if r := g.post(modernBody(1, "tools/list", nil, nil), modernHeaders("tools/list")); r.status != http.StatusOK {
		t.Fatalf("HTTP %d", r.status)
	}
	if strings.Contains(g.logs.String(), "open-files limit") {
		t.Fatal("warned of a cap of 1 connection")
	}
	srv.stop()
	<-srv.done
}

// takeSlots takes n concurrency slots for the test, as n short calls in
// progress would: a real short call is over too soon to hold one while the
// test looks.
func takeSlots(t *testing.T, h *Handler, n int) {
	t.Helper()
	for i := range n {
		if !h.slots.tryAcquire() {
			t.Fatalf("slot %d of %d was not free", i+1, n)
		}
	}
}

// A freed slot goes to the first waiting holder write, then to the other
// short calls in the order they came; a waiter that gives up leaves the
// queue without taking a slot.
func TestSlotPoolHoldersFirst(t *testing.T) {
	p := newSlotPool(1)
	if !p.tryAcquire() || p.tryAcquire() {
		t.Fatal("a pool of one slot did not give exactly one")
	}
	order := make(chan string, 4)
	wait := func(name string, holder bool) {
		go func() {
			if p.acquire(context.Background(), holder, time.Hour) {
				order <- name
			}
		}()
	}
	queued := func(holders, others int) func() bool {
		return func() bool { h, o := p.waiting(); return h == holders && o == others }
	}
	wait("short 1", false)
	testwait.For(t, "short 1 to queue", queued(0, 1))
	wait("holder 1", true)
	testwait.For(t, "holder 1 to queue", queued(1, 1))
	wait("short 2", false)
	testwait.For(t, "short 2 to queue", queued(1, 2))
	wait("holder 2", true)
	testwait.For(t, "holder 2 to queue", queued(2, 2))

	// One that gives up leaves the queue and takes nothing.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan bool, 1)
	go func() { gaveUp <- p.acquire(ctx, true, time.Hour) }()
	testwait.For(t, "the third holder to queue", queued(3, 2))
	cancel()
	if <-gaveUp {
		t.Fatal("a waiter whose context ended took a slot")
	}
	if h, o := p.waiting(); h != 2 || o != 2 {
		t.Fatalf("after one gave up: %d holders and %d others wait, want 2 and 2", h, o)
	}
	if p.acquire(context.Background(), false, time.Nanosecond) {
		t.Fatal("a short call took a slot past the queue")
	}

	var got []string
	for range 4 {
		p.release()
		got = append(got, <-order)
	}
	if want := []string{"holder 1", "holder 2", "short 1", "short 2"}; !slices.Equal(got, want) {
		t.Fatalf("slots went to %v, want %v", got, want)
	}
	p.release()
	if !p.tryAcquire() {
		t.Fatal("the slot freed with nobody waiting was not free")
	}
}

// Over HTTP, a holder write that finds every slot taken waits for one past
// --admission-wait, while other short calls are refused with 503; and when
// a slot comes free it goes to the holder write, not to a call that came
// before it.
func TestHTTPHolderWritesWaitAheadOfShortCalls(t *testing.T) {
	f := newHTTPFixture(t, Options{MaxConcurrent: 1, AdmissionWait: 30 * time.Second})
	c, err := f.store.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: c.Task.TaskID, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	holder := map[string]any{"task_id": cl.Task.TaskID, "owner": "w", "generation": cl.Lease.Generation, "claim_token": cl.Lease.Token}
	takeSlots(t, f.h, 1)
	listed := make(chan *rawResponse, 1)
	go func() { listed <- f.post(modernBody(1, "tools/list", nil, nil), modernHeaders("tools/list")) }()
	testwait.For(t, "tools/list to wait for a slot", func() bool { _, o := f.h.slots.waiting(); return o == 1 })
	beat := make(chan *rawResponse, 1)
	go func() {
		beat <- f.post(modernBody(2, "tools/call", map[string]any{"name": manifest.ToolHeartbeat, "arguments": holder}, nil),
			modernHeaders("tools/call", wire.HeaderName, manifest.ToolHeartbeat))
	}()
	testwait.For(t, "the heartbeat to wait for a slot", func() bool { h, _ := f.h.slots.waiting(); return h == 1 })
	// Operators see both waiting, apart.
	m := f.do(http.MethodGet, f.ts.URL+MetricsPath, nil, nil)
	for _, want := range []string{`graph_engineering_http_slot_waiters{kind="holder"} 1`, `graph_engineering_http_slot_waiters{kind="other"} 1`} {
		if !strings.Contains(string(m.body), want) {
			t.Fatalf("/metrics while a heartbeat and a list wait: no %s", want)
		}
	}
	f.h.slots.release() // the call in progress ends: its slot goes to the heartbeat
	r := <-beat
	var res map[string]any
	if r.status != http.StatusOK || json.Unmarshal(r.rpc.Result, &res) != nil || res["isError"] == true {
		t.Fatalf("the heartbeat: HTTP %d %s", r.status, clipBody(r.body))
	}
	if r := <-listed; r.status != http.StatusOK {
		t.Fatalf("tools/list, served after the heartbeat: HTTP %d %s", r.status, clipBody(r.body))
	}

	// With --admission-wait at "refuse at once", a short call is refused
	// while a heartbeat still waits, and is served when a slot comes free.
	g := newHTTPFixture(t, Options{MaxConcurrent: 1, AdmissionWait: -1})
	c, err = g.store.CreateTask(g.ctx, "wf", taskgraph.NodeSpec{NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err = g.store.Claim(g.ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: c.Task.TaskID, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	holder = map[string]any{"task_id": cl.Task.TaskID, "owner": "w", "generation": cl.Lease.Generation, "claim_token": cl.Lease.Token, "result": "done"}
	takeSlots(t, g.h, 1)
	go func() {
		beat <- g.post(modernBody(3, "tools/call", map[string]any{"name": manifest.ToolComplete, "arguments": holder}, nil),
			modernHeaders("tools/call", wire.HeaderName, manifest.ToolComplete))
	}()
	testwait.For(t, "the complete to wait for a slot", func() bool { h, _ := g.h.slots.waiting(); return h == 1 })
	if r := g.post(modernBody(4, "tools/list", nil, nil), modernHeaders("tools/list")); r.status != http.StatusServiceUnavailable {
		t.Fatalf("tools/list with every slot taken and admission-wait off: HTTP %d, want 503", r.status)
	}
	if h, _ := g.h.slots.waiting(); h != 1 {
		t.Fatal("the complete stopped waiting when a short call was refused")
	}
	g.h.slots.release()
	r = <-beat
	if r.status != http.StatusOK || json.Unmarshal(r.rpc.Result, &res) != nil || res["isError"] == true {
		t.Fatalf("the complete that waited: HTTP %d %s", r.status, clipBody(r.body))
	}
	task, err := g.store.Task(g.ctx, cl.Task.TaskID)
	if err != nil || task.State != taskgraph.StateCompleted {
		t.Fatalf("task after the complete: %v (%v), want completed", task.State, err)
	}
}

// The fleet under a flood of short calls: a hundred workers (half legacy)
// long-poll and hold claims while readers call graph_task_inspect again and
// again, with one slot left free and --admission-wait at "refuse at once".
// The readers are refused with 503 over and over (each backs off a little
// before it tries again, as a client told to retry later should); not one
// holder write is, and every task is completed on its first attempt. The
// wait for the tasks fails only when the fleet stops making progress.
func TestHTTPFleetHolderWritesThroughAReaderFlood(t *testing.T) {
	const workers, tasks, readers = 100, 24, 16
	f := newHTTPFixture(t, Options{MaxConcurrent: 2, AdmissionWait: -1})
	takeSlots(t, f.h, 1) // one slot is held for the whole run
	defer f.h.slots.release()
	fl := startFleet(t, f, workers)
	first, err := f.store.CreateTask(f.ctx, "other", taskgraph.NodeSpec{NodeID: "seen"})
	if err != nil {
		t.Fatal(err)
	}
	var reads, refused atomic.Int64
	readCtx, stopReaders := context.WithCancel(f.ctx)
	var rg sync.WaitGroup
	readerSessions := make([]*mcp.ClientSession, readers)
	for i := range readers { // all connected before any reads: a connect takes a slot too
		cs, err := f.connect("", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		readerSessions[i] = cs
	}
	for _, cs := range readerSessions {
		rg.Add(1)
		go func() {
			defer rg.Done()
			var pause testwait.Backoff
			for readCtx.Err() == nil {
				if _, err := fleetCall(readCtx, cs, manifest.ToolInspect, map[string]any{"task_id": first.Task.TaskID}); err != nil {
					refused.Add(1)
					pause.Wait(readCtx)
				} else {
					reads.Add(1)
					pause.Reset()
				}
			}
		}()
	}
	for i := range tasks {
		if _, err := f.store.CreateTask(f.ctx, "fleet", taskgraph.NodeSpec{NodeID: fmt.Sprintf("n%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Progress(t, "every task to be completed", func() (bool, int64) { return fl.progress(tasks) })
	stopReaders()
	rg.Wait()
	fl.stop(t)
	n, median, worst := fl.holderWrites.summary()
	busy := testutil.ToFloat64(f.metrics.rejections.WithLabelValues("busy"))
	t.Logf("%d workers, %d readers, 1 free slot, admission-wait off: %d holder writes (median %v, max %v), %d reads served, %d refused (%v busy rejections)",
		workers, readers, n, median, worst, reads.Load(), refused.Load(), busy)
	if refused.Load() == 0 || busy == 0 {
		t.Fatalf("no reader was refused (%d refused, %v busy): the slot was never contended, so the test proved nothing", refused.Load(), busy)
	}
	if n != 4*tasks {
		t.Fatalf("%d holder writes served, want %d (3 heartbeats and a complete per task)", n, 4*tasks)
	}
	counts, err := f.store.CountByState(f.ctx)
	if err != nil || counts[taskgraph.StateCompleted] != tasks {
		t.Fatalf("states %v (%v), want %d completed", counts, err, tasks)
	}
}
