package httpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestUIOnPostgres reads the live view's JSON from a PostgreSQL store: the
// view uses only the Store API, so it shows the same on both drivers.
func TestUIOnPostgres(t *testing.T) {
	ctx, st, srv := newPostgresServer(t)
	h, err := New(srv, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); h.AbortCalls(); h.CloseSessions() })
	f := &uiFixture{httpFixture: &httpFixture{t: t, ctx: ctx, store: st, srv: srv, h: h, ts: ts}, base: ts.URL}
	compile, _ := f.shapeTwelve(t, "pg-wf")
	status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/pg-wf", nil)
	var wf liveview.Workflow
	if err := json.Unmarshal([]byte(body), &wf); status != http.StatusOK || err != nil {
		t.Fatalf("%d %s: %v", status, body, err)
	}
	want := f.states(t, "pg-wf")
	for _, n := range wf.Nodes {
		if n.State != want[n.NodeID] {
			t.Errorf("%s shown %s, store has %s", n.NodeID, n.State, want[n.NodeID])
		}
		if n.NodeID == "compile" && (n.Owner != "builder-1" || n.LeaseExpiresAtMS == 0 || n.Stuck) {
			t.Errorf("compile shown %+v", n)
		}
	}
	if len(wf.Nodes) != 12 || len(wf.Edges) != 15 {
		t.Fatalf("%d nodes, %d edges", len(wf.Nodes), len(wf.Edges))
	}
	if _, _, body = f.get(t, http.MethodGet, "/ui/api/tasks/"+compile.Task.TaskID, nil); !json.Valid([]byte(body)) {
		t.Fatalf("task detail: %s", body)
	}
	var d2 liveview.Task
	_ = json.Unmarshal([]byte(body), &d2)
	if len(d2.Events) < 3 || d2.Events[len(d2.Events)-1].Kind != taskgraph.EventClaim || d2.LastHeartbeat == 0 {
		t.Fatalf("history on PostgreSQL: %s", body)
	}
	_, _, body = f.get(t, http.MethodGet, "/ui/api/workflows", nil)
	var list liveview.WorkflowList
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Workflows) != 1 || list.Workflows[0].Total != 12 {
		t.Fatalf("list: %s", body)
	}
}

// newPostgresServer is a server over a store on a fresh PostgreSQL
// database (pgtest.URL), both closed when the test ends.
func newPostgresServer(t *testing.T) (context.Context, *taskgraph.Store, *mcpadapter.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d, err := tgpostgres.Open(ctx, pgtest.URL(t), tgpostgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := taskgraph.OpenDriver(ctx, d, taskgraph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := mcpadapter.New(mcpadapter.Config{Store: st, Version: "test", Surface: manifest.NewSurface(manifest.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, st, srv
}
