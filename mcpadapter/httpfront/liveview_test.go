package httpfront

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

func TestUIWorkflowJSONShowsStatesHoldersAndNoTokens(t *testing.T) {
	f := newUIFixture(t, Options{})
	compile, _ := f.shapeTwelve(t, "build-42")
	status, hdr, body := f.get(t, http.MethodGet, "/ui/api/workflows/build-42", nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Fatalf("CSP %q is not strict", csp)
	}
	if strings.Contains(body, compile.Lease.Token) || strings.Contains(body, "token") {
		t.Fatalf("the view's JSON carries a claim token or its digest: %s", body)
	}
	var wf liveview.Workflow
	if err := json.Unmarshal([]byte(body), &wf); err != nil {
		t.Fatal(err)
	}
	want := f.states(t, "build-42")
	byNode := map[string]liveview.Node{}
	for _, n := range wf.Nodes {
		byNode[n.NodeID] = n
		if n.State != want[n.NodeID] {
			t.Errorf("%s: state %s, store has %s", n.NodeID, n.State, want[n.NodeID])
		}
	}
	if len(wf.Nodes) != 12 || len(wf.Edges) != 15 {
		t.Fatalf("got %d nodes, %d edges; want 12 and 15", len(wf.Nodes), len(wf.Edges))
	}
	c := byNode["compile"]
	if c.Owner != "builder-1" || c.Generation != 1 || c.LeaseExpiresAtMS != f.clock.Now().Add(10*time.Minute).UnixMilli() || c.Stuck {
		t.Fatalf("compile as shown: %+v", c)
	}
	if p := byNode["publish-docs"]; p.State != "failed" || !strings.Contains(p.Error, "403") {
		t.Fatalf("publish-docs as shown: %+v", p)
	}
	if a := byNode["announce"]; a.State != "cancelled" || !strings.Contains(a.StatusMessage, "publish-docs") {
		t.Fatalf("announce as shown: %+v", a)
	}
	// Every edge points rightwards: a dependency is in an earlier layer.
	for _, e := range wf.Edges {
		if d, n := wf.Nodes[e[0]], wf.Nodes[e[1]]; d.Layer >= n.Layer || d.X >= n.X {
			t.Errorf("edge %s -> %s does not go rightwards", d.NodeID, n.NodeID)
		}
	}
	// An unchanged state polls as 304; a change does not.
	etag := hdr.Get("ETag")
	f.clock.Advance(time.Second)
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/workflows/build-42", map[string]string{"If-None-Match": etag}); status != http.StatusNotModified {
		t.Fatalf("unchanged poll: status %d, want 304", status)
	}
	if _, err := f.store.Complete(f.ctx, holder(compile), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/workflows/build-42", map[string]string{"If-None-Match": etag}); status != http.StatusOK {
		t.Fatalf("poll after a completion: status %d, want 200", status)
	}
}

func TestUIStuckClaimAndTaskHistory(t *testing.T) {
	f := newUIFixture(t, Options{})
	f.shapeTwelve(t, "wf")
	f.clock.Advance(11 * time.Minute) // past the 10-minute leases, no heartbeat
	_, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/wf", nil)
	var wf liveview.Workflow
	if err := json.Unmarshal([]byte(body), &wf); err != nil {
		t.Fatal(err)
	}
	stuck := map[string]bool{}
	for _, n := range wf.Nodes {
		if n.Stuck {
			stuck[n.NodeID] = true
		}
	}
	if len(stuck) != 2 || !stuck["compile"] || !stuck["lint"] {
		t.Fatalf("stuck nodes %v, want compile and lint", stuck)
	}
	_, _, body = f.get(t, http.MethodGet, "/ui/api/workflows", nil)
	var list liveview.WorkflowList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Workflows) != 1 || list.Workflows[0].Stuck != 2 || list.Workflows[0].Total != 12 || list.Workflows[0].Counts["completed"] != 3 {
		t.Fatalf("list: %s", body)
	}
	// The detail of a stuck task shows it stuck, and reading it expires
	// nothing: the view never writes.
	var compileID string
	for _, n := range wf.Nodes {
		if n.NodeID == "compile" {
			compileID = n.TaskID
		}
	}
	_, _, body = f.get(t, http.MethodGet, "/ui/api/tasks/"+compileID, nil)
	var cd liveview.Task
	if err := json.Unmarshal([]byte(body), &cd); err != nil || cd.Task.State != "claimed" || !cd.Task.Stuck || cd.LastHeartbeat == 0 {
		t.Fatalf("stuck task detail: %s", body)
	}
	if st := f.states(t, "wf")["compile"]; st != "claimed" {
		t.Fatalf("after the view read it, compile is %s in the store", st)
	}
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV", nil); status != http.StatusNotFound {
		t.Fatalf("unknown task: status %d", status)
	}
	fail, err := f.store.TaskByNode(f.ctx, "wf", "publish-docs")
	if err != nil {
		t.Fatal(err)
	}
	_, _, body = f.get(t, http.MethodGet, "/ui/api/tasks/"+fail.TaskID, nil)
	var d liveview.Task
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range d.Events {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, ","); got != "create,ready,claim,fail" || d.Events[2].Owner != "docs-bot" || d.Task.Error == "" {
		t.Fatalf("history %s of %s", got, body)
	}
}

