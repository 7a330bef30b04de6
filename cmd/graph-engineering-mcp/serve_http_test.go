package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

const testToken = "http-test-token-9f8e7d6c5b4a"

// runCLI runs args in-process with a clean HTTP environment.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	for _, e := range []string{"GRAPH_ENGINEERING_HTTP", "GRAPH_ENGINEERING_AUTH_TOKEN", "GRAPH_ENGINEERING_AUTH_TOKEN_FILE", "GRAPH_ENGINEERING_AUTH_FILE", "GRAPH_ENGINEERING_ALLOW_ORIGIN"} {
		t.Setenv(e, "")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"graph-engineering-mcp"}, args...), strings.NewReader(""), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func TestServeHTTPRefusesNonLoopbackWithoutAToken(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:7330", "example.com:7330"} {
		r := runCLI(t, "serve", "--database", db, "--http", addr).want(t, exitUsage)
		if !strings.Contains(r.stderr, "without an auth token") || !strings.Contains(r.stderr, "GRAPH_ENGINEERING_AUTH_TOKEN") {
			t.Errorf("--http %s: the refusal does not say why or what to do:\n%s", addr, r.stderr)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Fatal("a refused start created the database")
	}
}

func TestServeHTTPUsageErrors(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "tasks.db")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	cases := map[string][]string{
		"short token":          {"--auth-token", "tiny-secret"},
		"token with a space":   {"--auth-token", "has a space in the token"},
		"token twice":          {"--auth-token", testToken, "--auth-token-file", tokenFile},
		"missing token file":   {"--auth-token-file", filepath.Join(dir, "nope")},
		"empty token file":     {"--auth-token-file", empty},
		"call timeout too low": {"--call-timeout", "30s"},
		"zero concurrency":     {"--max-concurrent", "0"},
		"zero sessions":        {"--max-sessions", "0"},
		"zero connections":     {"--max-connections", "0"},
		"negative admission":   {"--admission-wait", "-1s"},
		"admission too long":   {"--admission-wait", "2m"},
		"zero session timeout": {"--session-idle-timeout", "0s"},
		"origin with a path":   {"--allow-origin", "https://x.example/app"},
		"origin without host":  {"--allow-origin", "x.example"},
	}
	for name, extra := range cases {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"serve", "--database", db, "--http", "127.0.0.1:0"}, extra...)
			r := runCLI(t, args...).want(t, exitUsage)
			if strings.Contains(r.stderr, "tiny-secret") || strings.Contains(r.stderr, "has a space") || strings.Contains(r.stderr, testToken) {
				t.Fatalf("the error shows the token:\n%s", r.stderr)
			}
		})
	}
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:port", "::1:7330:"} {
		runCLI(t, "serve", "--database", db, "--http", addr).want(t, exitUsage)
	}
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8080": "127.0.0.1:8080", ":8080": "127.0.0.1:8080", "localhost:9": "127.0.0.1:9",
		"127.0.0.1": "127.0.0.1:7330", "localhost": "127.0.0.1:7330", "[::1]:80": "[::1]:80", "::1": "[::1]:7330",
		"[::1]": "[::1]:7330", "0.0.0.0:7330": "0.0.0.0:7330", "127.0.0.1:0": "127.0.0.1:0",
	} {
		got, err := listenAddr(in)
		if err != nil || got != want {
			t.Errorf("listenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestHelpDoesNotShowTheToken(t *testing.T) {
	var out, errb bytes.Buffer
	t.Setenv("GRAPH_ENGINEERING_AUTH_TOKEN", testToken)
	run(context.Background(), []string{"graph-engineering-mcp", "serve", "--help"}, strings.NewReader(""), &out, &errb)
	if !strings.Contains(out.String(), "--auth-token") {
		t.Fatalf("help does not list --auth-token:\n%s", out.String())
	}
	if strings.Contains(out.String()+errb.String(), testToken) {
		t.Fatalf("help shows the token from the environment:\n%s", out.String())
	}
}

func TestManifestCommandMatchesTheHTTPServer(t *testing.T) {
	plain := runCLI(t, "manifest").want(t, exitOK).stdout
	withHTTP := runCLI(t, "manifest", "--http", "127.0.0.1:7330").want(t, exitOK).stdout
	if strings.Contains(plain, "maxHttpBodyBytes") || !strings.Contains(withHTTP, `"maxHttpBodyBytes":524288`) {
		t.Fatalf("manifest limits: stdio %s\nhttp %s", plain, withHTTP)
	}
}

// httpChild is the built binary serving HTTP as a child process.
type httpChild struct {
	cmd    *exec.Cmd
	addr   string
	db     string
	stderr *testwait.Buffer
	exited chan struct{} // closed when the process has exited
	err    error         // its exit error, set before exited closes
}

var addrRE = regexp.MustCompile(`msg="serving MCP over Streamable HTTP" addr=(\S+)`)

func startHTTPChild(t *testing.T, extraEnv []string, args ...string) *httpChild {
	t.Helper()
	db := filepath.Join(t.TempDir(), "tasks.db")
	cmd := exec.Command(builtBinary(t), append([]string{"serve", "--database", db, "--http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), extraEnv...)
	pr, pw := io.Pipe()
	c := &httpChild{cmd: cmd, db: db, stderr: &testwait.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(c.stderr, pw)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = cmd.Wait(); pw.Close(); close(c.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.exited
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case c.addr = <-found:
	case <-c.exited:
		t.Fatalf("the server exited (%v) before serving:\n%s", c.err, c.stderr.String())
	case <-testwait.Context(t).Done():
		t.Fatalf("the server did not start:\n%s", c.stderr.String())
	}
	// Ready when /healthz says ok.
	testwait.For(t, "/healthz to answer ok", func() bool {
		resp, err := http.Get("http://" + c.addr + "/healthz")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && string(body) == "ok\n"
	})
	return c
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func (c *httpChild) connect(t *testing.T, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "http-child-test", Version: "1"}, nil)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: "http://" + c.addr + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{testToken}}, MaxRetries: -1,
	}, opts)
	if err != nil {
		t.Fatalf("connect %q: %v\n%s", version, err, c.stderr.String())
	}
	return cs
}

// inFlight reads graph_engineering_http_requests_in_flight from /metrics.
func (c *httpChild) inFlight(t *testing.T) string {
	t.Helper()
	return c.inFlightAs(t, testToken)
}

func TestServeHTTPBinaryBothErasAndSIGTERM(t *testing.T) {
	c := startHTTPChild(t, []string{"GRAPH_ENGINEERING_AUTH_TOKEN=" + testToken}, "--log-level", "debug")
	if resp, err := http.Post("http://"+c.addr+"/mcp", "application/json", strings.NewReader(`{}`)); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without the token: %v %v, want 401", resp, err)
	}
	modern := c.connect(t, "")
	legacy := c.connect(t, "2025-11-25")
	if modern.ID() != "" || legacy.ID() == "" {
		t.Fatalf("session ids: modern %q (want none), legacy %q (want one)", modern.ID(), legacy.ID())
	}
	for i, cs := range []*mcp.ClientSession{modern, legacy} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: map[string]any{"workflow_id": "wf", "node_id": fmt.Sprint("n", i)}})
		if err != nil || res.IsError {
			t.Fatalf("create over %q: %v %+v", cs.InitializeResult().ProtocolVersion, err, res)
		}
	}
	// A claim-next in flight when SIGTERM arrives still gets its answer.
	result := make(chan error, 1)
	go func() {
		res, err := legacy.CallTool(context.Background(), &mcp.CallToolParams{Name: manifest.ToolClaim, Arguments: map[string]any{"owner": "w", "workflow_id": "empty", "wait_ms": 1500}})
		if err == nil && (res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "claimed:false")) {
			err = fmt.Errorf("claim returned %+v", res.StructuredContent)
		}
		result <- err
	}()
	testwait.For(t, "the claim to get in flight", func() bool { return c.inFlight(t) == "1" })
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-result; err != nil {
		t.Fatalf("the call in flight at SIGTERM: %v\n%s", err, c.stderr.String())
	}
	select {
	case <-c.exited:
		if c.err != nil {
			t.Fatalf("exit: %v, want status 0\n%s", c.err, c.stderr.String())
		}
	case <-testwait.Context(t).Done():
		t.Fatalf("the server did not exit after SIGTERM\n%s", c.stderr.String())
	}
	logs := c.stderr.String()
	if !strings.Contains(logs, "database closed cleanly") {
		t.Fatalf("no clean-close log:\n%s", logs)
	}
	if strings.Contains(logs, testToken) {
		t.Fatalf("the token appears in the logs:\n%s", logs)
	}
	if fi, err := os.Stat(c.db + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("the WAL holds %d bytes after exit; it was not checkpointed", fi.Size())
	}
	st, err := taskgraph.Open(context.Background(), c.db, taskgraph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	chk, err := st.Check(context.Background())
	if err != nil || !chk.OK() {
		t.Fatalf("integrity: %+v %v", chk, err)
	}
	if counts, err := st.CountByState(context.Background()); err != nil || counts[taskgraph.StatePending] != 2 {
		t.Fatalf("tasks after restart: %v %v, want the 2 created", counts, err)
	}
}
