package httpfront

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// Principals of the live view's gate tests: each may log into the view
// (observe); only the leads hold approve.
const (
	tokUILead      = "ui-lead-token-0123456789abc"
	tokUIOutsider  = "ui-outsider-token-0123456789"
	tokUISubmitter = "ui-submitter-token-012345678"
	tokUIWorker    = "ui-worker-token-0123456789ab"
)

// newUIGateFixture serves the live view with four principals: lead
// (observe, approve; release-*), outsider (observe, approve; other-*),
// submitter (observe, submit) and worker (observe, work).
func newUIGateFixture(t *testing.T) *uiFixture {
	t.Helper()
	doc := fmt.Sprintf(`{"principals": [
		{"name": "lead", "token_sha256": %q, "roles": ["observe", "approve"], "workflows": ["release-*"]},
		{"name": "outsider", "token_sha256": %q, "roles": ["observe", "approve"], "workflows": ["other-*"]},
		{"name": "submitter", "token_sha256": %q, "roles": ["observe", "submit"]},
		{"name": "worker", "token_sha256": %q, "roles": ["observe", "work"]}
	]}`, principal.TokenDigest(tokUILead), principal.TokenDigest(tokUIOutsider), principal.TokenDigest(tokUISubmitter), principal.TokenDigest(tokUIWorker))
	ps, err := principal.ParseAuthFile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return newUIFixture(t, Options{Principals: principal.NewAuthenticator(ps)})
}

// uiSession is a browser's view session: its cookie and the anti-forgery
// token the page reads from /ui/api/me.
type uiSession struct {
	cookie string
	me     liveview.Me
}

// session logs into the view with a login link minted by token, as a
// browser does, and reads /ui/api/me with the session.
func (f *uiFixture) session(t *testing.T, token string) uiSession {
	t.Helper()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.loginLink(t, token))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var s uiSession
	for _, c := range resp.Cookies() {
		if c.Name == liveview.UICookieName {
			s.cookie = c.Value
		}
	}
	if s.cookie == "" {
		t.Fatalf("login: HTTP %d without a session cookie", resp.StatusCode)
	}
	status, _, body := f.get(t, http.MethodGet, liveview.UIMePath, map[string]string{"Cookie": liveview.UICookieName + "=" + s.cookie})
	if err := json.Unmarshal([]byte(body), &s.me); status != http.StatusOK || err != nil {
		t.Fatalf("GET %s: HTTP %d %v: %s", liveview.UIMePath, status, err, body)
	}
	return s
}

// uiDecide posts a decision on gate id to the live view with headers and
// returns the status and the answer.
func (f *uiFixture) uiDecide(t *testing.T, id, verb, body string, hdr map[string]string) (int, liveview.GateAnswer) {
	t.Helper()
	status, header, raw := send(t, f.ctx, http.MethodPost, f.base+liveview.UIGatesPath+id+"/"+verb, body, withJSON(hdr))
	var a liveview.GateAnswer
	if strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("POST %s: HTTP %d, answer not JSON: %s", verb, status, clipBody(raw))
		}
	} else {
		a.Error = string(raw)
	}
	return status, a
}

// headers are what the page sends with a decision for session s: its
// cookie, this server's Origin and the session's token.
func (f *uiFixture) headers(s uiSession) map[string]string {
	return map[string]string{"Cookie": liveview.UICookieName + "=" + s.cookie, "Origin": f.base, liveview.UICSRFHeader: s.me.CSRFToken}
}

func without(h map[string]string, k string) map[string]string {
	out := map[string]string{}
	for kk, v := range h {
		if kk != k {
			out[kk] = v
		}
	}
	return out
}

