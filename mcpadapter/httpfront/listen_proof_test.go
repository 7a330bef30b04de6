package httpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// The proofs of issue 26 for subscriptions/listen, on both drivers: many
// open streams and one that never reads leave writers alone and keep the
// server's memory bounded; a restart ends streams cleanly, and a client that
// listens again gets the current state.

// proofDriver opens a database at a location, again after a restart.
type proofDriver struct {
	name string
	loc  func(t *testing.T) string
	open func(t *testing.T, ctx context.Context, loc string) *taskgraph.Store
}

func proofDrivers() []proofDriver {
	return []proofDriver{
		{name: "sqlite",
			loc: func(t *testing.T) string { return filepath.Join(t.TempDir(), "tasks.db") },
			open: func(t *testing.T, ctx context.Context, loc string) *taskgraph.Store {
				st, err := sqlitestore.Open(ctx, loc, taskgraph.Options{Sweep: true}, tgsqlite.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			}},
		{name: "postgres",
			loc: func(t *testing.T) string { return pgtest.URL(t) },
			open: func(t *testing.T, ctx context.Context, loc string) *taskgraph.Store {
				d, err := tgpostgres.Open(ctx, loc, tgpostgres.Options{})
				if err != nil {
					t.Fatal(err)
				}
				st, err := taskgraph.OpenDriver(ctx, d, taskgraph.Options{Sweep: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			}},
	}
}

// proofServer is an MCP server over st, with listen options lo.
func proofServer(t *testing.T, st *taskgraph.Store, lo mcpadapter.ListenOptions) *mcpadapter.Server {
	t.Helper()
	srv, err := mcpadapter.New(mcpadapter.Config{Store: st, Version: "test", Surface: manifest.NewSurface(manifest.Options{}), Listen: lo})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// claimComplete claims and completes task tid on st with result res and
// returns how long the two writes took.
func claimComplete(t *testing.T, ctx context.Context, st *taskgraph.Store, tid string, res json.RawMessage) time.Duration {
	t.Helper()
	start := time.Now()
	c, ok, err := st.Claim(ctx, taskgraph.ClaimRequest{Owner: "w", TaskID: tid})
	if err != nil || !ok {
		t.Fatalf("claim %s: %v %v", tid, ok, err)
	}
	if _, err := st.Complete(ctx, lease.Holder{TaskID: tid, Owner: "w", Generation: c.Task.Generation, Token: c.Lease.Token}, res); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

func independentTasks(t *testing.T, ctx context.Context, st *taskgraph.Store, wf, prefix string, n int) []string {
	t.Helper()
	specs := make([]taskgraph.NodeSpec, n)
	for i := range specs {
		specs[i] = taskgraph.NodeSpec{NodeID: fmt.Sprintf("%s%03d", prefix, i)}
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

// pct is the p-quantile of d.
func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// 100 open streams that read and one that never does: every write returns
// while the stalled stream's queue fills (writers never wait for a
// listener), the stalled stream alone is ended with a reason once its
// bounded queue is full, the 100 others see every change, and what the
// server keeps queued never exceeds the sum of the streams' bounds. The
// writers' latency with and without the streams is logged, not asserted
// (a shared machine's noise is larger than any bound worth stating): the
// assertion is the structure, that no write ever waits for a listener.
func TestListenHundredStreamsAndOneThatNeverReads(t *testing.T) {
	for _, d := range proofDrivers() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := testwait.Context(t)
			st := d.open(t, ctx, d.loc(t))
			const buffer, readers, small, big = 4, 100, 10, 48
			srv := proofServer(t, st, mcpadapter.ListenOptions{Buffer: buffer})
			h, err := New(srv, Options{ListenWriteTimeout: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			ts := smallSendBufferServer(h)
			t.Cleanup(func() { h.StopListens(); ts.Close(); h.AbortCalls(); h.CloseSessions() })
			f := &httpFixture{t: t, ctx: ctx, store: st, srv: srv, h: h, ts: ts, url: ts.URL + MCPPath}

			// Writers' latency before any stream is open.
			base := independentTasks(t, ctx, st, "baseline", "b", small)
			var before []time.Duration
			for _, tid := range base {
				before = append(before, claimComplete(t, ctx, st, tid, json.RawMessage(`{}`)))
			}

			smallIDs := independentTasks(t, ctx, st, "watched", "s", small)
			streams := make([]*listenStream, readers)
			for i := range streams {
				streams[i] = f.listen(t, fmt.Sprintf("r-%d", i), "", smallIDs)
			}
			// Each reader: the acknowledgement, then every task pending.
			states := make([]map[string]string, readers)
			var statesMu sync.Mutex
			for i, s := range streams {
				s.ack(t, fmt.Sprintf("r-%d", i))
				states[i] = map[string]string{}
			}
			readAll := make(chan struct{})
			var wg sync.WaitGroup
			for i, s := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case m, ok := <-s.msgs:
							if !ok {
								return
							}
							statesMu.Lock()
							if m.Method == wire.MethodTaskStatus {
								states[i][m.Params.TaskID] = phase(m)
							} else {
								states[i]["!"] = m.Method + " " + m.Params.Reason
							}
							statesMu.Unlock()
						case <-readAll:
							return
						}
					}
				}()
			}
			t.Cleanup(func() { close(readAll); wg.Wait() })

			// The stream that never reads: a raw connection whose reader
			// stops after the request, on tasks whose results (about 200 KB
			// each) fill the connection's buffers.
			// One more task than the large ones is churned at the end.
			stallIDs := independentTasks(t, ctx, st, "stall", "x", big+1)
			bigIDs, churn := stallIDs[:big], stallIDs[big]
			_ = listenWithoutReading(t, ts.URL, stallIDs)
			testwait.For(t, "the 101 streams to be open", func() bool { return srv.ListenMetrics().Open == readers+1 })
			// What the server may keep queued is fixed by the bounds, not
			// by how far behind a client is.
			bound := readers*max(buffer, small) + max(buffer, big+1)
			if m := srv.ListenMetrics(); m.QueueBound != bound {
				t.Fatalf("queue bound %d, want %d", m.QueueBound, bound)
			}

			// Writers: the stalled stream's tasks with large results,
			// between them the readers' tasks, each awaited on every reader.
			blob := json.RawMessage(`{"blob":"` + strings.Repeat("x", 200<<10) + `"}`)
			var during, watched []time.Duration
			unwatched := independentTasks(t, ctx, st, "unwatched", "u", big)
			peak := 0
			for i, tid := range bigIDs {
				claimComplete(t, ctx, st, tid, blob) // returns: never waits for the stalled stream
				peak = max(peak, srv.ListenMetrics().Queued)
				if srv.ListenMetrics().Ended["fell_behind"] == 0 {
					during = append(during, claimComplete(t, ctx, st, unwatched[i], json.RawMessage(`{}`)))
				}
				if i%(big/small) != 0 || i/(big/small) >= small {
					continue
				}
				sid := smallIDs[i/(big/small)]
				watched = append(watched, claimComplete(t, ctx, st, sid, json.RawMessage(`{}`)))
				testwait.For(t, "every reader to see the completion", func() bool {
					statesMu.Lock()
					defer statesMu.Unlock()
					for _, s := range states {
						if s[sid] != "completed" {
							return false
						}
					}
					return true
				})
			}
			churnUntil(t, ctx, st, churn, "the stalled stream to be ended", func() bool {
				m := srv.ListenMetrics()
				peak = max(peak, m.Queued)
				return m.Ended["fell_behind"] == 1
			})
			m := srv.ListenMetrics()
			if m.Open != readers || m.Ended["closed"] != 0 || m.Ended["shutdown"] != 0 || peak > bound || m.Queued > m.QueueBound {
				t.Fatalf("after the stalled stream was ended: %+v, peak queued %d; want %d open, only the stalled one ended, at most %d queued", m, peak, readers, bound)
			}
			statesMu.Lock()
			for i, s := range states {
				if s["!"] != "" {
					t.Errorf("reader %d was ended: %s", i, s["!"])
				}
			}
			statesMu.Unlock()
			t.Logf("%s: claim+complete of a task nobody watches: p50 %s p99 %s without streams, p50 %s p99 %s with %d streams open and one stalled; of a task %d streams watch: p50 %s p99 %s (the notifications are rendered meanwhile: CPU shared, nothing waited for)",
				d.name, pct(before, .5), pct(before, .99), pct(during, .5), pct(during, .99), readers, readers, pct(watched, .5), pct(watched, .99))
		})
	}
}

// A restart ends every stream cleanly: the client reads
// notifications/cancelled saying the server is shutting down, then the end
// of the stream (never a hang). After the restart, with a change committed
// while the server was down, a client that listens again gets every task's
// current state.
func TestListenRestartEndsStreamsAndClientsResume(t *testing.T) {
	for _, d := range proofDrivers() {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			ctx := testwait.Context(t)
			loc := d.loc(t)
			st := d.open(t, ctx, loc)
			ids := listenChain(t, ctx, st, "restart", 3)
			serve := func(st *taskgraph.Store) (string, context.CancelFunc, chan error) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				sctx, stop := context.WithCancel(ctx)
				done, finished := make(chan error, 1), make(chan struct{})
				go func() {
					defer close(finished)
					done <- Serve(sctx, ln, proofServer(t, st, mcpadapter.ListenOptions{}), Options{})
				}()
				t.Cleanup(func() { stop(); <-finished })
				return "http://" + ln.Addr().String() + MCPPath, stop, done
			}
			url, stop, done := serve(st)
			f := &httpFixture{t: t, ctx: ctx, store: st, url: url}
			s := f.listen(t, "before", "", ids)
			s.ack(t, "before")
			for range ids {
				if m := s.next(t); m.Method != wire.MethodTaskStatus {
					t.Fatalf("got %s, want the tasks' current state", m.raw)
				}
			}
			stop()
			if err := testwait.Recv(t, "Serve to return", done); err != nil {
				t.Fatal(err)
			}
			m := s.next(t)
			if m.Method != wire.MethodCancelled || !strings.Contains(m.Params.Reason, "shutting down") || fmt.Sprint(m.Params.RequestID) != "before" {
				t.Fatalf("at shutdown the stream carried %s, want notifications/cancelled saying the server is shutting down", m.raw)
			}
			if m, ok := testwait.RecvOK(t, "the end of the stream", s.msgs); ok {
				t.Fatalf("after notifications/cancelled: %s, want the end of the stream", m.raw)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}

			// While the server is down, another process finishes the first
			// task; then the server starts again on the same database.
			st = d.open(t, ctx, loc)
			claimComplete(t, ctx, st, ids[0], json.RawMessage(`{"done":true}`))
			f.url, _, _ = serve(st)
			s = f.listen(t, "after", "", ids)
			if got := s.ack(t, "after"); len(got) != len(ids) {
				t.Fatalf("acknowledged %v after the restart, want %v", got, ids)
			}
			want := map[string]string{ids[0]: "completed", ids[1]: "pending", ids[2]: "blocked"}
			got := map[string]string{}
			for range ids {
				m := s.next(t)
				checkSubscription(t, m, "after")
				got[m.Params.TaskID] = phase(m)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the restart the client was told %v, want %v", got, want)
			}
		})
	}
}
