package httpfront

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

const (
	tokLead    = "lead-approver-token-0123456789"
	tokOutside = "outside-approver-token-012345"
)

// newGateFixture serves the test principals plus two approvers: lead (the
// approve role, workflows release-*) and outsider (approve, other-*).
func newGateFixture(t *testing.T) *httpFixture {
	t.Helper()
	doc := fmt.Sprintf(`{"principals": [
		{"name": "planner", "token_sha256": %q, "roles": ["submit", "observe"], "workflows": ["release-*"]},
		{"name": "gpu-pool", "token_sha256": %q, "roles": ["work"], "workflows": ["release-*"], "owners": ["gpu-pool:*"]},
		{"name": "watcher", "token_sha256": %q, "roles": ["observe"]},
		{"name": "lead", "token_sha256": %q, "roles": ["approve"], "workflows": ["release-*"]},
		{"name": "outsider", "token_sha256": %q, "roles": ["approve"], "workflows": ["other-*"]}
	]}`, principal.TokenDigest(tokPlanner), principal.TokenDigest(tokGPU), principal.TokenDigest(tokWatcher),
		principal.TokenDigest(tokLead), principal.TokenDigest(tokOutside))
	ps, err := principal.ParseAuthFile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return newHTTPFixture(t, Options{Principals: principal.NewAuthenticator(ps)})
}

// decideOverHTTP posts a decision with token ("" sends none) and returns
// the status and the decoded answer.
func (f *httpFixture) decideOverHTTP(t *testing.T, token, taskID, verb, body string, extra map[string]string) (int, gateAnswer, http.Header) {
	t.Helper()
	h := map[string]string{}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	maps.Copy(h, extra)
	status, header, raw := send(t, f.ctx, http.MethodPost, f.ts.URL+GatesPath+taskID+"/"+verb, body, withJSON(h))
	var a gateAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("POST %s: HTTP %d, answer not JSON: %s", verb, status, clipBody(raw))
	}
	return status, a, header
}

