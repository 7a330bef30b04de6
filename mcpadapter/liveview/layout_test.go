package liveview

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// bigWorkflow is n nodes in layers of width, each depending on one or two
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

func TestLayoutIsLayeredAndBounded(t *testing.T) {
	nodes := bigWorkflow(1000, 50)
	idx := map[string]int{}
	for i, n := range nodes {
		idx[n.NodeID] = i
	}
	deps := make([][]int, len(nodes))
	for i, n := range nodes {
		for _, d := range n.DependsOn {
			deps[i] = append(deps[i], idx[d])
		}
	}
	start := time.Now()
	layer, x, y, w, h := uiLayout(len(nodes), deps)
	t.Logf("layout of 1000 nodes in 20 layers: %s", time.Since(start))
	for i := range nodes {
		if want := i / 50; layer[i] != want {
			t.Fatalf("node %d in layer %d, want %d", i, layer[i], want)
		}
		if x[i] < 0 || y[i] < 0 || x[i]+NodeWidth > w || y[i]+NodeHeight > h {
			t.Fatalf("node %d at (%d,%d) outside %dx%d", i, x[i], y[i], w, h)
		}
	}
	seen := map[[2]int]bool{}
	for i := range nodes {
		p := [2]int{x[i], y[i]}
		if seen[p] {
			t.Fatalf("two nodes at %v", p)
		}
		seen[p] = true
	}
	// A cycle (which the store refuses) still terminates.
	if l, _, _, _, _ := uiLayout(2, [][]int{{1}, {0}}); l[0] != 1 || l[1] != 1 {
		t.Fatalf("cycle layers %v", l)
	}
}

// A login link redirects only to a path under /ui/.
func TestLoginNextStaysUnderUI(t *testing.T) {
	for next, ok := range map[string]bool{
		"/ui/workflows/wf": true, "/ui/": true, "//evil.example/ui/": false, "https://evil.example/": false,
		"/ui/../mcp": false, "/ui/\\evil": false, "/metrics": false, "/ui/x?y": false,
		"/ui/%2e%2e/mcp": false, "/ui/%2E%2e/mcp": false, "/ui/.%2e/mcp": false, "/ui/%2e/x": false,
		"/ui/%2f%2fevil.example": false, "/ui/%5cevil": false, "/ui/%3fx": false, "/ui/%zz": false,
		"/ui/workflows/a%2db": true,
	} {
		if safeUINext(next) != ok {
			t.Errorf("safeUINext(%q) = %v, want %v", next, !ok, ok)
		}
	}
}

// Minting logins at the caps evicts only the minter's own codes and
// sessions, never another operator's (issue 29 item 14).
func TestLoginCapsEvictTheMinterFirst(t *testing.T) {
	t.Parallel()
	l := newUILogins()
	now := time.Unix(1_800_000_000, 0)
	login := func(who string) string {
		t.Helper()
		code, err := l.mint(who, now)
		if err != nil {
			t.Fatal(err)
		}
		sid, ok, err := l.redeem(code, now)
		if err != nil || !ok {
			t.Fatalf("redeem %s: %v %v", who, ok, err)
		}
		return sid
	}
	cookie := func(sid string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
		r.AddCookie(&http.Cookie{Name: UICookieName, Value: sid})
		return r
	}
	var victims []string
	for i := range 3 {
		victims = append(victims, login(fmt.Sprintf("operator-%d", i)))
	}
	// One code of another operator, outstanding while the flood runs.
	code, err := l.mint("operator-0", now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 * uiMaxSessions {
		now = now.Add(time.Millisecond)
		login("mallory")
		// Enough principals together to pass the server's bounds.
		helper := fmt.Sprintf("mallory-%d", i%(uiMaxSessions/uiMaxSessionsEach+3))
		login(helper)
		if _, err := l.mint(helper, now); err != nil {
			t.Fatal(err)
		}
	}
	tokens := map[string]bool{}
	for i, sid := range victims {
		g, ok := l.session(cookie(sid), now)
		if !ok || g.principal != fmt.Sprintf("operator-%d", i) {
			t.Fatalf("operator-%d's session after the flood: %q, %v", i, g.principal, ok)
		}
		// Each session has its own anti-forgery token, not its id.
		if len(g.csrf) < 40 || tokens[g.csrf] || g.csrf == sid {
			t.Fatalf("operator-%d's session has anti-forgery token %q (seen before: %v)", i, g.csrf, tokens[g.csrf])
		}
		tokens[g.csrf] = true
	}
	if _, ok, _ := l.redeem(code, now); !ok {
		t.Fatal("operator-0's outstanding code was evicted by the flood")
	}
	n := 0
	for _, g := range l.sessions {
		if g.principal == "mallory" {
			n++
		}
	}
	if n > uiMaxSessionsEach || len(l.sessions) > uiMaxSessions {
		t.Fatalf("mallory holds %d sessions (bound %d), all %d (bound %d)", n, uiMaxSessionsEach, len(l.sessions), uiMaxSessions)
	}
}

// Without JavaScript the pages say what they need and where the same view
// is on the command line, and hide the "connecting…" that would never
// change (issue 29 item 8).
func TestPagesSayWhatTheyNeedWithoutJavaScript(t *testing.T) {
	t.Parallel()
	css, err := uiAssets.ReadFile("ui/style.css")
	if err != nil || !strings.Contains(string(css), "html:not(.js) #live { display: none; }") {
		t.Fatalf("style.css does not hide the status line without the script: %v", err)
	}
	for _, page := range []string{"ui/index.html", "ui/workflow.html"} {
		b, err := uiAssets.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(b), "<noscript>")
		body, _, closed := strings.Cut(rest, "</noscript>")
		if !ok || !closed || !strings.Contains(body, "JavaScript") || !strings.Contains(body, "workflow show") {
			t.Errorf("%s has no <noscript> saying it needs JavaScript and naming workflow show", page)
		}
	}
}
