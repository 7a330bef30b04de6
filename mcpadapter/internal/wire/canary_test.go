package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// Canaries for the SDK workarounds listed in doc.go ("SDK workarounds").
// Each sends to the SDK alone (its own handlers, or its jsonrpc package)
// what a workaround of ours corrects, and asserts that the SDK still does
// what we work around. When one fails, the SDK changed: check whether the
// workaround it names can go.

// sdkPost sends body with headers straight to an SDK handler on f's server.
func sdkPost(t *testing.T, f *httpFixture, stateless bool, body string, headers map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv.mcp }, &mcp.StreamableHTTPOptions{Stateless: stateless, JSONResponse: true})
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func isJSON(rec *httptest.ResponseRecorder) bool {
	return strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && json.Valid(rec.Body.Bytes())
}

// parseHTTPMessage: the SDK answers a body that is not JSON with plain text.
func TestSDKCanaryNonJSONBodyIsPlainText(t *testing.T) {
	f := newHTTPFixture(t, HTTPOptions{})
	rec := sdkPost(t, f, true, `{"jsonrpc":`, modernHeaders("tools/list"))
	if rec.Code != http.StatusBadRequest || isJSON(rec) {
		t.Fatalf("the SDK now answers a non-JSON body with HTTP %d %q %s: parseHTTPMessage's JSON-RPC error bodies may no longer be needed", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// normalizeError and fixRPCResponse: a handler's plain Go error leaves the
// SDK as a JSON-RPC error with code 0, which JSON-RPC does not allow, and in
// the 2026-07-28 era with HTTP 200 (errors that have a code get the status
// their code calls for from the SDK itself, v1.8.0).
func TestSDKCanaryPlainErrorsGetCodeZero(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "canary", Version: "1"}, nil)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				return nil, errors.New("a plain error")
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(modernBody(1, "tools/list", nil, nil)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range modernHeaders("tools/list") {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var resp struct {
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Error == nil {
		t.Fatalf("setup: want an error from the SDK, got HTTP %d %s", rec.Code, rec.Body)
	}
	if resp.Error.Code != 0 {
		t.Fatalf("the SDK now sends a plain error with code %d: normalizeError may no longer be needed", resp.Error.Code)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("the SDK now sends a plain error with HTTP %d: fixRPCResponse's status for it may no longer be needed", rec.Code)
	}
}

// checkModernHeaders: the SDK checks Mcp-Name only on tools/call,
// resources/read and prompts/get, not on the Tasks extension's methods.
func TestSDKCanaryMcpNameUncheckedOnTasks(t *testing.T) {
	f := newHTTPFixture(t, HTTPOptions{})
	caps := map[string]any{"extensions": map[string]any{manifest.TasksExtension: map[string]any{}}}
	rec := sdkPost(t, f, true, modernBody(1, MethodTasksGet, map[string]any{"taskId": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, caps), modernHeaders(MethodTasksGet, headerName, "not-the-task"))
	if strings.Contains(rec.Body.String(), "header mismatch") || strings.Contains(rec.Body.String(), "-32020") {
		t.Fatalf("the SDK now checks Mcp-Name on tasks/get (%s): that part of checkModernHeaders may no longer be needed", rec.Body)
	}
}

// readID: the SDK keeps numeric ids as float64 and truncates them.
func TestSDKCanaryNumericIDsAreTruncated(t *testing.T) {
	msg, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`))
	if err != nil {
		t.Fatalf("the SDK now refuses id 1.5 itself (%v): readID's refusal may no longer be needed", err)
	}
	if got, _ := json.Marshal(msg.(*jsonrpc.Request).ID.Raw()); string(got) == "1.5" {
		t.Fatal("the SDK now keeps id 1.5 exactly: readID's refusal may no longer be needed")
	}
}

// encodeMessage: the SDK's encoder leaves out the id of an error response
// whose request id could not be read, where JSON-RPC requires "id": null.
func TestSDKCanaryErrorWithoutIDOmitsIt(t *testing.T) {
	b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"id"`) {
		t.Fatalf("the SDK now writes the id of such an error (%s): encodeMessage may no longer be needed", b)
	}
}

// legacyInitializeMiddleware: the SDK advertises every extension in a legacy
// initialize result, though the Tasks extension exists only in 2026-07-28.
func TestSDKCanaryLegacyInitializeAdvertisesExtensions(t *testing.T) {
	caps := &mcp.ServerCapabilities{}
	caps.AddExtension(manifest.TasksExtension, nil)
	srv := mcp.NewServer(&mcp.Implementation{Name: "canary", Version: "1"}, &mcp.ServerOptions{Capabilities: caps})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
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