// The proof of issue 27 item 3: a gate approved over HTTP (a real server,
// a real client) by a principal with the approve role; refused with 403
// naming the role to a worker, a submitter and an observer; refused by
// every one of the seven model tools (none approves, completes or claims
// it); and the decision is in the history with the principal.
func TestGateApprovedOverHTTPByApprover(t *testing.T) {
	f := newGateFixture(t)
	gate, err := f.store.CreateTask(f.ctx, "release-1", taskgraph.NodeSpec{NodeID: "go-live", Kind: taskgraph.KindGate})
	if err != nil {
		t.Fatal(err)
	}
	after, err := f.store.CreateTask(f.ctx, "release-1", taskgraph.NodeSpec{NodeID: "deploy", DependsOn: []string{"go-live"}})
	if err != nil {
		t.Fatal(err)
	}
	id := gate.Task.TaskID

	// Every model tool, by principals holding every MCP role between them.
	planner, worker := f.client("", tokPlanner, nil), f.client("", tokGPU, nil)
	madeUp := map[string]any{"task_id": id, "owner": "gpu-pool:1", "generation": 1, "claim_token": "made-up-token"}
	calls := []struct {
		by   string
		tool string
		args map[string]any
	}{
		{"planner", manifest.ToolCreate, map[string]any{"workflow_id": "release-1", "node_id": "go-live", "kind": "gate"}},
		{"planner", manifest.ToolInspect, map[string]any{"task_id": id}},
		{"gpu-pool", manifest.ToolClaim, map[string]any{"owner": "gpu-pool:1", "task_id": id}},
		{"gpu-pool", manifest.ToolClaim, map[string]any{"owner": "gpu-pool:1", "workflow_id": "release-1"}},
		{"gpu-pool", manifest.ToolHeartbeat, madeUp},
		{"gpu-pool", manifest.ToolComplete, withArg(madeUp, "result", map[string]any{"approved": true})},
		{"gpu-pool", manifest.ToolFail, withArg(madeUp, "error", "no")},
		{"gpu-pool", manifest.ToolCancel, madeUp},
	}
	seen := map[string]bool{}
	for _, c := range calls {
		cs := planner
		if c.by == "gpu-pool" {
			cs = worker
		}
		res, out := callTool(t, cs, c.tool, c.args)
		seen[c.tool] = true
		switch c.tool {
		case manifest.ToolCreate, manifest.ToolInspect:
			tk, _ := out["task"].(map[string]any)
			g, _ := tk["gate"].(map[string]any)
			if res.IsError || tk["state"] != "blocked" || g["status"] != "awaiting_approval" {
				t.Fatalf("%s of the gate: %s", c.tool, toolText(res))
			}
		case manifest.ToolClaim:
			if _, ok := c.args["task_id"]; ok {
				if !res.IsError || !strings.Contains(toolText(res), "approval gate") {
					t.Fatalf("claim of the gate by id: %s", toolText(res))
				}
			} else if res.IsError || out["claimed"] != false {
				t.Fatalf("claim-next with only the gate ready: %s", toolText(res))
			}
		default:
			if !res.IsError || !strings.Contains(toolText(res), "approval gate") {
				t.Fatalf("%s on the gate: %s", c.tool, toolText(res))
			}
		}
		if tk, _ := f.store.Task(f.ctx, id); !tk.AwaitingApproval {
			t.Fatalf("after %s by %s the gate is %s (%s)", c.tool, c.by, tk.State, tk.StatusMessage)
		}
	}
	if len(seen) != len(manifest.AllTools) {
		t.Fatalf("called %d of the %d tools", len(seen), len(manifest.AllTools))
	}

	// The HTTP route, refused to everybody but an approver of the workflow.
	for _, c := range []struct {
		token, who string
		status     int
		want       string
	}{
		{tokGPU, "a worker", http.StatusForbidden, `needs the role approve; principal "gpu-pool" has roles: work`},
		{tokPlanner, "a submitter", http.StatusForbidden, `needs the role approve; principal "planner" has roles: observe, submit`},
		{tokWatcher, "an observer", http.StatusForbidden, `needs the role approve`},
		{tokOutside, "an approver of other workflows", http.StatusNotFound, "unknown task"},
	} {
		status, a, hdr := f.decideOverHTTP(t, c.token, id, "approve", `{"reason":"lgtm"}`, nil)
		if status != c.status || !strings.Contains(a.Error, c.want) || a.Task != nil {
			t.Fatalf("approval by %s: HTTP %d %+v; want %d with %q", c.who, status, a, c.status, c.want)
		}
		if status == http.StatusForbidden && !strings.Contains(hdr.Get("WWW-Authenticate"), "insufficient_scope") {
			t.Fatalf("approval by %s: challenge %q", c.who, hdr.Get("WWW-Authenticate"))
		}
	}
	if status, _ := f.rawGate(t, http.MethodPost, id, "approve", nil); status != http.StatusUnauthorized {
		t.Fatalf("approval without a token: HTTP %d", status)
	}
	if status, body := f.rawGate(t, http.MethodPost, id, "approve", map[string]string{"Authorization": "Bearer " + tokLead, "Origin": "https://evil.example"}); status != http.StatusForbidden || !strings.Contains(body, "Origin is not allowed") {
		t.Fatalf("approval from a foreign origin: HTTP %d %s", status, body)
	}
	if tk, _ := f.store.Task(f.ctx, id); !tk.AwaitingApproval {
		t.Fatalf("a refused decision changed the gate: %s", tk.State)
	}

	status, a, _ := f.decideOverHTTP(t, tokLead, id, "approve", `{"reason":"release notes reviewed"}`, nil)
	if status != http.StatusOK || a.Task == nil || a.Task.State != "completed" || !strings.Contains(a.Task.StatusMessage, "approved by lead (principal)") {
		t.Fatalf("approval by the lead: HTTP %d %+v", status, a)
	}
	if tk, _ := f.store.Task(f.ctx, after.Task.TaskID); tk.State != taskgraph.StatePending {
		t.Fatalf("the approved gate's dependent is %s", tk.State)
	}
	status, a, _ = f.decideOverHTTP(t, tokLead, id, "reject", "", nil)
	if status != http.StatusConflict || !strings.Contains(a.Error, "already decided: approved by lead (principal): release notes reviewed") {
		t.Fatalf("second decision: HTTP %d %+v", status, a)
	}
	evs, err := f.store.TaskEvents(f.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Kind != taskgraph.EventApprove || last.Actor.Kind != taskgraph.ActorApprover || last.Actor.Name != "lead" || last.Actor.Principal != "lead" {
		t.Fatalf("the decision's event: %s %+v", last.Kind, last.Actor)
	}
	if rep, err := f.store.VerifyHistory(f.ctx); err != nil || rep.Broken != nil {
		t.Fatalf("verify: %v %+v", err, rep.Broken)
	}
}

// The route's other answers: a task that is not a gate, an unknown task,
// a bad body, a wrong method or path; and a server without authentication
// refuses every decision, naming the operator command.
func TestGateRouteRefusals(t *testing.T) {
	f := newGateFixture(t)
	tk, err := f.store.CreateTask(f.ctx, "release-2", taskgraph.NodeSpec{NodeID: "build"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := f.store.CreateTask(f.ctx, "release-2", taskgraph.NodeSpec{NodeID: "ok", Kind: taskgraph.KindGate})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id, verb, body string
		status         int
		want           string
	}{
		{tk.Task.TaskID, "approve", "", http.StatusBadRequest, "not an approval gate"},
		{missingTaskID, "reject", "", http.StatusNotFound, "unknown task"},
		{g.Task.TaskID, "approve", `{"reason": 7}`, http.StatusBadRequest, "JSON object"},
		{g.Task.TaskID, "approve", `{"why": "x"}`, http.StatusBadRequest, "JSON object"},
		{g.Task.TaskID, "maybe", "", http.StatusNotFound, "POST /gates/{task_id}/approve"},
		{g.Task.TaskID, "approve", `{"reason": "` + strings.Repeat("x", taskgraph.MaxReasonBytes+1) + `"}`, http.StatusBadRequest, "reason"},
	} {
		status, a, _ := f.decideOverHTTP(t, tokLead, c.id, c.verb, c.body, nil)
		if status != c.status || !strings.Contains(a.Error, c.want) {
			t.Errorf("%s %s %q: HTTP %d %+v; want %d %q", c.verb, c.id, clipBody([]byte(c.body)), status, a, c.status, c.want)
		}
	}
	if status, body := f.rawGate(t, http.MethodGet, g.Task.TaskID, "approve", map[string]string{"Authorization": "Bearer " + tokLead}); status != http.StatusMethodNotAllowed || !strings.Contains(body, "a decision is a POST") {
		t.Fatalf("GET: HTTP %d %s", status, body)
	}
	if tk, _ := f.store.Task(f.ctx, g.Task.TaskID); !tk.AwaitingApproval {
		t.Fatalf("refused requests changed the gate: %s", tk.State)
	}

	open := newHTTPFixture(t, Options{})
	og, err := open.store.CreateTask(open.ctx, "wf", taskgraph.NodeSpec{NodeID: "ok", Kind: taskgraph.KindGate})
	if err != nil {
		t.Fatal(err)
	}
	status, a, _ := open.decideOverHTTP(t, "", og.Task.TaskID, "approve", "", nil)
	if status != http.StatusForbidden || !strings.Contains(a.Error, "runs without authentication") || !strings.Contains(a.Error, "admin approve "+og.Task.TaskID) {
		t.Fatalf("decision on a server without authentication: HTTP %d %+v", status, a)
	}
}

// rawGate sends method to a gate's route with headers and returns the
// status and the body as text.
func (f *httpFixture) rawGate(t *testing.T, method, taskID, verb string, headers map[string]string) (int, string) {
	t.Helper()
	status, _, b := send(t, f.ctx, method, f.ts.URL+GatesPath+taskID+"/"+verb, "", headers)
	return status, string(b)
}

func withArg(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// The live view shows a gate awaiting approval, with when the server
// decides it, and a decided gate as no longer awaiting.
func TestUIShowsGateAwaitingApproval(t *testing.T) {
	f := newUIFixture(t, Options{})
	g, err := f.store.CreateTask(f.ctx, "rel", taskgraph.NodeSpec{NodeID: "ok", Kind: taskgraph.KindGate, GateTimeout: time.Hour, OnTimeout: taskgraph.OnTimeoutReject})
	if err != nil {
		t.Fatal(err)
	}
	node := func() liveview.Node {
		t.Helper()
		status, _, body := f.get(t, http.MethodGet, "/ui/api/workflows/rel", nil)
		var wf liveview.Workflow
		if err := json.Unmarshal([]byte(body), &wf); status != http.StatusOK || err != nil || len(wf.Nodes) != 1 {
			t.Fatalf("status %d %v: %s", status, err, body)
		}
		return wf.Nodes[0]
	}
	if n := node(); !n.Gate || !n.AwaitingApproval || n.DecideByMS != g.Task.DueAt.UnixMilli() || n.State != "blocked" {
		t.Fatalf("gate awaiting approval in the view: %+v", n)
	}
	if _, err := f.store.DecideGate(f.ctx, g.Task.TaskID, taskgraph.GateDecision{Approve: true, By: "bob", Via: taskgraph.DecidedByOperator}); err != nil {
		t.Fatal(err)
	}
	if n := node(); !n.Gate || n.AwaitingApproval || n.DecideByMS != 0 || n.State != "completed" {
		t.Fatalf("approved gate in the view: %+v", n)
	}
}
