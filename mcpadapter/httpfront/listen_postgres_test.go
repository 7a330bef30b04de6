package httpfront

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// Two replicas on one PostgreSQL database: a listener on replica B sees
// every state change that replica A commits, and every change B commits
// itself; the delays are logged.
func TestListenAcrossPostgresReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	url := pgtest.URL(t)
	open := func() *taskgraph.Store {
		d, err := tgpostgres.Open(ctx, url, tgpostgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := taskgraph.OpenDriver(ctx, d, taskgraph.Options{Sweep: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := open(), open()
	srv, err := mcpadapter.New(mcpadapter.Config{Store: b, Version: "test", Surface: manifest.NewSurface(manifest.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.AbortCalls(); h.CloseSessions() })
	f := &httpFixture{t: t, ctx: ctx, store: b, srv: srv, h: h, ts: ts, url: ts.URL + MCPPath}

	ids := listenChain(t, ctx, a, "replicas", 25)
	s := f.listen(t, "pg-1", "", ids)
	s.ack(t, "pg-1")
	logDelays(t, "postgres, written on another replica", driveAndWatch(t, ctx, a, s, "pg-1", ids))

	ids = listenChain(t, ctx, b, "one-replica", 25)
	s = f.listen(t, "pg-2", "", ids)
	s.ack(t, "pg-2")
	logDelays(t, "postgres, written on the listener's replica", driveAndWatch(t, ctx, b, s, "pg-2", ids))
}
