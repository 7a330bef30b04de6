package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// Canaries for the SDK workarounds listed in doc.go. Each sends to the SDK
// alone (a bare SDK server, its handlers, its jsonrpc package) what a
// workaround of ours corrects, and asserts that the SDK still does what we
// work around. When one fails, the SDK changed: check whether the
// workaround it names can go.

// canaryServer is a bare SDK server with one tool, echo, and the Tasks
// extension's tasks/get.
func canaryServer(t *testing.T) *mcp.Server {
	t.Helper()
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	caps.AddExtension(manifest.TasksExtension, nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "canary", Version: "1"}, &mcp.ServerOptions{Capabilities: caps})
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	type taskParams struct {
		mcp.ParamsBase
		TaskID string `json:"taskId"`
	}
	type taskResult struct {
		mcp.ResultBase
		ResultType string `json:"resultType"`
	}
	if err := mcp.AddReceivingCustomMethod(srv, methodTasksGet, func(context.Context, *mcp.ServerSession, *taskParams) (*taskResult, error) {
		return &taskResult{ResultType: "complete"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return srv
}

// modernBody is a 2026-07-28 request with params and the per-request _meta.
func modernBody(id any, method string, params map[string]any) string {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{MetaProtocolVersion: manifest.ModernVersion, MetaClientCapabilities: map[string]any{},
		"io.modelcontextprotocol/clientInfo": map[string]any{"name": "canary", "version": "1"}}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return string(b)
}

// sdkPost sends body with the 2026-07-28 headers of method (and extra ones)
// straight to a stateless SDK handler of srv.
func sdkPost(t *testing.T, srv *mcp.Server, body, method string, extra map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(HeaderProtocolVersion, manifest.ModernVersion)
	req.Header.Set(HeaderMethod, method)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func isJSON(rec *httptest.ResponseRecorder) bool {
	return strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && json.Valid(rec.Body.Bytes())
}

// Parse (HTTP): the SDK answers a body that is not JSON with plain text.
func TestSDKCanaryNonJSONBodyIsPlainText(t *testing.T) {
	rec := sdkPost(t, canaryServer(t), `{"jsonrpc":`, "tools/list", nil)
	if rec.Code != http.StatusBadRequest || isJSON(rec) {
		t.Fatalf("the SDK now answers a non-JSON body with HTTP %d %q %s: Parse's JSON-RPC error bodies may no longer be needed", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// DecodeLine and LineReader (stdio): the SDK's stdio transport ends the
// session at a line that is not JSON, and answers nothing.
func TestSDKCanaryNonJSONLineEndsTheSession(t *testing.T) {
	in := strings.NewReader("{bad\n" + `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	var out bytes.Buffer
	ss, err := canaryServer(t).Connect(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{&out}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The input ends after the ping, so the session ends either way; a
	// session that survived the malformed line would have answered the ping.
	_ = ss.Wait()
	if out.Len() != 0 {
		t.Fatalf("the SDK now answers after a malformed line (%s): DecodeLine's answers may no longer be needed", out.String())
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// NormalizeError and FixWriter: a handler's plain Go error leaves the SDK as
// a JSON-RPC error with code 0, which JSON-RPC does not allow, and in the
// 2026-07-28 era with HTTP 200 (errors that have a code get the status their
// code calls for from the SDK itself, v1.8.0).
func TestSDKCanaryPlainErrorsGetCodeZero(t *testing.T) {
	srv := canaryServer(t)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return nil, errors.New("a plain error")
			}
			return next(ctx, method, req)
		}
	})
	rec := sdkPost(t, srv, modernBody(1, "tools/list", nil), "tools/list", nil)
	var resp struct {
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Error == nil {
		t.Fatalf("setup: want an error from the SDK, got HTTP %d %s", rec.Code, rec.Body)
	}
	if resp.Error.Code != 0 {
		t.Fatalf("the SDK now sends a plain error with code %d: NormalizeError may no longer be needed", resp.Error.Code)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("the SDK now sends a plain error with HTTP %d: FixWriter's status for it may no longer be needed", rec.Code)
	}
}

// CheckModernHeaders: the SDK checks Mcp-Name only on tools/call,
// resources/read and prompts/get, not on the Tasks extension's methods.
func TestSDKCanaryMcpNameUncheckedOnTasks(t *testing.T) {
	caps := map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}
	body := modernBody(1, methodTasksGet, map[string]any{"taskId": "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
	var m map[string]any
	json.Unmarshal([]byte(body), &m)
	m["params"].(map[string]any)["_meta"].(map[string]any)[MetaClientCapabilities] = caps
	b, _ := json.Marshal(m)
	rec := sdkPost(t, canaryServer(t), string(b), methodTasksGet, map[string]string{HeaderName: "not-the-task"})
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "-32020") {
		t.Fatalf("the SDK now checks Mcp-Name on tasks/get (HTTP %d %s): that part of CheckModernHeaders may no longer be needed", rec.Code, rec.Body)
	}
}

// CheckModernHeaders: the SDK compares a =?base64?…?= Mcp-Name literally.
func TestSDKCanaryEncodedMcpNameIsComparedLiterally(t *testing.T) {
	rec := sdkPost(t, canaryServer(t), modernBody(1, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{}}), "tools/call",
		map[string]string{HeaderName: "=?base64?ZWNobw==?="})
	if !strings.Contains(rec.Body.String(), "-32020") {
		t.Fatalf("the SDK now decodes an encoded Mcp-Name (HTTP %d %s): that part of CheckModernHeaders may no longer be needed", rec.Code, rec.Body)
	}
}

// ReadID: the SDK keeps numeric ids as float64 and truncates them.
func TestSDKCanaryNumericIDsAreTruncated(t *testing.T) {
	msg, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`))
	if err != nil {
		t.Fatalf("the SDK now refuses id 1.5 itself (%v): ReadID's refusal may no longer be needed", err)
	}
	if got, _ := json.Marshal(msg.(*jsonrpc.Request).ID.Raw()); string(got) == "1.5" {
		t.Fatal("the SDK now keeps id 1.5 exactly: ReadID's refusal may no longer be needed")
	}
}

// EncodeMessage: the SDK's encoder leaves out the id of an error response
// whose request id could not be read, where JSON-RPC requires "id": null.
func TestSDKCanaryErrorWithoutIDOmitsIt(t *testing.T) {
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"id"`) {
		t.Fatalf("the SDK now writes the id of such an error (%s): EncodeMessage may no longer be needed", b)
	}
}

// The MCP server's legacyInitializeMiddleware: the SDK advertises every
// extension in a legacy initialize result, though the Tasks extension exists
// only in 2026-07-28.
func TestSDKCanaryLegacyInitializeAdvertisesExtensions(t *testing.T) {
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := canaryServer(t).Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "canary", Version: "1"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if cs.InitializeResult().Capabilities.Extensions[manifest.TasksExtension] == nil {
		t.Fatal("the SDK no longer advertises extensions in a legacy initialize result: legacyInitializeMiddleware may no longer be needed")
	}
}

// AcceptFailure: the SDK refuses a bad Accept with a plain-text 400.
func TestSDKCanaryBadAcceptIsPlainText(t *testing.T) {
	rec := sdkPost(t, canaryServer(t), modernBody(1, "tools/list", nil), "tools/list", map[string]string{"Accept": "text/html"})
	if rec.Code != http.StatusBadRequest || isJSON(rec) {
		t.Fatalf("the SDK now answers a bad Accept with HTTP %d %q %s: AcceptFailure may no longer be needed", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// ModernResultBody: the SDK fails its Mcp-Name check on arguments holding a
// number beyond float64 range, with a misleading -32020.
func TestSDKCanaryOverflowingArgumentsFailTheNameCheck(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"x":1e400},"_meta":{"` + MetaProtocolVersion + `":"` + manifest.ModernVersion + `","` + MetaClientCapabilities + `":{}}}}`
	rec := sdkPost(t, canaryServer(t), body, "tools/call", map[string]string{HeaderName: "echo"})
	if !strings.Contains(rec.Body.String(), "failed to extract name") {
		t.Fatalf("the SDK no longer fails on an overflowing argument (HTTP %d %s): the front's overflow answer may no longer be needed", rec.Code, rec.Body)
	}
}

// HeaderLastEventID: the SDK refuses a POST that carries Last-Event-ID.
func TestSDKCanaryLastEventIDOnPostIsRefused(t *testing.T) {
	rec := sdkPost(t, canaryServer(t), modernBody(1, "tools/list", nil), "tools/list", map[string]string{HeaderLastEventID: "1"})
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("the SDK now accepts a POST with Last-Event-ID (HTTP %d %s): the front's removal of the header may no longer be needed", rec.Code, rec.Body)
	}
}

// HeaderInbound: the SDK runs a legacy session's calls in the session's
// context, which began as its initialize request's, so a value a later
// request's context carries never reaches its call; only the request's
// header does (RequestExtra.Header).
func TestSDKCanaryLegacyCallsRunInTheSessionContext(t *testing.T) {
	type key struct{}
	srv := canaryServer(t)
	got := make(chan any, 4)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				got <- ctx.Value(key{})
				got <- req.GetExtra().Header.Get("X-Canary")
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	post := func(body, sid, value string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Canary", value)
		if sid != "" {
			req.Header.Set(HeaderSessionID, sid)
			req.Header.Set(HeaderProtocolVersion, "2025-11-25")
		}
		req = req.WithContext(context.WithValue(req.Context(), key{}, value))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	init := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, "", "initialize")
	sid := init.Header().Get(HeaderSessionID)
	if sid == "" {
		t.Fatalf("setup: no session (HTTP %d %s)", init.Code, init.Body)
	}
	defer func() { // end the session, so that its goroutines end with the test
		req := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
		req.Header.Set(HeaderSessionID, sid)
		req.Header.Set(HeaderProtocolVersion, "2025-11-25")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 300 {
			t.Errorf("DELETE of the session: HTTP %d %s", rec.Code, rec.Body)
		}
	}()
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid, "initialized")
	if rec := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, sid, "call"); rec.Code != http.StatusOK {
		t.Fatalf("setup: tools/list HTTP %d %s", rec.Code, rec.Body)
	}
	ctxValue, header := <-got, <-got
	if ctxValue == "call" {
		t.Fatal("the SDK now runs a legacy call in its request's context: HeaderInbound may no longer be needed")
	}
	if header != "call" {
		t.Fatalf("the SDK no longer hands a call its request's header (got %q): HeaderInbound cannot carry the inbound record", header)
	}
}
