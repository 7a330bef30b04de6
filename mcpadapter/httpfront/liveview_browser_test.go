package httpfront

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// The browser tests drive Debian's headless Chromium (apt-get install
// chromium; .ci/run installs it when missing). GRAPH_ENGINEERING_TEST_CHROMIUM
// names another binary, or "skip" to skip them; without a browser they
// fail. Screenshots go to $GRAPH_ENGINEERING_TEST_ARTIFACTS (default: the
// folder graph-engineering-artifacts in the system's temporary folder).

func chromiumPath(t testing.TB) string {
	t.Helper()
	v := os.Getenv("GRAPH_ENGINEERING_TEST_CHROMIUM")
	if v == "skip" {
		t.Skip("GRAPH_ENGINEERING_TEST_CHROMIUM=skip")
	}
	if v != "" {
		return v
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium for the browser tests: apt-get install chromium, or set GRAPH_ENGINEERING_TEST_CHROMIUM to its path (or to skip)")
	return ""
}

// browser starts a headless Chromium for the test and returns a tab.
func browser(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1760, 820),
		chromedp.UserDataDir(t.TempDir()),
	)
	// Only the test binary's deadline bounds a browser test (a hang guard,
	// not a speed assertion): a loaded machine makes it slower, never red.
	actx, acancel := chromedp.NewExecAllocator(testwait.Context(t), opts...)
	t.Cleanup(acancel)
	tab, tcancel := chromedp.NewContext(actx)
	t.Cleanup(tcancel)
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return tab
}

func artifactsDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("GRAPH_ENGINEERING_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "graph-engineering-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageStates returns node id → data-state of the drawn DAG.
func pageStates(t testing.TB, tab context.Context) map[string]string {
	t.Helper()
	return eval[map[string]string](t, tab, `Object.fromEntries(Array.from(document.querySelectorAll("#dag g.node")).map(g => [g.dataset.nodeId, g.dataset.state]))`)
}

// eval evaluates a JavaScript expression in the tab.
func eval[T any](t testing.TB, tab context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// text returns the text of the first element matching the CSS selector.
func text(t testing.TB, tab context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return v
}

func navigate(t testing.TB, tab context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(tab, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate to %s: %v", url, err)
	}
}

func waitJS(t testing.TB, tab context.Context, cond string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		_, err := chromedp.Run(tab, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond)))
		if err == nil {
			return
		}
		// A poll started while the page was still being replaced loses its
		// JavaScript context; poll again in the new one.
		if attempt < 5 && (strings.Contains(err.Error(), "Cannot find context") || strings.Contains(err.Error(), "navigated or closed")) {
			continue
		}
		t.Fatalf("waiting for %s: %v", cond, err)
	}
}

