package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// authAdd runs auth add and returns the printed token.
func authAdd(t *testing.T, file, name string, flags ...string) string {
	t.Helper()
	r := runCLI(t, append([]string{"auth", "add", name, "--file", file}, flags...)...).want(t, 0)
	token := strings.TrimSpace(r.stdout)
	if err := mcpadapter.ValidateAuthToken(token); err != nil || strings.Contains(r.stderr, token) {
		t.Fatalf("auth add printed %q (%v); stderr %q", r.stdout, err, r.stderr)
	}
	return token
}

func TestAuthAddListRemove(t *testing.T) {
	file := filepath.Join(t.TempDir(), "auth.json")
	planner := authAdd(t, file, "planner", "--roles", "submit,observe", "--workflows", "release-*")
	gpu := authAdd(t, file, "gpu-pool", "--roles", "work", "--owners", "gpu-pool:*")
	if planner == gpu {
		t.Fatal("two principals got the same token")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), planner) || strings.Contains(string(b), gpu) || !strings.Contains(string(b), mcpadapter.TokenDigest(planner)) {
		t.Fatalf("the file must hold digests, never tokens:\n%s", b)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("auth file mode %v, want 0600", fi.Mode().Perm())
	}
	ps, err := mcpadapter.LoadAuthFile(file)
	if err != nil || ps.Len() != 2 {
		t.Fatalf("serve would not load what auth add wrote: %v", err)
	}
	r := runCLI(t, "auth", "list", "--file", file).want(t, 0)
	for _, want := range []string{"planner", "submit,observe", "release-*", "gpu-pool:*", "work"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("auth list lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, mcpadapter.TokenDigest(planner)) || strings.Contains(r.stdout, planner) {
		t.Errorf("auth list shows a token or digest:\n%s", r.stdout)
	}
	for name, args := range map[string][]string{
		"duplicate":    {"auth", "add", "planner", "--roles", "work", "--file", file},
		"unknown role": {"auth", "add", "x", "--roles", "admin", "--file", file},
		"bad pattern":  {"auth", "add", "y", "--roles", "work", "--owners", "a b", "--file", file},
		"no roles":     {"auth", "add", "z", "--file", file},
		"remove none":  {"auth", "remove", "nobody", "--file", file},
	} {
		r := runCLI(t, args...)
		if r.code != exitUsage {
			t.Errorf("%s: exit %d, want %d\n%s", name, r.code, exitUsage, r.stderr)
		}
	}
	if after, _ := os.ReadFile(file); string(after) != string(b) {
		t.Error("a refused auth command changed the file")
	}
	runCLI(t, "auth", "remove", "planner", "--file", file).want(t, 0)
	if ps, err := mcpadapter.LoadAuthFile(file); err != nil || ps.Len() != 1 || ps.Lookup("planner") != nil {
		t.Fatalf("after remove: %v %v", ps, err)
	}
}

func TestServeAuthFileUsageErrors(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "tasks.db")
	d := mcpadapter.TokenDigest("some-token-0123456789")
	cases := map[string]struct{ doc, want string }{
		"unknown key":  {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"], "scopes": []}]}`, `unknown field "scopes"`},
		"unknown role": {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["root"]}]}`, `unknown role "root"`},
		"bad pattern":  {`{"principals": [{"name": "a", "token_sha256": "` + d + `", "roles": ["work"], "workflows": ["a,b"]}]}`, `workflows pattern "a,b"`},
	}
	for name, c := range cases {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		os.WriteFile(file, []byte(c.doc), 0o600)
		r := runCLI(t, "serve", "--database", db, "--http", "127.0.0.1:0", "--auth-file", file).want(t, exitUsage)
		if !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "--auth-file") {
			t.Errorf("%s: stderr does not name the problem %q:\n%s", name, c.want, r.stderr)
		}
	}
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"principals": [{"name": "a", "token_sha256": "`+d+`", "roles": ["work"]}]}`), 0o600)
	r := runCLI(t, "serve", "--database", db, "--http", "127.0.0.1:0", "--auth-file", good, "--auth-token", testToken).want(t, exitUsage)
	if !strings.Contains(r.stderr, "not both") || strings.Contains(r.stderr, testToken) {
		t.Errorf("--auth-file with a token: %s", r.stderr)
	}
	if _, err := os.Stat(db); err == nil {
		t.Fatal("a refused start created the database")
	}
}

func (c *httpChild) connectAs(t *testing.T, token, version string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "auth-test", Version: "1"}, nil)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	return client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: "http://" + c.addr + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{token}}, MaxRetries: -1,
	}, opts)
}

// waitLog waits until the child's log holds want n times.
func (c *httpChild) waitLog(t *testing.T, want string, n int) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("the log to say %q %d times", want, n), func() bool { return strings.Count(c.stderr.String(), want) >= n })
}