// Issue 27 item 3, in the live view: a gate approved through the view's
// POST by a logged-in principal with the approve role (a real server, the
// login a browser goes through), recorded with that principal as actor as
// the HTTP route records it; refused without the anti-forgery token, with
// a wrong one or another session's, without or from a foreign Origin,
// with a bearer token instead of a session, and to a submitter and a
// worker; a gate outside the approver's workflows is unknown to it.
func TestUIGateApprovedByApproverWithCSRFToken(t *testing.T) {
	t.Parallel()
	f := newUIGateFixture(t)
	gate, err := f.store.CreateTask(f.ctx, "release-1", taskgraph.NodeSpec{NodeID: "go-live", Kind: taskgraph.KindGate})
	if err != nil {
		t.Fatal(err)
	}
	after, err := f.store.CreateTask(f.ctx, "release-1", taskgraph.NodeSpec{NodeID: "deploy", DependsOn: []string{"go-live"}})
	if err != nil {
		t.Fatal(err)
	}
	id := gate.Task.TaskID
	lead, submitter, worker, outsider := f.session(t, tokUILead), f.session(t, tokUISubmitter), f.session(t, tokUIWorker), f.session(t, tokUIOutsider)

	// What the page is told: only an approver is offered the decision.
	if !lead.me.CanDecideGates || lead.me.Principal != "lead" || len(lead.me.CSRFToken) < 40 || lead.me.Why != "" {
		t.Fatalf("lead's /ui/api/me: %+v", lead.me)
	}
	for _, s := range []uiSession{submitter, worker} {
		if s.me.CanDecideGates || !strings.Contains(s.me.Why, "needs the role approve") || s.me.CSRFToken == "" || s.me.CSRFToken == lead.me.CSRFToken {
			t.Fatalf("%s's /ui/api/me: %+v", s.me.Principal, s.me)
		}
	}
	status, _, body := f.get(t, http.MethodGet, liveview.UIMePath, map[string]string{"Authorization": "Bearer " + tokUILead})
	if bm := (liveview.Me{}); status != http.StatusOK || json.Unmarshal([]byte(body), &bm) != nil || bm.CanDecideGates || bm.CSRFToken != "" || !strings.Contains(bm.Why, "POST /gates/") {
		t.Fatalf("/ui/api/me with a bearer token: HTTP %d %s", status, body)
	}

	ok := f.headers(lead)
	for _, c := range []struct {
		who    string
		hdr    map[string]string
		status int
		want   string
	}{
		{"no anti-forgery token", without(ok, liveview.UICSRFHeader), http.StatusForbidden, "X-CSRF-Token header is missing or does not match"},
		{"a wrong token", withHeader(ok, liveview.UICSRFHeader, lead.me.CSRFToken[:len(lead.me.CSRFToken)-1]+"x"), http.StatusForbidden, "does not match this view session"},
		{"another session's token", withHeader(ok, liveview.UICSRFHeader, submitter.me.CSRFToken), http.StatusForbidden, "does not match this view session"},
		{"a foreign Origin", withHeader(ok, "Origin", "https://evil.example"), http.StatusForbidden, "Origin is not allowed"},
		{"no Origin", without(ok, "Origin"), http.StatusForbidden, "no Origin header"},
		{"no session", without(ok, "Cookie"), http.StatusUnauthorized, "login link"},
		{"a bearer token", withHeader(without(ok, "Cookie"), "Authorization", "Bearer "+tokUILead), http.StatusForbidden, "needs a view session"},
		{"a submitter", f.headers(submitter), http.StatusForbidden, `needs the role approve; principal "submitter" has roles: observe, submit`},
		{"a worker", f.headers(worker), http.StatusForbidden, `needs the role approve; principal "worker" has roles: observe, work`},
		{"an approver of other workflows", f.headers(outsider), http.StatusNotFound, "unknown task"},
	} {
		status, a := f.uiDecide(t, id, "approve", `{"reason":"lgtm"}`, c.hdr)
		if status != c.status || !strings.Contains(a.Error, c.want) || a.Task != nil {
			t.Fatalf("approval with %s: HTTP %d %+v; want %d with %q", c.who, status, a, c.status, c.want)
		}
	}
	if status, a := f.uiDecide(t, id, "maybe", "", ok); status != http.StatusNotFound || !strings.Contains(a.Error, "approve or …/reject") {
		t.Fatalf("an unknown verb: HTTP %d %+v", status, a)
	}
	if status, _, body := f.get(t, http.MethodGet, liveview.UIGatesPath+id+"/approve", ok); status != http.StatusMethodNotAllowed || !strings.Contains(body, "a decision is a POST") {
		t.Fatalf("GET of a decision: HTTP %d %s", status, body)
	}
	if status, a := f.uiDecide(t, id, "approve", `{"why":"x"}`, ok); status != http.StatusBadRequest || !strings.Contains(a.Error, "JSON object") {
		t.Fatalf("a bad body: HTTP %d %+v", status, a)
	}
	if tk, _ := f.store.Task(f.ctx, id); !tk.AwaitingApproval {
		t.Fatalf("a refused decision changed the gate: %s", tk.State)
	}

	status, a := f.uiDecide(t, id, "approve", `{"reason":"release notes reviewed"}`, ok)
	if status != http.StatusOK || a.Task == nil || a.Task.State != "completed" || a.Task.AwaitingApproval || !strings.Contains(a.Task.StatusMessage, "approved by lead (principal)") {
		t.Fatalf("approval by the lead: HTTP %d %+v", status, a)
	}
	if tk, _ := f.store.Task(f.ctx, after.Task.TaskID); tk.State != taskgraph.StatePending {
		t.Fatalf("the approved gate's dependent is %s", tk.State)
	}
	if status, a := f.uiDecide(t, id, "reject", "", ok); status != http.StatusConflict || !strings.Contains(a.Error, "already decided: approved by lead (principal): release notes reviewed") {
		t.Fatalf("second decision: HTTP %d %+v", status, a)
	}
	// In the history, as the HTTP route records it, and shown so.
	evs, err := f.store.TaskEvents(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Kind != taskgraph.EventApprove || last.Actor.Kind != taskgraph.ActorApprover || last.Actor.Name != "lead" || last.Actor.Principal != "lead" ||
		!strings.Contains(string(last.Detail), `"reason":"release notes reviewed"`) || !strings.Contains(string(last.Detail), `"via":"principal"`) {
		t.Fatalf("the decision's event: %s %+v %s", last.Kind, last.Actor, last.Detail)
	}
	status, _, body = f.get(t, http.MethodGet, "/ui/api/tasks/"+id, map[string]string{"Cookie": liveview.UICookieName + "=" + lead.cookie})
	var detail liveview.Task
	if err := json.Unmarshal([]byte(body), &detail); status != http.StatusOK || err != nil || len(detail.Events) == 0 {
		t.Fatalf("the gate's detail: HTTP %d %v %s", status, err, body)
	}
	if e := detail.Events[len(detail.Events)-1]; e.Kind != "approve" || e.ActorKind != "approver" || e.ActorPrincipal != "lead" {
		t.Fatalf("the view shows the decision as %+v", e)
	}

	// A rejection cascades, as a failure does.
	g2, err := f.store.CreateTask(f.ctx, "release-2", taskgraph.NodeSpec{NodeID: "go-live", Kind: taskgraph.KindGate})
	if err != nil {
		t.Fatal(err)
	}
	d2, err := f.store.CreateTask(f.ctx, "release-2", taskgraph.NodeSpec{NodeID: "deploy", DependsOn: []string{"go-live"}})
	if err != nil {
		t.Fatal(err)
	}
	if status, a := f.uiDecide(t, g2.Task.TaskID, "reject", `{"reason":"not this week"}`, ok); status != http.StatusOK || a.Task == nil || a.Task.State != "failed" {
		t.Fatalf("rejection by the lead: HTTP %d %+v", status, a)
	}
	if tk, _ := f.store.Task(f.ctx, d2.Task.TaskID); tk.State != taskgraph.StateCancelled {
		t.Fatalf("the rejected gate's dependent is %s", tk.State)
	}

	// After logout the session's token decides nothing.
	g3, err := f.store.CreateTask(f.ctx, "release-3", taskgraph.NodeSpec{NodeID: "go-live", Kind: taskgraph.KindGate})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := f.get(t, http.MethodPost, liveview.UILogoutPath, map[string]string{"Cookie": liveview.UICookieName + "=" + lead.cookie}); status != http.StatusNoContent {
		t.Fatalf("logout: HTTP %d %s", status, body)
	}
	if status, a := f.uiDecide(t, g3.Task.TaskID, "approve", "", ok); status != http.StatusUnauthorized {
		t.Fatalf("decision after logout: HTTP %d %+v", status, a)
	}
	if rep, err := f.store.VerifyHistory(f.ctx); err != nil || rep.Broken != nil {
		t.Fatalf("verify: %v %+v", err, rep.Broken)
	}
}

// On a server without authentication the view offers no decision and
// refuses one, naming the operator's command.
func TestUIGateRefusedWithoutAuthentication(t *testing.T) {
	t.Parallel()
	f := newUIFixture(t, Options{})
	g, err := f.store.CreateTask(f.ctx, "wf", taskgraph.NodeSpec{NodeID: "ok", Kind: taskgraph.KindGate})
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := f.get(t, http.MethodGet, liveview.UIMePath, nil)
	var me liveview.Me
	if err := json.Unmarshal([]byte(body), &me); status != http.StatusOK || err != nil || me.CanDecideGates || !strings.Contains(me.Why, "admin approve|reject") {
		t.Fatalf("/ui/api/me without authentication: HTTP %d %s", status, body)
	}
	status, a := f.uiDecide(t, g.Task.TaskID, "approve", "", map[string]string{"Origin": f.base, liveview.UICSRFHeader: "anything"})
	if status != http.StatusForbidden || !strings.Contains(a.Error, "runs without authentication") {
		t.Fatalf("decision without authentication: HTTP %d %+v", status, a)
	}
	if tk, _ := f.store.Task(f.ctx, g.Task.TaskID); !tk.AwaitingApproval {
		t.Fatalf("a refused decision changed the gate: %s", tk.State)
	}
}

func withHeader(h map[string]string, k, v string) map[string]string {
	out := without(h, k)
	out[k] = v
	return out
}