func TestUIIsReadOnlyAndKeepsHostChecks(t *testing.T) {
	f := newUIFixture(t, Options{})
	f.shapeTwelve(t, "wf")
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		for _, p := range []string{"/ui/", "/ui/api/workflows", "/ui/api/workflows/wf", "/ui/workflows/wf"} {
			if status, _, _ := f.get(t, m, p, nil); status != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: status %d, want 405", m, p, status)
			}
		}
	}
	if status, _, _ := f.get(t, http.MethodGet, "/ui/", map[string]string{"Origin": "http://evil.example"}); status != http.StatusForbidden {
		t.Fatalf("foreign Origin: status %d, want 403", status)
	}
	req, _ := http.NewRequest(http.MethodGet, f.base+"/ui/api/workflows", nil)
	req.Host = "rebind.example:7330"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Host: status %d, want 403", resp.StatusCode)
	}
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/workflows/nope", nil); status != http.StatusNotFound {
		t.Fatalf("missing workflow: status %d", status)
	}
}

func TestUIDoesNotTakeMCPSlots(t *testing.T) {
	f := newUIFixture(t, Options{MaxConcurrent: 1, AdmissionWait: -1})
	f.shapeTwelve(t, "wf")
	takeSlots(t, f.h, 1) // the only MCP slot is taken
	defer f.h.slots.release()
	if status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/wf", nil); status != http.StatusOK {
		t.Fatalf("view read with every MCP slot taken: %d %s", status, body)
	}
}

func TestUIDisabled(t *testing.T) {
	f := newUIFixture(t, Options{DisableUI: true})
	if status, _, _ := f.get(t, http.MethodGet, "/ui/", nil); status != http.StatusNotFound {
		t.Fatalf("status %d, want 404", status)
	}
}

