// Package mcpclient is the connection plumbing shared by the example
// programs: it turns the --server-cmd / --url / --token flags into an MCP
// transport (stdio to a spawned "graph-engineering-mcp serve", or Streamable
// HTTP with a bearer token), and calls the graph_task_* tools with their
// structured results decoded and tool errors turned into Go errors.
//
// It uses only the public go-sdk client API, so a worker written outside this
// repository can copy it as is.
package mcpclient

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names of the graph-engineering server (MCP.md §3).
const (
	ToolCreate    = "graph_task_create"
	ToolInspect   = "graph_task_inspect"
	ToolClaim     = "graph_task_claim"
	ToolHeartbeat = "graph_task_heartbeat"
	ToolComplete  = "graph_task_complete"
	ToolFail      = "graph_task_fail"
	ToolCancel    = "graph_task_cancel"
)

// TasksExtension is the MCP Tasks extension identifier (MCP.md §7).
const TasksExtension = "io.modelcontextprotocol/tasks"

// TokenEnv is the environment variable that supplies the bearer token when
// --token is not given.
const TokenEnv = "GRAPH_ENGINEERING_AUTH_TOKEN"

// DefaultServerCommand is the server started over stdio when neither
// --server-cmd, --url nor a command after "--" is given: the server on its
// default database (MCP.md §11), found on PATH.
const DefaultServerCommand = "graph-engineering-mcp serve"

// Endpoint says how to reach the server: exactly one of Command (stdio) or
// URL (Streamable HTTP) is set.
type Endpoint struct {
	// Command is the server command line, started as a child process that
	// speaks MCP on its stdin and stdout.
	Command []string
	// URL is the Streamable HTTP endpoint, e.g. http://127.0.0.1:7330/mcp.
	URL string
	// Token is the bearer token sent with every HTTP request; empty sends
	// none. It is never logged.
	Token string
	// ServerStderr receives the child server's log (stdio only); nil
	// discards it.
	ServerStderr io.Writer
}

// String describes the endpoint for logs, without the token.
func (e Endpoint) String() string {
	if e.URL != "" {
		if e.Token != "" {
			return e.URL + " (bearer token set)"
		}
		return e.URL
	}
	return "stdio: " + strings.Join(e.Command, " ")
}

// Flags holds the connection flags of a command line.
type Flags struct {
	serverCmd string
	url       string
	token     string
}

// AddFlags registers --server-cmd, --url and --token on fs.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.serverCmd, "server-cmd", "", `server command to start and talk to over stdio, split on spaces (default "`+DefaultServerCommand+`"); a command with quoted arguments goes after "--" instead`)
	fs.StringVar(&f.url, "url", "", "Streamable HTTP endpoint of a running server, e.g. http://127.0.0.1:7330/mcp")
	fs.StringVar(&f.token, "token", "", "bearer token for --url (default $"+TokenEnv+")")
	return f
}

// UsageError is a mistake in how a command was called (exit code 2).
type UsageError struct{ Msg string }

// Error implements error.
func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// Endpoint validates the flags and returns the endpoint. rest are the
// command-line arguments left after the flags: a server command given after
// "--" (e.g. `worker -- graph-engineering-mcp serve --database "my tasks.db"`).
func (f *Flags) Endpoint(rest []string) (Endpoint, error) {
	set := 0
	for _, given := range []bool{f.serverCmd != "", f.url != "", len(rest) > 0} {
		if given {
			set++
		}
	}
	if set > 1 {
		return Endpoint{}, Usagef(`give only one of --server-cmd, --url or a server command after "--"`)
	}
	if f.token != "" && f.url == "" {
		return Endpoint{}, Usagef("--token applies only with --url (a stdio server is a child process and needs no token)")
	}
	if f.url != "" {
		u, err := url.Parse(f.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Endpoint{}, Usagef("--url must be an http:// or https:// URL such as http://127.0.0.1:7330/mcp (got %q)", f.url)
		}
		token := f.token
		if token == "" {
			token = os.Getenv(TokenEnv)
		}
		return Endpoint{URL: f.url, Token: token}, nil
	}
	command := rest
	if len(command) == 0 {
		line := f.serverCmd
		if line == "" {
			line = DefaultServerCommand
		}
		command = strings.Fields(line)
	}
	if len(command) == 0 {
		return Endpoint{}, Usagef("--server-cmd is empty; give the server command, e.g. --server-cmd %q", DefaultServerCommand+" --database tasks.db")
	}
	return Endpoint{Command: command}, nil
}

