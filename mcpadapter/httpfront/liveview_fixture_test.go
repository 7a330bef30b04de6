package httpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// uiFixture is a server with the live view over real HTTP, with helpers to
// shape workflows through the store.
type uiFixture struct {
	*httpFixture
	clock *lease.ManualClock
	base  string // http://127.0.0.1:port
}

func newUIFixture(t testing.TB, opts Options, cfgOpts ...fixtureOpt) *uiFixture {
	t.Helper()
	f := newHTTPFixture(t, opts, cfgOpts...)
	return &uiFixture{httpFixture: f, clock: f.store.Clock().(*lease.ManualClock), base: f.ts.URL}
}

// twelveNodes is the demo workflow of the tests and the screenshot: a build
// pipeline of 12 nodes in 5 layers.
var twelveNodes = []taskgraph.NodeSpec{
	{NodeID: "fetch-sources"},
	{NodeID: "fetch-deps"},
	{NodeID: "lint", DependsOn: []string{"fetch-sources"}},
	{NodeID: "compile", DependsOn: []string{"fetch-sources", "fetch-deps"}},
	{NodeID: "gen-docs", DependsOn: []string{"fetch-sources"}},
	{NodeID: "unit-tests", DependsOn: []string{"compile"}},
	{NodeID: "integration", DependsOn: []string{"compile"}},
	{NodeID: "package", DependsOn: []string{"compile", "lint"}},
	{NodeID: "publish-docs", DependsOn: []string{"gen-docs"}},
	{NodeID: "sign", DependsOn: []string{"package"}},
	{NodeID: "release", DependsOn: []string{"sign", "unit-tests", "integration"}},
	{NodeID: "announce", DependsOn: []string{"release", "publish-docs"}},
}

// claim claims node of workflow wf for owner with a lease of d.
func (f *uiFixture) claim(t testing.TB, wf, node, owner string, d time.Duration) taskgraph.Claimed {
	t.Helper()
	task, err := f.store.TaskByNode(f.ctx, wf, node)
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: owner, TaskID: task.TaskID, Lease: d})
	if err != nil || !ok {
		t.Fatalf("claim %s: ok=%v err=%v", node, ok, err)
	}
	return c
}

func holder(c taskgraph.Claimed) lease.Holder {
	return lease.Holder{TaskID: c.Task.TaskID, Owner: c.Lease.Owner, Generation: c.Lease.Generation, Token: c.Lease.Token}
}

func (f *uiFixture) complete(t testing.TB, wf, node string) {
	t.Helper()
	c := f.claim(t, wf, node, "worker-"+node, 10*time.Minute)
	if _, err := f.store.Complete(f.ctx, holder(c), json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
}

// shapeTwelve creates the 12-node workflow and brings it to a mix of
// states: 3 completed, 2 claimed, 1 failed with its dependent cancelled,
// pending and blocked ones. It returns the claims.
func (f *uiFixture) shapeTwelve(t testing.TB, wf string) (compile, lint taskgraph.Claimed) {
	t.Helper()
	if _, err := f.store.CreateWorkflow(f.ctx, wf, twelveNodes); err != nil {
		t.Fatal(err)
	}
	f.complete(t, wf, "fetch-sources")
	f.complete(t, wf, "fetch-deps")
	f.complete(t, wf, "gen-docs")
	compile = f.claim(t, wf, "compile", "builder-1", 10*time.Minute)
	lint = f.claim(t, wf, "lint", "linter-7", 10*time.Minute)
	c := f.claim(t, wf, "publish-docs", "docs-bot", 10*time.Minute)
	if _, err := f.store.Fail(f.ctx, holder(c), "upload refused: 403 from the docs host", false); err != nil {
		t.Fatal(err)
	}
	return compile, lint
}

// states returns node id → state as the store has them.
func (f *uiFixture) states(t testing.TB, wf string) map[string]string {
	t.Helper()
	v, err := f.store.Workflow(f.ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, task := range v.Tasks {
		out[task.NodeID] = string(task.State)
	}
	return out
}

// get fetches path with the given headers and returns status, headers, body.
func (f *uiFixture) get(t testing.TB, method, path string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	status, header, b := send(t, context.Background(), method, f.base+path, "", hdr)
	return status, header, string(b)
}

// loginLink mints a login code with token and returns the link's URL.
func (f *uiFixture) loginLink(t testing.TB, token string) string {
	t.Helper()
	status, _, body := f.get(t, http.MethodPost, liveview.UILoginCodesPath, map[string]string{"Authorization": "Bearer " + token})
	if status != http.StatusOK {
		t.Fatalf("mint login code: %d %s", status, body)
	}
	var lc liveview.UILoginCode
	if err := json.Unmarshal([]byte(body), &lc); err != nil || lc.Code == "" || !strings.HasPrefix(lc.Path, liveview.UILoginPath+"?code=") {
		t.Fatalf("login code answer %s: %v", body, err)
	}
	return f.base + lc.Path
}

// bigWorkflow returns n nodes in layers of width, each depending on two
// nodes of the layer before.
func bigWorkflow(n, width int) []taskgraph.NodeSpec {
	nodes := make([]taskgraph.NodeSpec, n)
	for i := range nodes {
		nodes[i].NodeID = fmt.Sprintf("n%04d", i)
		if i >= width {
			prev := i - width
			nodes[i].DependsOn = []string{fmt.Sprintf("n%04d", prev)}
			if j := prev - prev%width + (prev+1)%width; j != prev {
				nodes[i].DependsOn = append(nodes[i].DependsOn, fmt.Sprintf("n%04d", j))
			}
		}
	}
	return nodes
}