// SIGHUP rotates a principal's token: the old one is refused at once, the
// new one works, a call in flight is unharmed, and a broken file is refused
// with the old principals kept. Tokens appear in no log and no database.
func TestServeHTTPAuthFileSIGHUPRotation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "auth.json")
	oldTok := authAdd(t, file, "planner", "--roles", "submit,observe")
	workTok := authAdd(t, file, "gpu-pool", "--roles", "work")
	c := startHTTPChild(t, nil, "--auth-file", file)
	for _, era := range []string{"", "2025-11-25"} {
		gpu, err := c.connectAs(t, workTok, era)
		if err != nil {
			t.Fatal(err)
		}
		planner, err := c.connectAs(t, oldTok, era)
		if err != nil {
			t.Fatal(err)
		}
		wf := fmt.Sprintf("wf%d", len(era))
		// A worker parks a claim-next; the rotation happens while it waits.
		claimed := make(chan string, 1)
		go func() {
			res, err := gpu.CallTool(context.Background(), &mcp.CallToolParams{Name: manifest.ToolClaim, Arguments: map[string]any{"owner": "gpu-pool:1", "workflow_id": wf, "wait_ms": 20000}})
			if err != nil {
				claimed <- err.Error()
				return
			}
			b, _ := json.Marshal(res.StructuredContent)
			claimed <- string(b)
		}()
		testwait.For(t, "the claim to get in flight", func() bool { return c.inFlightAs(t, oldTok) == "1" })
		// Rotate the planner: remove and add again, then SIGHUP.
		runCLI(t, "auth", "remove", "planner", "--file", file).want(t, 0)
		newTok := authAdd(t, file, "planner", "--roles", "submit,observe")
		reloads := strings.Count(c.stderr.String(), "SIGHUP: reloaded the auth file")
		if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		c.waitLog(t, "SIGHUP: reloaded the auth file", reloads+1)
		// The old token's open session and any new connection are refused.
		if res, err := planner.CallTool(context.Background(), &mcp.CallToolParams{Name: manifest.ToolInspect, Arguments: map[string]any{"task_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}}); err == nil {
			t.Errorf("era %q: the old token still calls after the rotation: %+v", era, res)
		}
		planner.Close()
		if cs, err := c.connectAs(t, oldTok, era); err == nil {
			cs.Close()
			t.Errorf("era %q: the old token still connects after the rotation", era)
		}
		fresh, err := c.connectAs(t, newTok, era)
		if err != nil {
			t.Fatalf("era %q: the new token: %v", era, err)
		}
		res, err := fresh.CallTool(context.Background(), &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: map[string]any{"workflow_id": wf, "node_id": "n"}})
		if err != nil || res.IsError {
			t.Fatalf("era %q: create with the new token: %v %+v", era, err, res)
		}
		// The parked claim, made before the rotation, gets the task.
		if got := testwait.Recv(t, "the claim in flight across the rotation to answer", claimed); !strings.Contains(got, `"claimed":true`) {
			t.Errorf("era %q: the claim in flight across the rotation: %s", era, got)
		}
		fresh.Close()
		gpu.Close()
		oldTok = newTok
	}
	// A broken file is refused; the principals loaded before stay.
	os.WriteFile(file, []byte(`{"principals": [{"name": "x", "roles": ["root"]}]}`), 0o600)
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	c.waitLog(t, "SIGHUP: refused to reload the auth file", 1)
	cs, err := c.connectAs(t, oldTok, "")
	if err != nil {
		t.Fatalf("after a refused reload the loaded principals must stay: %v", err)
	}
	cs.Close()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-c.exited
	db := readFileOrEmpty(c.db) + readFileOrEmpty(c.db+"-wal")
	logs := c.stderr.String()
	for _, tok := range []string{oldTok, workTok} {
		if strings.Contains(logs, tok) || strings.Contains(db, tok) {
			t.Errorf("a token appears in the logs or the database")
		}
	}
	if !strings.Contains(db, "planner") {
		t.Error("the database does not record the creating principal")
	}
	if r := runCLI(t, "tasks", "list", "--database", c.db, "--json").want(t, 0); strings.Count(r.stdout, `"created_by":"planner"`)+strings.Count(r.stdout, `"created_by": "planner"`) != 2 {
		t.Errorf("tasks list --json does not show the creator of both tasks:\n%s", r.stdout)
	}
}

// inFlightAs reads the in-flight gauge from /metrics with token.
func (c *httpChild) inFlightAs(t *testing.T, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+c.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^graph_engineering_http_requests_in_flight (\S+)$`).FindStringSubmatch(string(body))
	if m == nil {
		t.Fatalf("/metrics (HTTP %d) lacks the in-flight gauge", resp.StatusCode)
	}
	return m[1]
}

func readFileOrEmpty(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// serve --principal NAME --auth-file FILE narrows stdio to that principal.
func TestServeStdioAsAPrincipal(t *testing.T) {
	dir := t.TempDir()
	file, db := filepath.Join(dir, "auth.json"), filepath.Join(dir, "tasks.db")
	authAdd(t, file, "watcher", "--roles", "observe")
	for _, e := range []string{"GRAPH_ENGINEERING_HTTP", "GRAPH_ENGINEERING_AUTH_FILE", "GRAPH_ENGINEERING_PRINCIPAL"} {
		t.Setenv(e, "")
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"n"},` + meta + `}}` + "\n"
	var out, errb strings.Builder
	code := run(context.Background(), []string{"graph-engineering-mcp", "serve", "--database", db, "--principal", "watcher", "--auth-file", file}, strings.NewReader(in), &out, &errb)
	if code != 0 || !strings.Contains(out.String(), `"kind":"forbidden"`) || !strings.Contains(out.String(), "needs the role submit") {
		t.Fatalf("exit %d, stdout %s\nstderr %s", code, out.String(), errb.String())
	}
	for name, args := range map[string][]string{
		"unknown principal": {"serve", "--database", db, "--principal", "nobody", "--auth-file", file},
		"no auth file":      {"serve", "--database", db, "--principal", "watcher"},
		"with --http":       {"serve", "--database", db, "--http", "127.0.0.1:0", "--principal", "watcher", "--auth-file", file},
	} {
		if r := runCLI(t, args...); r.code != exitUsage {
			t.Errorf("%s: exit %d, want %d\n%s", name, r.code, exitUsage, r.stderr)
		}
	}
}