// Transport returns a new MCP transport for the endpoint. Each stdio
// transport starts its own server process when connected.
func (e Endpoint) Transport() mcp.Transport {
	if e.URL != "" {
		return &mcp.StreamableClientTransport{
			Endpoint:   e.URL,
			HTTPClient: &http.Client{Transport: bearer{token: e.Token, next: baseTransport}},
			// The 2026-07-28 era has no standalone SSE stream; the server never
			// sends unsolicited messages to these clients.
			DisableStandaloneSSE: true,
		}
	}
	cmd := exec.Command(e.Command[0], e.Command[1:]...)
	cmd.Stderr = e.ServerStderr
	detachFromTerminalSignals(cmd)
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}
}

// HTTPClient returns an HTTP client that sends the endpoint's bearer
// token, for requests the SDK cannot make (subscriptions/listen); nil for
// a stdio endpoint.
func (e Endpoint) HTTPClient() *http.Client {
	if e.URL == "" {
		return nil
	}
	return &http.Client{Transport: bearer{token: e.Token, next: baseTransport}}
}

// baseTransport carries the HTTP requests; tests wrap it to watch them.
var baseTransport http.RoundTripper = http.DefaultTransport

// bearer adds "Authorization: Bearer <token>" to every request, and the
// Mcp-Name routing header (= params.taskId) that the Tasks extension
// requires on tasks/get, tasks/update and tasks/cancel: the SDK client sets
// it only for tools/call, resources/read and prompts/get.
type bearer struct {
	token string
	next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	needsName := strings.HasPrefix(r.Header.Get("Mcp-Method"), "tasks/") && r.Header.Get("Mcp-Name") == "" && r.Body != nil
	if b.token == "" && !needsName {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	if needsName {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		var msg struct {
			Params struct {
				TaskID string `json:"taskId"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Params.TaskID != "" {
			r.Header.Set("Mcp-Name", msg.Params.TaskID)
		}
	}
	return b.next.RoundTrip(r)
}

// Connect connects client to the endpoint over t (normally e.Transport()),
// bounded by timeout, and explains a failure. An HTTP server that refuses
// the connection is tried again until timeout, so a worker may start before
// its server is listening (or while it restarts).
func Connect(ctx context.Context, client *mcp.Client, e Endpoint, t mcp.Transport, timeout time.Duration) (*mcp.ClientSession, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for pause := 100 * time.Millisecond; ; pause = min(2*pause, 2*time.Second) {
		cs, err := client.Connect(cctx, t, nil)
		if err == nil {
			return cs, nil
		}
		if e.URL == "" || !refused(err) {
			return nil, explainConnect(e, err)
		}
		timer := time.NewTimer(pause)
		select {
		case <-timer.C:
		case <-cctx.Done():
			timer.Stop()
			return nil, explainConnect(e, err)
		}
	}
}

// refused reports whether err is a refused TCP connection: nothing listens
// yet.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused")
}

// explainConnect wraps a connection failure with what to check.
func explainConnect(e Endpoint, err error) error {
	var hint string
	var execErr *exec.Error
	switch {
	case errors.As(err, &execErr), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		hint = "; put graph-engineering-mcp on PATH or give its path in --server-cmd"
	case e.URL != "":
		hint = "; is the server running with serve --http, and is the token right?"
	default:
		hint = "; run the server command by hand to see why it exits"
	}
	return fmt.Errorf("connect to %s: %w%s", e, err, hint)
}

// ToolError is a tool result with isError: the server rejected the call and
// said why in Text (MCP.md §4, "Tool errors").
type ToolError struct {
	Tool string
	Text string
	// Kind, Reason and Retryable are the result's
	// _meta["graph-engineering/error"] (MCP.md §4): Kind is "invalid",
	// "not_found", "conflict", "stale_claim", "unavailable" or
	// "forbidden"; Reason the stale-claim or unavailable reason.
	Kind      string
	Reason    string
	Retryable bool
}

// RetryWithRequestID reports whether the call this error answers may be
// repeated with the same request_id (MCP.md §4, "Request ids"): the
// database was briefly unavailable (busy, unreachable) or the answer was
// lost (unknown_outcome, when the call may have been applied). Repeating
// it with its request_id is safe either way: a write that was applied is
// answered as it was, never applied twice.
func (e *ToolError) RetryWithRequestID() bool {
	return e.Kind == "unavailable" && (e.Retryable || e.Reason == "unknown_outcome")
}

// Error implements error: the tool and the server's reason.
func (e *ToolError) Error() string { return e.Tool + ": " + e.Text }

// StaleClaim reports whether the server refused a holder write because the
// caller no longer holds the claim (finished, superseded, requeued, expired…).
// The worker must stop work on the task and never write to it again.
func (e *ToolError) StaleClaim() bool { return strings.Contains(e.Text, "stale claim") }

// IsStaleClaim reports whether err is a *ToolError for a stale claim.
func IsStaleClaim(err error) bool {
	var te *ToolError
	return errors.As(err, &te) && te.StaleClaim()
}

// CallTool calls a graph_task_* tool and decodes its structured content into
// out (which may be nil). A tool error is returned as *ToolError; a protocol
// or transport failure as the SDK's error, wrapped.
func CallTool(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any, out any) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return fmt.Errorf("call %s: %w", tool, err)
	}
	if res.IsError {
		te := &ToolError{Tool: tool, Text: TextOf(res.Content)}
		if m, ok := res.Meta["graph-engineering/error"].(map[string]any); ok {
			te.Kind, _ = m["kind"].(string)
			te.Reason, _ = m["reason"].(string)
			te.Retryable, _ = m["retryable"].(bool)
		}
		return te
	}
	if out == nil {
		return nil
	}
	if res.StructuredContent == nil {
		return fmt.Errorf("call %s: the result has no structured content; is this a graph-engineering server?", tool)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return fmt.Errorf("call %s: re-encode structured content: %w", tool, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("call %s: decode structured content: %w", tool, err)
	}
	return nil
}

// NewRequestID returns a random request id (a UUID, version 4): pass it as
// a write's request_id, and the same one again when retrying that write.
func NewRequestID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on a supported system
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// TextOf joins the text blocks of a tool result.
func TextOf(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Task is the task object of the tool results (MCP.md §3, "The task
// object").
type Task struct {
	TaskID         string          `json:"task_id"`
	WorkflowID     string          `json:"workflow_id"`
	NodeID         string          `json:"node_id"`
	State          string          `json:"state"`
	Payload        json.RawMessage `json:"payload"`
	DependsOn      []string        `json:"depends_on"`
	Owner          *string         `json:"owner"`
	Generation     int64           `json:"generation"`
	LeaseExpiresAt *string         `json:"lease_expires_at"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"max_attempts"`
	Result         json.RawMessage `json:"result"`
	Error          *string         `json:"error"`
	StatusMessage  string          `json:"status_message"`
}

// Terminal reports whether the task has finished: completed, failed or
// cancelled.
func (t Task) Terminal() bool {
	return t.State == "completed" || t.State == "failed" || t.State == "cancelled"
}

// Lease is the claim a graph_task_claim returns; its fields are passed back
// on every holder write.
type Lease struct {
	Owner          string `json:"owner"`
	Generation     int64  `json:"generation"`
	ClaimToken     string `json:"claim_token"`
	LeaseExpiresAt string `json:"lease_expires_at"`
}

// Dependency is one direct dependency of a task, as graph_task_claim and
// graph_task_inspect return it: Result is null until it completed, and null
// with ResultOmitted when the answer's bound on results left it out (inspect
// TaskID to read it).
type Dependency struct {
	NodeID        string          `json:"node_id"`
	TaskID        string          `json:"task_id"`
	State         string          `json:"state"`
	Result        json.RawMessage `json:"result"`
	ResultOmitted bool            `json:"result_omitted"`
}

// Result is the structured content of every graph_task_* tool.
type Result struct {
	Task    *Task  `json:"task"`
	Created *bool  `json:"created,omitempty"`
	Claimed *bool  `json:"claimed,omitempty"`
	Lease   *Lease `json:"lease,omitempty"`
	// Dependencies: graph_task_inspect, and graph_task_claim when it claimed.
	Dependencies []Dependency `json:"dependencies,omitempty"`
	// ClaimedNext and Next: graph_task_complete with claim_next. Next is
	// the claim's answer as graph_task_claim gives it, nil when nothing
	// was claimable.
	ClaimedNext *bool      `json:"claimed_next,omitempty"`
	Next        *NextClaim `json:"next,omitempty"`
}

// NextClaim is the next of graph_task_complete with claim_next: the answer
// of the claim it made (a type of its own: Result cannot hold itself, as
// the SDK derives schemas from these types).
type NextClaim struct {
	Task         *Task        `json:"task"`
	Claimed      *bool        `json:"claimed,omitempty"`
	Lease        *Lease       `json:"lease,omitempty"`
	Dependencies []Dependency `json:"dependencies,omitempty"`
}

// LockedWriter returns w made safe for concurrent writers: a program's own
// log and a child server's stderr, which exec copies from another goroutine
// unless w is an *os.File.
func LockedWriter(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok {
		return f
	}
	return &lockedWriter{w: w}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer, one writer at a time.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