func TestUILoginLinkAndCookie(t *testing.T) {
	const token = "ui-test-token-0123456789"
	f := newUIFixture(t, Options{AuthToken: token})
	f.shapeTwelve(t, "wf")
	if status, _, _ := f.get(t, http.MethodGet, "/ui/", nil); status != http.StatusUnauthorized {
		t.Fatalf("no login: status %d, want 401", status)
	}
	if status, _, _ := f.get(t, http.MethodPost, liveview.UILoginCodesPath, nil); status != http.StatusUnauthorized {
		t.Fatalf("minting without a token: status %d, want 401", status)
	}
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/workflows", map[string]string{"Authorization": "Bearer " + token}); status != http.StatusOK {
		t.Fatalf("bearer token: status %d", status)
	}
	link := f.loginLink(t, token)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != liveview.UIPath {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == liveview.UICookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/ui" || cookie.Value == "" {
		t.Fatalf("cookie %+v", cookie)
	}
	if raw := resp.Header.Get("Set-Cookie"); strings.Contains(raw, token) {
		t.Fatal("the cookie carries the token")
	}
	cookieHdr := map[string]string{"Cookie": liveview.UICookieName + "=" + cookie.Value}
	if status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows", cookieHdr); status != http.StatusOK || !strings.Contains(body, `"wf"`) {
		t.Fatalf("with the cookie: %d %s", status, body)
	}
	// A code works once; a cookie cannot mint codes; a session ends.
	resp, err = noRedirect.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("second use of a code: status %d, want 401", resp.StatusCode)
	}
	if status, _, _ := f.get(t, http.MethodPost, liveview.UILoginCodesPath, cookieHdr); status != http.StatusUnauthorized {
		t.Fatalf("minting with a cookie: status %d, want 401", status)
	}
	stale := f.loginLink(t, token)
	f.clock.Advance(liveview.UILoginCodeTTL)
	if resp, err = noRedirect.Get(stale); err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("expired code: %v %v", err, resp.StatusCode)
	}
	f.clock.Advance(liveview.UISessionTTL)
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/workflows", cookieHdr); status != http.StatusUnauthorized {
		t.Fatalf("expired session: status %d, want 401", status)
	}
	// Logging out ends a session at once.
	resp, err = noRedirect.Get(f.loginLink(t, token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	fresh := map[string]string{"Cookie": liveview.UICookieName + "=" + resp.Cookies()[0].Value}
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/workflows", fresh); status != http.StatusOK {
		t.Fatalf("fresh session: status %d", status)
	}
	if status, _, _ := f.get(t, http.MethodGet, liveview.UILogoutPath, fresh); status != http.StatusMethodNotAllowed {
		t.Fatalf("GET logout: status %d, want 405", status)
	}
	status, hdr, _ := f.get(t, http.MethodPost, liveview.UILogoutPath, fresh)
	if status != http.StatusNoContent || !strings.Contains(hdr.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %q", status, hdr.Get("Set-Cookie"))
	}
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/workflows", fresh); status != http.StatusUnauthorized {
		t.Fatalf("after logout: status %d, want 401", status)
	}
}

func TestUILoginNextStaysUnderUI(t *testing.T) {
	// (Which next paths are safe: liveview.TestLoginNextStaysUnderUI.)
	const token = "ui-test-token-0123456789"
	f := newUIFixture(t, Options{AuthToken: token})
	status, _, _ := f.get(t, http.MethodPost, liveview.UILoginCodesPath+"?next="+url.QueryEscape("https://evil.example/"), map[string]string{"Authorization": "Bearer " + token})
	if status != http.StatusBadRequest {
		t.Fatalf("foreign next: status %d, want 400", status)
	}
}