func TestUIBrowserDAGStatesLiveUpdateAndScreenshot(t *testing.T) {
	f := newUIFixture(t, Options{})
	compile, _ := f.shapeTwelve(t, "build-42")
	tab := browser(t)
	navigate(t, tab, f.base+"/ui/workflows/build-42")
	waitJS(t, tab, `document.querySelectorAll("#dag g.node").length === 12`)
	want := f.states(t, "build-42")
	got := pageStates(t, tab)
	for node, st := range want {
		if got[node] != st {
			t.Errorf("%s drawn as %q, store has %q", node, got[node], st)
		}
	}
	edges := eval[int](t, tab, `document.querySelectorAll("#dag path.edge").length`)
	claimedInfo := text(t, tab, `g.node[data-node-id="compile"] text.info`)
	failedInfo := text(t, tab, `g.node[data-node-id="publish-docs"] text.info`)
	if edges != 15 || !strings.Contains(claimedInfo, "builder-1 g1") || !strings.Contains(claimedInfo, "lease") || !strings.Contains(failedInfo, "upload refused") {
		t.Fatalf("edges %d; compile shows %q; publish-docs shows %q", edges, claimedInfo, failedInfo)
	}

	// Presentation (issue 29 item 8): with nothing selected the detail
	// panel is narrow; in a 1400 px window the 12 nodes fit the pane, with a
	// task selected too; the history shows times, not epoch milliseconds.
	if w := eval[float64](t, tab, `document.getElementById("detail").getBoundingClientRect().width`); w > 200 {
		t.Errorf("the detail panel is %.0f px wide with nothing selected", w)
	}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1400, 820)); err != nil {
		t.Fatal(err)
	}
	fits := `(function () { var g = document.getElementById("graph"), d = document.getElementById("dag");
		return d.getBoundingClientRect().width <= g.clientWidth + 1 && g.scrollWidth <= g.clientWidth + 1; })()`
	waitJS(t, tab, `document.getElementById("dag") !== null`)
	// Redrawn at the new width: select a node, which redraws.
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`g.node[data-node-id="compile"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, `document.querySelectorAll("#history tr[data-kind=claim]").length === 1`)
	if !eval[bool](t, tab, fits) {
		t.Errorf("the 12-node workflow does not fit a 1400 px window: graph pane %v px, drawing %v px", eval[float64](t, tab, `document.getElementById("graph").clientWidth`),
			eval[float64](t, tab, `document.getElementById("dag").getBoundingClientRect().width`))
	}
	if h := text(t, tab, `#history`); regexp.MustCompile(`\b1[0-9]{12}\b`).MatchString(h) || !strings.Contains(h, "lease_expires_at") {
		t.Errorf("the history shows epoch milliseconds or no lease expiry:\n%s", h)
	}
	if err := chromedp.Do(tab, chromedp.EmulateViewport(1760, 820)); err != nil {
		t.Fatal(err)
	}

	// A screenshot of the 12-node workflow, as a test artifact.
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(artifactsDir(t), "ui-workflow-12-nodes.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the 12-node workflow: %s", shot)

	// A completion on the server updates the page without a reload.
	eval[bool](t, tab, `window.__sameDocument = true`)
	if _, err := f.store.Complete(f.ctx, holder(compile), []byte(`{"binary":"out/app"}`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, `document.querySelector('g.node[data-node-id="compile"]').dataset.state === "completed"`)
	waitJS(t, tab, `document.querySelector('g.node[data-node-id="unit-tests"]').dataset.state === "pending"`)
	if !eval[bool](t, tab, `window.__sameDocument === true`) {
		t.Fatal("the page was reloaded")
	}
	// The selected task's detail follows too.
	waitJS(t, tab, `document.querySelectorAll("#history tr[data-kind=complete]").length === 1`)
}

func TestUIBrowserStuckClaimIsMarked(t *testing.T) {
	f := newUIFixture(t, Options{})
	if _, err := f.store.CreateWorkflow(f.ctx, "wf", []taskgraph.NodeSpec{{NodeID: "a"}, {NodeID: "b"}, {NodeID: "c", DependsOn: []string{"a", "b"}}}); err != nil {
		t.Fatal(err)
	}
	f.claim(t, "wf", "a", "silent-worker", 10*time.Minute)
	f.claim(t, "wf", "b", "busy-worker", 14*time.Minute)
	tab := browser(t)
	navigate(t, tab, f.base+"/ui/workflows/wf")
	waitJS(t, tab, `document.querySelectorAll("#dag g.node").length === 3`)
	waitJS(t, tab, `document.querySelectorAll("#dag g.node.stuck").length === 0`)
	// Eleven minutes pass on the server without a heartbeat from a.
	f.clock.Advance(11 * time.Minute)
	waitJS(t, tab, `document.querySelector('g.node[data-node-id="a"]').dataset.stuck === "true"`)
	stuck := eval[[]string](t, tab, `Array.from(document.querySelectorAll("#dag g.node.stuck")).map(g => g.dataset.nodeId)`)
	info := text(t, tab, `g.node[data-node-id="a"] text.info`)
	if len(stuck) != 1 || stuck[0] != "a" || !strings.Contains(info, "stuck") || !strings.Contains(info, "silent-worker") {
		t.Fatalf("stuck nodes %v, a shows %q", stuck, info)
	}
	// The list page counts it.
	navigate(t, tab, f.base+"/ui/")
	waitJS(t, tab, `document.querySelector('tr[data-workflow-id="wf"] td.err') !== null && document.querySelector('tr[data-workflow-id="wf"] td.err').textContent === "1"`)
}

