package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// Tokens of the test principals (each at least 16 characters).
const (
	tokPlanner = "planner-token-0123456789"
	tokGPU     = "gpu-pool-token-0123456789"
	tokWatcher = "watcher-token-0123456789"
	tokOther   = "other-submit-token-012345"
	tokRotated = "planner-rotated-token-0123"
)

// missingTaskID is a well-formed task id no store holds.
const missingTaskID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

func testPrincipals(t testing.TB, plannerToken string) *Principals {
	t.Helper()
	doc := fmt.Sprintf(`{"principals": [
		{"name": "planner", "token_sha256": %q, "roles": ["submit", "observe"], "workflows": ["release-*"]},
		{"name": "gpu-pool", "token_sha256": %q, "roles": ["work"], "workflows": ["release-*"], "owners": ["gpu-pool:*"]},
		{"name": "watcher", "token_sha256": %q, "roles": ["observe"]},
		{"name": "other", "token_sha256": %q, "roles": ["submit"]}
	]}`, TokenDigest(plannerToken), TokenDigest(tokGPU), TokenDigest(tokWatcher), TokenDigest(tokOther))
	ps, err := ParseAuthFile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func newPrincipalFixture(t *testing.T) (*httpFixture, *Authenticator) {
	t.Helper()
	auth := NewAuthenticator(testPrincipals(t, tokPlanner))
	f := newHTTPFixture(t, HTTPOptions{Principals: auth})
	return f, auth
}

func TestParseAuthFileRefusesWhatItDoesNotKnow(t *testing.T) {
	d := TokenDigest("some-token-0123456789")
	cases := map[string]struct{ doc, want string }{
		"unknown top key":   {`{"principals": [], "extra": 1}`, `unknown field "extra"`},
		"unknown key":       {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"], "token": "x"}]}`, `unknown field "token"`},
		"unknown role":      {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["admin"]}]}`, `principal "a": unknown role "admin"`},
		"no roles":          {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": []}]}`, `principal "a": roles must list`},
		"bad pattern":       {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"], "owners": ["a b"]}]}`, `principal "a": owners pattern "a b"`},
		"bad workflow glob": {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"], "workflows": ["[x]"]}]}`, `workflows pattern "[x]"`},
		"plain token":       {`{"principals": [{"name": "a", "token_sha256": "some-token-0123456789", "roles": ["work"]}]}`, `principal "a": token_sha256 must be the 64 lowercase hex digits`},
		"duplicate name":    {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"]}, {"name": "a", "token_sha256": "` + TokenDigest("x-token-0123456789") + `", "roles": ["work"]}]}`, `principal "a": the name is used twice`},
		"shared token":      {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"]}, {"name": "b", "token_sha256": "` + d + `", "roles": ["work"]}]}`, `principal "b": token_sha256 is the same as principal "a"'s`},
		"bad name":          {`{"principals": [{"name": "a b", "token_sha256": "` + d + `", "roles": ["work"]}]}`, `principals[0]: name must match`},
		"no principals":     {`{}`, `"principals" (an array) is required`},
		"trailing":          {`{"principals": []} {}`, `trailing data`},
	}
	for name, c := range cases {
		_, err := ParseAuthFile([]byte(c.doc))
		if !errors.Is(err, ErrInvalidAuthFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want ErrInvalidAuthFile containing %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "some-token-0123456789") && name != "plain token" {
			t.Errorf("%s: error repeats a token: %v", name, err)
		}
	}
	// A plain token pasted where its digest belongs is not echoed back.
	_, err := ParseAuthFile([]byte(cases["plain token"].doc))
	if strings.Contains(err.Error(), "some-token-0123456789") {
		t.Errorf("error repeats the token: %v", err)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		pat, s string
		want   bool
	}{
		{"release-*", "release-1", true}, {"release-*", "release-", true}, {"release-*", "prerelease-1", false},
		{"*", "", true}, {"a?c", "abc", true}, {"a?c", "ac", false}, {"gpu-pool:*", "gpu-pool:7", true},
		{"gpu-pool:*", "gpu-pool", false}, {"*-x-*", "a-x-b", true}, {"*-x-*", "a-y-b", false}, {"abc", "abc", true}, {"abc", "abcd", false},
	} {
		if got := globMatch(c.pat, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
}

// toolErrorKind returns the kind and scope of a tool error result, "" for
// a success.
func toolErrorKind(res *mcp.CallToolResult) (kind, scope string) {
	if !res.IsError {
		return "", ""
	}
	d, _ := res.Meta[ErrorMetaKey].(map[string]any)
	kind, _ = d["kind"].(string)
	scope, _ = d["scope"].(string)
	return kind, scope
}

// The role × tool matrix over HTTP in both eras: each principal lists
// exactly its roles' tools, every other tool is a forbidden tool error
// naming the role, and its receipts carry its own manifest's digest.
func TestPrincipalRoleToolMatrixOverHTTP(t *testing.T) {
	f, _ := newPrincipalFixture(t)
	ctx := context.Background()
	seed, err := f.store.CreateTask(ctx, "release-1", taskgraph.NodeSpec{NodeID: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		tokPlanner: {manifest.ToolCreate, manifest.ToolInspect},
		tokGPU:     {manifest.ToolCancel, manifest.ToolClaim, manifest.ToolComplete, manifest.ToolFail, manifest.ToolHeartbeat, manifest.ToolInspect},
		tokWatcher: {manifest.ToolInspect},
		tokOther:   {manifest.ToolCreate, manifest.ToolInspect},
	}
	roleOf := map[string]string{manifest.ToolCreate: RoleSubmit, manifest.ToolClaim: RoleWork, manifest.ToolHeartbeat: RoleWork,
		manifest.ToolComplete: RoleWork, manifest.ToolFail: RoleWork, manifest.ToolCancel: RoleWork}
	argsOf := map[string]map[string]any{
		manifest.ToolCreate:    {"workflow_id": "release-1", "node_id": "n"},
		manifest.ToolInspect:   {"task_id": seed.Task.TaskID},
		manifest.ToolClaim:     {"owner": "gpu-pool:1", "workflow_id": "release-1"},
		manifest.ToolHeartbeat: {"task_id": seed.Task.TaskID, "owner": "gpu-pool:1", "generation": 1, "claim_token": "x"},
		manifest.ToolComplete:  {"task_id": seed.Task.TaskID, "owner": "gpu-pool:1", "generation": 1, "claim_token": "x", "result": 1},
		manifest.ToolFail:      {"task_id": seed.Task.TaskID, "owner": "gpu-pool:1", "generation": 1, "claim_token": "x", "error": "e"},
		manifest.ToolCancel:    {"task_id": seed.Task.TaskID, "owner": "gpu-pool:1", "generation": 1, "claim_token": "x"},
	}
	full := f.srv.Manifest().SHA256()
	for _, era := range []string{"", "2025-11-25"} {
		for tok, tools := range want {
			cs := f.client(era, tok, nil)
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tl := range lt.Tools {
				got = append(got, tl.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tools) {
				t.Errorf("era %q token %s: tools/list = %v, want %v", era, tok[:8], got, tools)
			}
			for _, tool := range manifest.AllTools {
				res, out := callTool(t, cs, tool, argsOf[tool])
				kind, scope := toolErrorKind(res)
				if slices.Contains(tools, tool) {
					if kind == "forbidden" {
						t.Errorf("era %q token %s: %s refused: %s", era, tok[:8], tool, toolText(res))
					}
					if kind == "" {
						rec, _ := out["receipt"].(map[string]any)
						if d, _ := rec["manifestSha256"].(string); d == full || d == "" {
							t.Errorf("era %q token %s: %s receipt names manifest %q, want the principal's narrowed manifest (not the full %s)", era, tok[:8], tool, d, full)
						}
					}
					continue
				}
				if kind != "forbidden" || scope != "role" || !strings.Contains(toolText(res), "needs the role "+roleOf[tool]) {
					t.Errorf("era %q token %s: %s = %q (kind %q scope %q), want forbidden naming role %s", era, tok[:8], tool, toolText(res), kind, scope, roleOf[tool])
				}
			}
			// initialize / server/discover advertise only the principal's
			// surface: resources for observe, the Tasks extension (modern
			// era only) for submit.
			caps := cs.InitializeResult().Capabilities
			observe, submit := tok == tokPlanner || tok == tokWatcher, tok == tokPlanner || tok == tokOther
			if (caps.Resources != nil) != observe {
				t.Errorf("era %q token %s: resources capability %v, want %v", era, tok[:8], caps.Resources != nil, observe)
			}
			if _, ok := caps.Extensions[manifest.TasksExtension]; ok != (submit && era == "") {
				t.Errorf("era %q token %s: tasks extension advertised %v, want %v", era, tok[:8], ok, submit && era == "")
			}
			// Resources: only observe sees them.
			_, rerr := cs.ListResources(ctx, nil)
			if observe != (rerr == nil) {
				t.Errorf("era %q token %s: resources/list error %v, want allowed=%v", era, tok[:8], rerr, observe)
			}
			cs.Close()
		}
	}
}

// The planner reads its own manifest; receipts name exactly its digest.
func TestPrincipalReceiptsCarryItsManifestDigest(t *testing.T) {
	f, _ := newPrincipalFixture(t)
	ctx := context.Background()
	for _, era := range []string{"", "2025-11-25"} {
		cs := f.client(era, tokPlanner, nil)
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: manifest.ManifestURI})
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Tools []string `json:"tools"`
		}
		if err := json.Unmarshal([]byte(rr.Contents[0].Text), &m); err != nil {
			t.Fatal(err)
		}
		digest, _ := rr.Contents[0].Meta["sha256"].(string)
		lr, err := cs.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range lr.Resources {
			if r.URI == manifest.ManifestURI && (r.Meta["sha256"] != digest || r.Size != int64(len(rr.Contents[0].Text))) {
				t.Errorf("era %q: resources/list describes the manifest as %v (%d bytes), it reads as %s (%d bytes)", era, r.Meta["sha256"], r.Size, digest, len(rr.Contents[0].Text))
			}
		}
		res, out := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "release-2", "node_id": "n" + era})
		if res.IsError {
			t.Fatal(toolText(res))
		}
		rec := out["receipt"].(map[string]any)
		if rec["manifestSha256"] != digest || digest == f.srv.Manifest().SHA256() {
			t.Errorf("era %q: receipt names %v, the principal's manifest is %s (full %s)", era, rec["manifestSha256"], digest, f.srv.Manifest().SHA256())
		}
		if len(m.Tools) != 2 {
			t.Errorf("era %q: the planner's manifest lists %d tools, want 2 (create, inspect): %s", era, len(m.Tools), rr.Contents[0].Text)
		}
	}
}

// Scopes: a worker's owner must match; a task outside the workflows is
// indistinguishable from a missing one, the create conflict included.
func TestPrincipalScopes(t *testing.T) {
	f, _ := newPrincipalFixture(t)
	ctx := context.Background()
	other := f.client("", tokOther, nil)
	res, out := callTool(t, other, manifest.ToolCreate, map[string]any{"workflow_id": "secret-1", "node_id": "n", "payload": map[string]any{"k": "v"}})
	if res.IsError {
		t.Fatal(toolText(res))
	}
	secretID := out["task"].(map[string]any)["task_id"].(string)

	for _, era := range []string{"", "2025-11-25"} {
		planner := f.client(era, tokPlanner, nil)
		// Inspecting a hidden task answers exactly as a missing one.
		hidden, _ := callTool(t, planner, manifest.ToolInspect, map[string]any{"task_id": secretID})
		missing, _ := callTool(t, planner, manifest.ToolInspect, map[string]any{"task_id": missingTaskID})
		hk, _ := toolErrorKind(hidden)
		mk, _ := toolErrorKind(missing)
		if hk != "not_found" || mk != "not_found" || strings.ReplaceAll(toolText(hidden), secretID, "ID") != strings.ReplaceAll(toolText(missing), missingTaskID, "ID") {
			t.Errorf("era %q: hidden task answered %q (%s), missing one %q (%s); want the same not_found", era, toolText(hidden), hk, toolText(missing), mk)
		}
		// The create conflict does not leak the id either: the workflow is
		// out of scope, so the call is refused before the store is asked.
		conflict, _ := callTool(t, planner, manifest.ToolCreate, map[string]any{"workflow_id": "secret-1", "node_id": "n", "payload": map[string]any{"k": "other"}})
		if k, s := toolErrorKind(conflict); k != "forbidden" || s != "workflows" || strings.Contains(toolText(conflict), secretID) {
			t.Errorf("era %q: create in another's workflow = %q (%s/%s), want forbidden workflows without the task id", era, toolText(conflict), k, s)
		}

		gpu := f.client(era, tokGPU, nil)
		if _, err := f.store.CreateTask(ctx, "release-9", taskgraph.NodeSpec{NodeID: "w" + era}); err != nil {
			t.Fatal(err)
		}
		bad, _ := callTool(t, gpu, manifest.ToolClaim, map[string]any{"owner": "planner", "workflow_id": "release-9"})
		if k, s := toolErrorKind(bad); k != "forbidden" || s != "owners" || !strings.Contains(toolText(bad), "gpu-pool:*") {
			t.Errorf("era %q: claim as a foreign owner = %q (%s/%s), want forbidden owners", era, toolText(bad), k, s)
		}
		anywhere, _ := callTool(t, gpu, manifest.ToolClaim, map[string]any{"owner": "gpu-pool:1"})
		if k, s := toolErrorKind(anywhere); k != "forbidden" || s != "workflows" {
			t.Errorf("era %q: claim-next without workflow_id by a scoped worker = %q (%s/%s), want forbidden workflows", era, toolText(anywhere), k, s)
		}
		byID, _ := callTool(t, gpu, manifest.ToolClaim, map[string]any{"owner": "gpu-pool:1", "task_id": secretID})
		if k, _ := toolErrorKind(byID); k != "not_found" || !strings.Contains(toolText(byID), "not found") {
			t.Errorf("era %q: claim of a hidden task = %q (%s), want not_found", era, toolText(byID), k)
		}
		good, gout := callTool(t, gpu, manifest.ToolClaim, map[string]any{"owner": "gpu-pool:1", "workflow_id": "release-9"})
		if good.IsError || gout["claimed"] != true {
			t.Errorf("era %q: claim in scope = %q, want claimed", era, toolText(good))
		}
	}
}

// tasksCall sends a raw 2026-07-28 tasks/* request with token.
func (f *httpFixture) tasksCall(method, token, taskID string) *rawResponse {
	f.t.Helper()
	caps := map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}
	return f.post(modernBody(1, method, map[string]any{"taskId": taskID}, caps),
		modernHeaders(method, "Authorization", "Bearer "+token, headerName, taskID))
}

// tasks/get|update|cancel act only on the caller's own tasks: another
// submit principal gets exactly the answer for a missing task, and cannot
// cancel it; a principal without submit is forbidden before any read.
func TestPrincipalTasksMethodsOnlyForTheCreator(t *testing.T) {
	f, _ := newPrincipalFixture(t)
	planner := f.client("", tokPlanner, nil)
	res, out := callTool(t, planner, manifest.ToolCreate, map[string]any{"workflow_id": "release-3", "node_id": "n"})
	if res.IsError {
		t.Fatal(toolText(res))
	}
	id := out["task"].(map[string]any)["task_id"].(string)
	for _, method := range []string{MethodTasksGet, MethodTasksUpdate, MethodTasksCancel} {
		theirs := f.tasksCall(method, tokOther, id)
		none := f.tasksCall(method, tokOther, missingTaskID)
		if theirs.rpc.Error == nil || none.rpc.Error == nil || theirs.status != none.status || theirs.rpc.Error.Code != none.rpc.Error.Code ||
			strings.ReplaceAll(theirs.rpc.Error.Message, id, "ID") != strings.ReplaceAll(none.rpc.Error.Message, missingTaskID, "ID") {
			t.Errorf("%s on another's task: %d %s; on a missing task: %d %s; want the same answer", method, theirs.status, clipBody(theirs.body), none.status, clipBody(none.body))
		}
		w := f.tasksCall(method, tokWatcher, id)
		if w.rpc.Error == nil || !strings.Contains(w.rpc.Error.Message, "needs the role submit") || !strings.Contains(string(w.rpc.Error.Data), `"forbidden"`) {
			t.Errorf("%s by an observer: %s, want forbidden naming submit", method, clipBody(w.body))
		}
	}
	task, err := f.store.Task(context.Background(), id)
	if err != nil || task.State == taskgraph.StateCancelled || task.CreatedBy != "planner" {
		t.Fatalf("after the other principal's tasks/cancel: %+v %v; want uncancelled, created by planner", task, err)
	}
	if r := f.tasksCall(MethodTasksCancel, tokPlanner, id); r.rpc.Error != nil {
		t.Fatalf("the creator's tasks/cancel: %s", clipBody(r.body))
	}
	if task, _ = f.store.Task(context.Background(), id); task.State != taskgraph.StateCancelled {
		t.Errorf("the creator's tasks/cancel left the task %s", task.State)
	}
}

// A legacy session belongs to the principal that opened it.
func TestPrincipalLegacySessionIsBoundToItsPrincipal(t *testing.T) {
	f, _ := newPrincipalFixture(t)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	r := f.post(init, map[string]string{"Authorization": "Bearer " + tokWatcher})
	sid := r.header.Get(headerSessionID)
	if sid == "" {
		t.Fatalf("no session: %d %s", r.status, clipBody(r.body))
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	h := map[string]string{headerSessionID: sid, headerProtocolVersion: "2025-11-25", "Authorization": "Bearer " + tokOther}
	if r := f.post(list, h); r.status != http.StatusNotFound {
		t.Errorf("another principal using the session: HTTP %d %s, want 404", r.status, clipBody(r.body))
	}
	h["Authorization"] = "Bearer " + tokWatcher
	if r := f.post(list, h); r.status != http.StatusOK || r.rpc.Error != nil {
		t.Errorf("the owner using its session: HTTP %d %s", r.status, clipBody(r.body))
	}
}

// RFC 6750: a wrong token is 401 invalid_token; /metrics without observe is
// 403 insufficient_scope.
func TestPrincipalHTTPChallenges(t *testing.T) {
	f, _ := newPrincipalFixture(t)
	r := f.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, modernHeaders("ping", "Authorization", "Bearer wrong-token-0123456789"))
	if r.status != http.StatusUnauthorized || !strings.Contains(r.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("wrong token: HTTP %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	m := f.do(http.MethodGet, f.ts.URL+MetricsPath, nil, map[string]string{"Authorization": "Bearer " + tokGPU})
	if m.status != http.StatusForbidden || !strings.Contains(m.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) || !strings.Contains(string(m.body), "needs the role observe") {
		t.Errorf("/metrics by a worker: HTTP %d %q %s", m.status, m.header.Get("WWW-Authenticate"), m.body)
	}
	if m := f.do(http.MethodGet, f.ts.URL+MetricsPath, nil, map[string]string{"Authorization": "Bearer " + tokWatcher}); m.status != http.StatusOK {
		t.Errorf("/metrics by an observer: HTTP %d", m.status)
	}
}

// Rotation: replacing the principals refuses the old token at once, the new
// one works, and a call in flight (a claim-next long poll) finishes.
func TestPrincipalRotationKeepsCallsInFlight(t *testing.T) {
	f, auth := newPrincipalFixture(t)
	ctx := context.Background()
	gpu := f.client("", tokGPU, nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := gpu.CallTool(ctx, &mcp.CallToolParams{Name: manifest.ToolClaim, Arguments: map[string]any{"owner": "gpu-pool:1", "workflow_id": "release-5", "wait_ms": 20000}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	testwait.For(t, "the long poll to park", func() bool { return f.h.longPolls.Load() == 1 })
	auth.Replace(testPrincipals(t, tokRotated))
	if _, err := f.connect("", tokPlanner, nil); err == nil {
		t.Error("the old planner token still connects after the rotation")
	}
	planner := f.client("", tokRotated, nil)
	if res, _ := callTool(t, planner, manifest.ToolCreate, map[string]any{"workflow_id": "release-5", "node_id": "n"}); res.IsError {
		t.Fatalf("create with the rotated token: %s", toolText(res))
	}
	res := <-done
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	if res.IsError || out["claimed"] != true {
		t.Errorf("the long poll in flight across the rotation: %s %v", toolText(res), out)
	}
}

// Tokens appear nowhere: not in logs, metrics, errors or the database.
func TestPrincipalTokensNeverLeak(t *testing.T) {
	f, _ := newPrincipalFixture(t)
	planner := f.client("", tokPlanner, nil)
	callTool(t, planner, manifest.ToolCreate, map[string]any{"workflow_id": "release-7", "node_id": "n"})
	callTool(t, planner, manifest.ToolClaim, map[string]any{"owner": "x"})
	f.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, modernHeaders("ping", "Authorization", "Bearer "+tokPlanner+"x"))
	m := f.do(http.MethodGet, f.ts.URL+MetricsPath, nil, map[string]string{"Authorization": "Bearer " + tokWatcher})
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	db := readAll(t, f.path)
	for _, tok := range []string{tokPlanner, tokGPU, tokWatcher, tokOther} {
		for where, text := range map[string]string{"logs": f.logs.String(), "metrics": string(m.body), "database": db} {
			if strings.Contains(text, tok) {
				t.Errorf("a token appears in the %s", where)
			}
		}
	}
}

func readAll(t *testing.T, path string) string {
	t.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal"} {
		fh, err := os.Open(p)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(fh)
		fh.Close()
		all = append(all, b...)
	}
	return string(all)
}

// A principal can never widen a profile: its surface is the profile's
// narrowed by its roles.
func TestPrincipalNeverWidensTheProfile(t *testing.T) {
	prof := manifest.Profile{AllowedTools: []string{manifest.ToolInspect, manifest.ToolClaim}, Resources: false}
	f := newHTTPFixture(t, HTTPOptions{Principals: NewAuthenticator(testPrincipals(t, tokPlanner))}, func(c *Config) {
		c.Surface = manifest.NewSurface(manifest.Options{Profile: &prof})
	})
	for _, era := range []string{"", "2025-11-25"} {
		cs := f.client(era, tokPlanner, nil)
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(lt.Tools) != 1 || lt.Tools[0].Name != manifest.ToolInspect {
			t.Errorf("era %q: the planner (submit, observe) under a profile of inspect+claim lists %v, want only inspect", era, lt.Tools)
		}
		if caps := cs.InitializeResult().Capabilities; caps.Resources != nil || caps.Extensions[manifest.TasksExtension] != nil {
			t.Errorf("era %q: the profile switched resources and the Tasks extension off, but the planner sees %+v", era, caps)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: map[string]any{"workflow_id": "release-1", "node_id": "n"}})
		if err == nil && !res.IsError {
			t.Errorf("era %q: the planner created a task the profile does not offer", era)
		}
	}
}

// The 401 for a wrong token never repeats what was sent.
func TestPrincipalRefusalNeverEchoesTheToken(t *testing.T) {
	f, _ := newPrincipalFixture(t)
	sent := tokPlanner + "-but-wrong"
	r := f.post(`{"jsonrpc":"2.0","id":1,"method":"ping"}`, modernHeaders("ping", "Authorization", "Bearer "+sent))
	if r.status != http.StatusUnauthorized || strings.Contains(string(r.body), sent) || strings.Contains(f.logs.String(), sent) {
		t.Errorf("401 body or logs repeat the token: %s", r.body)
	}
}
