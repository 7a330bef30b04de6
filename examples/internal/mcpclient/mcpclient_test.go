package mcpclient

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// The tool names here are the server's.
func TestToolNamesMatchTheServer(t *testing.T) {
	for _, name := range []string{ToolCreate, ToolInspect, ToolClaim, ToolHeartbeat, ToolComplete, ToolFail, ToolCancel} {
		if !slices.Contains(manifest.AllTools, name) {
			t.Errorf("%s is not a server tool (%v)", name, manifest.AllTools)
		}
	}
	if TasksExtension != manifest.TasksExtension {
		t.Errorf("TasksExtension %q, server %q", TasksExtension, manifest.TasksExtension)
	}
}

func TestEndpointFlags(t *testing.T) {
	t.Setenv(TokenEnv, "from-env")
	for _, tc := range []struct {
		args    []string
		want    Endpoint
		wantErr string
	}{
		{args: nil, want: Endpoint{Command: []string{"graph-engineering-mcp", "serve"}}},
		{args: []string{"--server-cmd", "  ge  serve --database t.db "}, want: Endpoint{Command: []string{"ge", "serve", "--database", "t.db"}}},
		{args: []string{"--", "ge", "serve", "--database", "my tasks.db"}, want: Endpoint{Command: []string{"ge", "serve", "--database", "my tasks.db"}}},
		{args: []string{"--url", "http://127.0.0.1:7330/mcp"}, want: Endpoint{URL: "http://127.0.0.1:7330/mcp", Token: "from-env"}},
		{args: []string{"--url", "https://h/mcp", "--token", "flag"}, want: Endpoint{URL: "https://h/mcp", Token: "flag"}},
		{args: []string{"--server-cmd", " "}, wantErr: "--server-cmd is empty"},
		{args: []string{"--url", "http://h/mcp", "--", "ge"}, wantErr: "give only one of"},
		{args: []string{"--server-cmd", "ge", "--", "ge"}, wantErr: "give only one of"},
		{args: []string{"--token", "t"}, wantErr: "--token applies only with --url"},
		{args: []string{"--url", "127.0.0.1:7330"}, wantErr: "--url must be"},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		f := AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		got, err := f.Endpoint(fs.Args())
		var ue *UsageError
		switch {
		case tc.wantErr != "":
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: err %v, want a usage error naming %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case !slices.Equal(got.Command, tc.want.Command) || got.URL != tc.want.URL || got.Token != tc.want.Token:
			t.Errorf("%v: %+v, want %+v", tc.args, got, tc.want)
		}
	}
	if s := (Endpoint{URL: "http://h/mcp", Token: "secret"}).String(); strings.Contains(s, "secret") {
		t.Errorf("String leaks the token: %s", s)
	}
}

// watch records the Authorization header of every HTTP request and says when
// one first failed to connect.
type watch struct {
	mu     sync.Mutex
	auth   []string
	failed chan struct{}
	once   sync.Once
}

func (w *watch) RoundTrip(r *http.Request) (*http.Response, error) {
	w.mu.Lock()
	w.auth = append(w.auth, r.Header.Get("Authorization"))
	w.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		w.once.Do(func() { close(w.failed) })
	}
	return resp, err
}

type inspectIn struct {
	TaskID string `json:"task_id"`
}

// httpServer serves an SDK MCP server (stateless Streamable HTTP, as for the
// 2026-07-28 era) behind a bearer-token check, on l.
func httpServer(t *testing.T, l net.Listener, token string) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "http-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: ToolInspect}, func(_ context.Context, _ *mcp.CallToolRequest, in inspectIn) (*mcp.CallToolResult, Result, error) {
		if in.TaskID == "stale" {
			return nil, Result{}, errors.New("inspect task stale: stale claim on task stale: superseded generation")
		}
		return nil, Result{Task: &Task{TaskID: in.TaskID, State: "pending"}}, nil
	})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// Over HTTP every request carries the bearer token, and a worker started
// before its server connects once the server listens.
func TestHTTPBearerTokenAndLateServer(t *testing.T) {
	w := &watch{failed: make(chan struct{})}
	baseTransport = w
	t.Cleanup(func() { baseTransport = http.DefaultTransport })
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()

	e := Endpoint{URL: "http://" + addr + "/mcp", Token: "s3cret"}
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	type result struct {
		cs  *mcp.ClientSession
		err error
	}
	done := make(chan result, 1)
	go func() {
		cs, err := Connect(context.Background(), client, e, e.Transport(), 30*time.Second)
		done <- result{cs, err}
	}()
	select {
	case <-w.failed: // the first attempt found nothing listening
	case r := <-done:
		t.Fatalf("connected with nothing listening: %v", r.err)
	case <-testwait.Context(t).Done():
		t.Fatal("no connection attempt")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s was taken meanwhile: %v", addr, err)
	}
	httpServer(t, l, "s3cret")
	r := <-done
	if r.err != nil {
		t.Fatalf("connect after the server started: %v", r.err)
	}
	defer r.cs.Close()
	var out Result
	if err := CallTool(context.Background(), r.cs, ToolInspect, map[string]any{"task_id": "T1"}, &out); err != nil || out.Task == nil || out.Task.TaskID != "T1" {
		t.Fatalf("inspect: %v %+v", err, out)
	}
	err = CallTool(context.Background(), r.cs, ToolInspect, map[string]any{"task_id": "stale"}, &out)
	var te *ToolError
	if !errors.As(err, &te) || !IsStaleClaim(err) || te.Tool != ToolInspect {
		t.Fatalf("tool error: %v", err)
	}
	w.mu.Lock()
	auth := slices.Clone(w.auth)
	w.mu.Unlock()
	if len(auth) < 3 {
		t.Fatalf("only %d requests seen", len(auth))
	}
	for i, a := range auth {
		if a != "Bearer s3cret" {
			t.Errorf("request %d had Authorization %q", i, a)
		}
	}

	// A wrong token is refused at once, not retried until the timeout:
	// answering before its own 30 s connect timeout ran out tells.
	bad := Endpoint{URL: e.URL, Token: "wrong"}
	start := time.Now()
	_, err = Connect(context.Background(), client, bad, bad.Transport(), 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "is the token right?") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong token: %v", err)
	}
	if took := time.Since(start); took >= 30*time.Second {
		t.Errorf("a refused token took %v, the whole connect timeout: it was retried", took)
	}
}

// A stdio server that exits at once is reported with advice.
func TestStdioServerThatExits(t *testing.T) {
	e := Endpoint{Command: []string{"false"}, ServerStderr: io.Discard}
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	_, err := Connect(context.Background(), client, e, e.Transport(), 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "run the server command by hand") {
		t.Fatalf("err %v", err)
	}
}