// The list page pages through the workflows, newest first, and filters
// them as one types, keeping both in the address.
func TestUIBrowserListFilterAndPages(t *testing.T) {
	f := newUIFixture(t, Options{UIPageSize: 2})
	for _, wf := range []string{"build-1", "deploy-1", "build-2"} {
		if _, err := f.store.CreateWorkflow(f.ctx, wf, []taskgraph.NodeSpec{{NodeID: "x"}}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
	}
	rows := `Array.from(document.querySelectorAll("#workflows tbody tr")).map(tr => tr.dataset.workflowId).join(" ")`
	tab := browser(t)
	navigate(t, tab, f.base+"/ui/")
	waitJS(t, tab, rows+` === "build-2 deploy-1" && !document.getElementById("next").hidden && document.getElementById("prev").hidden`)
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#next"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, rows+` === "build-1" && document.getElementById("next").hidden && !document.getElementById("prev").hidden && location.search === "?page=1"`)
	if info := text(t, tab, "#pageinfo"); !strings.Contains(info, "3–3 of 3") {
		t.Fatalf("page info %q, want 3–3 of 3", info)
	}
	if err := chromedp.Do(tab, chromedp.SendKeys(chromedp.CSS("#filter"), "build")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, rows+` === "build-2 build-1" && location.search === "?q=build" && document.getElementById("next").hidden`)
	// A reload keeps the filter.
	navigate(t, tab, f.base+"/ui/?q=deploy")
	waitJS(t, tab, rows+` === "deploy-1" && document.getElementById("filter").value === "deploy"`)
}

func TestUIBrowserLoginLink(t *testing.T) {
	const token = "ui-browser-token-0123456789"
	f := newUIFixture(t, Options{AuthToken: token})
	f.shapeTwelve(t, "wf")
	tab := browser(t)
	navigate(t, tab, f.base+"/ui/")
	body := text(t, tab, "body")
	if !strings.Contains(body, "ui link") {
		t.Fatalf("without a login the page says %q", body)
	}
	navigate(t, tab, f.loginLink(t, token))
	waitJS(t, tab, `document.querySelector('tr[data-workflow-id="wf"]') !== null`)
	cookies, path := eval[string](t, tab, `document.cookie`), eval[string](t, tab, `location.pathname`)
	if cookies != "" || path != "/ui/" {
		t.Fatalf("script sees cookies %q (the session cookie must be HttpOnly); at %s", cookies, path)
	}
	// Log out: the page reloads without a session.
	waitJS(t, tab, `!document.getElementById("logout").hidden && document.getElementById("who").textContent === "as token"`)
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS("#logout"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, `document.body.textContent.includes("ui link")`)
}

// TestUIBrowserRender1000Nodes measures the time to render a 1,000-node
// workflow (20 layers of 50, two dependencies each); it reports, it does
// not assert a bound.
func TestUIBrowserRender1000Nodes(t *testing.T) {
	f := newUIFixture(t, Options{})
	nodes := bigWorkflow(1000, 50)
	for i := 0; i < len(nodes); i += 500 {
		if _, err := f.store.CreateWorkflow(f.ctx, "big", nodes[i:i+500]); err != nil {
			t.Fatal(err)
		}
	}
	apiStart := time.Now()
	status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/big", nil)
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	t.Logf("1,000-node workflow: JSON with layout %s, %d bytes", time.Since(apiStart).Round(time.Millisecond), len(body))
	tab := browser(t)
	navigate(t, tab, f.base+"/ui/")
	start := time.Now()
	navigate(t, tab, f.base+"/ui/workflows/big")
	waitJS(t, tab, `document.querySelectorAll("#dag g.node").length === 1000`)
	took := time.Since(start)
	drawMS := eval[string](t, tab, `document.body.dataset.renderMs`)
	t.Logf("1,000-node workflow: page load to 1,000 nodes drawn %s (SVG build %s ms in the page); headless Chromium, 2 shared cores", took.Round(time.Millisecond), drawMS)
	fmt.Fprintf(os.Stderr, "ui render 1000 nodes: %s (draw %s ms)\n", took.Round(time.Millisecond), drawMS)
}

// The workflow page is pushed (issue 26.3): it follows the workflow's event
// stream and fetches the workflow only when the stream says it changed.
// While nothing changes the browser sends no request at all; a write
// updates the page without a reload.
func TestUIBrowserPageIsPushedNotPolled(t *testing.T) {
	f := newUIFixture(t, Options{})
	compile, _ := f.shapeTwelve(t, "wf")
	tab := browser(t)
	var mu sync.Mutex
	fetches := 0 // requests for the workflow's JSON, as the browser sent them
	listen := chromedp.Listen(tab, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && strings.Contains(e.Request.URL, "/ui/api/workflows/wf") {
			mu.Lock()
			fetches++
			mu.Unlock()
		}
	})
	if listen != nil {
		t.Fatal(listen)
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return fetches }
	if _, err := chromedp.Call(tab, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	navigate(t, tab, f.base+"/ui/workflows/wf")
	waitJS(t, tab, `document.body.dataset.mode === "pushed" && document.querySelectorAll("#dag g.node").length === 12`)
	waitJS(t, tab, `Number(document.body.dataset.events || 0) >= 1`)
	// Let the first event's fetch (if any) land, then nothing may follow.
	f.waitScans(t, 2)
	n := count()
	rendered := eval[string](t, tab, `document.body.dataset.rendered`)
	f.waitScans(t, 3) // three more reads of the version: three seconds at least
	if got := count(); got != n {
		t.Fatalf("the page fetched its workflow %d times while nothing changed", got-n)
	}
	if r := eval[string](t, tab, `document.body.dataset.rendered`); r != rendered {
		t.Fatalf("the page redrew (%s → %s) while nothing changed", rendered, r)
	}
	if _, err := f.store.Complete(f.ctx, holder(compile), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, `document.querySelector('g.node[data-node-id="compile"]').dataset.state === "completed"`)
	if got := count(); got <= n {
		t.Fatalf("the page changed without fetching (%d fetches)", got-n)
	}
	if mode := eval[string](t, tab, `document.body.dataset.mode`); mode != "pushed" {
		t.Fatalf("the page is %q after the change, want pushed", mode)
	}
	// On shutdown the stream ends and the page falls back to polling.
	f.h.StopListens()
	waitJS(t, tab, `document.body.dataset.mode === "polling"`)
}

// Issue 27 item 3 in a real browser: a principal with the approve role,
// logged in through a login link, sees approve and reject on the gate
// awaiting approval, types a reason and approves it from the page; the
// gate completes, its dependent becomes ready, and the history names the
// principal. A submitter logged in the same way sees the gate but no
// button.
func TestUIBrowserApproverDecidesGate(t *testing.T) {
	f := newUIGateFixture(t)
	gate, err := f.store.CreateTask(f.ctx, "release-9", taskgraph.NodeSpec{NodeID: "go-live", Kind: taskgraph.KindGate})
	if err != nil {
		t.Fatal(err)
	}
	after, err := f.store.CreateTask(f.ctx, "release-9", taskgraph.NodeSpec{NodeID: "deploy", DependsOn: []string{"go-live"}})
	if err != nil {
		t.Fatal(err)
	}
	tab := browser(t)

	// A submitter: the page knows it may not decide, and offers nothing.
	navigate(t, tab, f.loginLink(t, tokUISubmitter))
	navigate(t, tab, f.base+"/ui/workflows/release-9")
	waitJS(t, tab, `document.querySelectorAll("#dag g.node").length === 2 && document.body.dataset.canDecideGates === "false"`)
	if n := eval[int](t, tab, `document.querySelectorAll("#gates button").length`); n != 0 || !eval[bool](t, tab, `document.getElementById("gates").hidden`) {
		t.Fatalf("a submitter is shown %d gate buttons", n)
	}

	// The lead: one gate awaiting approval, with its buttons.
	navigate(t, tab, f.loginLink(t, tokUILead))
	navigate(t, tab, f.base+"/ui/workflows/release-9")
	row := `#gates .gate[data-node-id="go-live"]`
	waitJS(t, tab, `document.body.dataset.canDecideGates === "true" && document.querySelector('`+row+` button.approve') !== null`)
	if n := eval[int](t, tab, `document.querySelectorAll("#gates .gate").length`); n != 1 {
		t.Fatalf("%d gates offered, want 1", n)
	}
	if err := chromedp.Do(tab, chromedp.SendKeys(chromedp.CSS(row+` input.reason`), "checked in the browser")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(row+` button.approve`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, `document.querySelector('g.node[data-node-id="go-live"]').dataset.state === "completed"`)
	waitJS(t, tab, `document.querySelector('g.node[data-node-id="deploy"]').dataset.state === "pending"`)
	waitJS(t, tab, `document.getElementById("gates").hidden && document.querySelectorAll("#gates .gate").length === 0`)
	if tk, err := f.store.Task(f.ctx, after.Task.TaskID); err != nil || tk.State != taskgraph.StatePending {
		t.Fatalf("the dependent is %s (%v)", tk.State, err)
	}
	evs, err := f.store.TaskEvents(f.ctx, gate.Task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Kind != taskgraph.EventApprove || last.Actor.Kind != taskgraph.ActorApprover || last.Actor.Principal != "lead" || !strings.Contains(string(last.Detail), "checked in the browser") {
		t.Fatalf("the decision's event: %s %+v %s", last.Kind, last.Actor, last.Detail)
	}
	// The page's history shows who decided.
	if err := chromedp.Do(tab, chromedp.Click(chromedp.CSS(`g.node[data-node-id="go-live"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, tab, `document.querySelector("#history tr[data-kind=approve]") !== null`)
	if h := text(t, tab, `#history tr[data-kind=approve]`); !strings.Contains(h, "approver lead") {
		t.Fatalf("the history row of the approval: %q", h)
	}
}