func TestUIPrincipalSeesOnlyItsWorkflows(t *testing.T) {
	file := `{"principals":[
		{"name":"ops","token_sha256":"` + principal.TokenDigest("ops-token-0123456789") + `","roles":["observe"],"workflows":["team-a-*"]},
		{"name":"worker","token_sha256":"` + principal.TokenDigest("worker-token-0123456789") + `","roles":["work"]}]}`
	ps, err := principal.ParseAuthFile([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	f := newUIFixture(t, Options{Principals: principal.NewAuthenticator(ps)})
	for _, wf := range []string{"team-a-1", "team-b-1"} {
		if _, err := f.store.CreateWorkflow(f.ctx, wf, []taskgraph.NodeSpec{{NodeID: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	ops := map[string]string{"Authorization": "Bearer ops-token-0123456789"}
	_, _, body := f.get(t, http.MethodGet, "/ui/api/workflows", ops)
	if !strings.Contains(body, "team-a-1") || strings.Contains(body, "team-b-1") {
		t.Fatalf("ops lists: %s", body)
	}
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/workflows/team-b-1", ops); status != http.StatusNotFound {
		t.Fatalf("a workflow outside the scope: status %d, want 404 as a missing one", status)
	}
	other, _ := f.store.TaskByNode(f.ctx, "team-b-1", "x")
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/tasks/"+other.TaskID, ops); status != http.StatusNotFound {
		t.Fatalf("a task outside the scope: status %d, want 404", status)
	}
	worker := map[string]string{"Authorization": "Bearer worker-token-0123456789"}
	if status, _, _ := f.get(t, http.MethodGet, "/ui/api/workflows", worker); status != http.StatusForbidden {
		t.Fatalf("a principal without observe: status %d, want 403", status)
	}
	if status, _, _ := f.get(t, http.MethodPost, liveview.UILoginCodesPath, worker); status != http.StatusForbidden {
		t.Fatalf("a principal without observe mints a code: status %d, want 403", status)
	}
	// A session follows the live table: removing the principal ends it.
	link := f.loginLink(t, "ops-token-0123456789")
	jar := &cookieJar{}
	c := &http.Client{Jar: jar}
	resp, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login as ops: %d", resp.StatusCode)
	}
	narrowed, err := principal.ParseAuthFile([]byte(`{"principals":[{"name":"worker","token_sha256":"` + principal.TokenDigest("worker-token-0123456789") + `","roles":["work"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f.h.auth.Replace(narrowed)
	resp, err = c.Get(f.base + "/ui/api/workflows")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after the principal was removed: status %d, want 401", resp.StatusCode)
	}
}

// cookieJar is a minimal jar keeping the cookies a server set (the
// standard jar needs a public-suffix list for nothing here).
type cookieJar struct{ cs []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.cs = append(j.cs, cs...) }
func (j *cookieJar) Cookies(u *url.URL) []*http.Cookie {
	if strings.HasPrefix(u.Path, "/ui") {
		return j.cs
	}
	return nil
}

// The view shows the graph data a worker is routed by: a task's required
// capabilities, and when a pending task that is not yet due becomes
// claimable (and nothing once it is due).
func TestUIShowsRequiresAndWaitingUntil(t *testing.T) {
	f := newUIFixture(t, Options{})
	due := f.clock.Now().Add(90 * time.Second)
	if _, err := f.store.CreateWorkflow(f.ctx, "routed", []taskgraph.NodeSpec{
		{NodeID: "train", Requires: []string{"gpu", "cuda"}},
		{NodeID: "later", NotBefore: due},
	}); err != nil {
		t.Fatal(err)
	}
	nodes := func() map[string]liveview.Node {
		status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/routed", nil)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		var wf liveview.Workflow
		if err := json.Unmarshal([]byte(body), &wf); err != nil {
			t.Fatal(err)
		}
		out := map[string]liveview.Node{}
		for _, n := range wf.Nodes {
			out[n.NodeID] = n
		}
		return out
	}
	got := nodes()
	if tr := got["train"]; strings.Join(tr.Requires, ",") != "cuda,gpu" || tr.DueAtMS != 0 {
		t.Fatalf("train as shown: %+v, want requires cuda,gpu and no due time", tr)
	}
	if l := got["later"]; l.State != "pending" || l.DueAtMS != due.UnixMilli() || !strings.Contains(l.StatusMessage, "waiting until") {
		t.Fatalf("later as shown: %+v, want pending, due at %d, waiting until", l, due.UnixMilli())
	}
	f.clock.Advance(2 * time.Minute)
	if l := nodes()["later"]; l.DueAtMS != 0 {
		t.Fatalf("later once due: %+v, want no due time", l)
	}
}

// The list shows the most recently changed workflows first, one page at a
// time, filtered by a part of the id; bad parameters are refused with 400
// naming the parameter and the rule.
func TestUIListNewestFirstFilterAndPages(t *testing.T) {
	f := newUIFixture(t, Options{UIPageSize: 2})
	for _, wf := range []string{"build-1", "deploy-1", "build-2", "build-3"} {
		if _, err := f.store.CreateWorkflow(f.ctx, wf, []taskgraph.NodeSpec{{NodeID: "x"}}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
	}
	f.claim(t, "build-1", "x", "w", time.Minute) // build-1 changed last
	list := func(query string) liveview.WorkflowList {
		t.Helper()
		status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows"+query, nil)
		var l liveview.WorkflowList
		if status != http.StatusOK || json.Unmarshal([]byte(body), &l) != nil {
			t.Fatalf("%s: status %d %s", query, status, body)
		}
		return l
	}
	ids := func(l liveview.WorkflowList) []string {
		var out []string
		for _, w := range l.Workflows {
			out = append(out, w.WorkflowID)
		}
		return out
	}
	for query, want := range map[string]struct {
		ids       []string
		matched   int
		truncated bool
	}{
		"":                    {[]string{"build-1", "build-3"}, 4, true},
		"?page=1":             {[]string{"build-2", "deploy-1"}, 4, false},
		"?page=2":             {nil, 4, false},
		"?q=build":            {[]string{"build-1", "build-3"}, 3, true},
		"?q=build&page=1":     {[]string{"build-2"}, 3, false},
		"?q=deploy":           {[]string{"deploy-1"}, 1, false},
		"?q=nothing-like-it":  {nil, 0, false},
		"?q=" + "%E2%80%9C-1": {nil, 0, false}, // a quotation mark: valid UTF-8, matches nothing
	} {
		l := list(query)
		if !slices.Equal(ids(l), want.ids) || l.Matched != want.matched || l.Truncated != want.truncated || l.PageSize != 2 {
			t.Errorf("%s: %v matched %d truncated %v page size %d, want %v matched %d truncated %v",
				query, ids(l), l.Matched, l.Truncated, l.PageSize, want.ids, want.matched, want.truncated)
		}
	}
	for query, want := range map[string]string{
		"?page=-1":                       "page: must be a whole number from 0 to 100000",
		"?page=x":                        "page: must be a whole number",
		"?page=100001":                   "page: must be a whole number from 0 to 100000",
		"?q=%FF":                         "q: must be at most 256 bytes of UTF-8",
		"?q=" + strings.Repeat("a", 257): "q: must be at most 256 bytes of UTF-8 (got 257 bytes)",
	} {
		status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows"+query, nil)
		if status != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%.40s: status %d %s, want 400 saying %q", query, status, body, want)
		}
	}
}

// The view shows what workers reported: each node's progress and message
// (of the claim that sent them), its usage, and the workflow's usage; the
// task detail shows them too.
func TestUIShowsWorkerReports(t *testing.T) {
	f := newUIFixture(t, Options{})
	created, err := f.store.CreateWorkflow(f.ctx, "reported", []taskgraph.NodeSpec{{NodeID: "a"}, {NodeID: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := f.store.Claim(f.ctx, taskgraph.ClaimRequest{Owner: "w1", TaskID: created[0].Task.TaskID})
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	total := 10.0
	rep := taskgraph.Report{Progress: &taskgraph.Progress{Done: 3, Total: &total}, StatusMessage: "parsing files",
		Usage: &taskgraph.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.0125}}
	if _, err := f.store.Heartbeat(taskgraph.WithReport(f.ctx, rep), holder(c), time.Minute); err != nil {
		t.Fatal(err)
	}
	status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/reported", nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var wf liveview.Workflow
	if err := json.Unmarshal([]byte(body), &wf); err != nil {
		t.Fatal(err)
	}
	want := liveview.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.0125}
	if wf.Usage == nil || *wf.Usage != want {
		t.Fatalf("workflow usage %+v, want %+v", wf.Usage, want)
	}
	a, b := wf.Nodes[0], wf.Nodes[1]
	if a.ProgressDone == nil || *a.ProgressDone != 3 || a.ProgressTotal == nil || *a.ProgressTotal != 10 || a.ReportMessage != "parsing files" ||
		a.ReportGeneration != 1 || a.Usage == nil || *a.Usage != want {
		t.Fatalf("a as shown: %+v", a)
	}
	if b.ProgressDone != nil || b.ReportMessage != "" || b.Usage != nil {
		t.Fatalf("b reported nothing, yet shows %+v", b)
	}
	status, _, body = f.get(t, http.MethodGet, "/ui/api/tasks/"+created[0].Task.TaskID, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var task liveview.Task
	if err := json.Unmarshal([]byte(body), &task); err != nil {
		t.Fatal(err)
	}
	if task.Task.ReportMessage != "parsing files" || task.Task.Usage == nil || *task.Task.ProgressDone != 3 {
		t.Fatalf("the task detail shows %+v", task.Task)
	}
}
