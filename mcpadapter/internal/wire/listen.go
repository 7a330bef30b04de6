package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// subscriptions/listen with the Tasks extension's taskIds (2026-07-28): the
// SDK (v1.8.0) serves subscriptions/listen itself, but its
// NotificationSubscriptions has no taskIds (decoding drops them), so it can
// neither acknowledge nor refuse them, and it has no notifications/tasks to
// send. The MCP server therefore owns that stream: it reads the request
// here (ParseListen), and writes the acknowledgement and the notifications
// as the notes of this file, on stdio as lines and over HTTP as an SSE
// stream (WriteSSE). Canary: TestSDKCanaryListenDropsTaskIDs. Upstream:
// modelcontextprotocol/go-sdk#1146 (open).

// Method names and _meta keys of subscriptions.
const (
	MethodListen        = "subscriptions/listen"
	MethodAcknowledged  = "notifications/subscriptions/acknowledged"
	MethodTaskStatus    = "notifications/tasks"
	MethodCancelled     = "notifications/cancelled"
	MetaSubscriptionID  = "io.modelcontextprotocol/subscriptionId"
	ExtensionKey        = "extensions"
	sseEventMessage     = "event: message\ndata: "
	sseEventTerminator  = "\n\n"
	listenParamsExample = `{"notifications": {"taskIds": ["<task id>"]}}`
)

// ListenFilter is the notifications filter of a subscriptions/listen
// request: the revision's fields and the Tasks extension's taskIds.
type ListenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	// TaskIDs is nil when the request did not ask for taskIds.
	TaskIDs []string `json:"taskIds,omitempty"`
}

// ParseListen reads the params of a subscriptions/listen request: a
// notifications object, whose taskIds, when present, is an array of at most
// maxTaskIDs strings (duplicates are dropped, order kept). A malformed
// filter is -32602.
func ParseListen(params json.RawMessage, maxTaskIDs int) (ListenFilter, *Failure) {
	var p struct {
		Notifications json.RawMessage `json:"notifications"`
	}
	bad := func(format string, args ...any) (ListenFilter, *Failure) {
		return ListenFilter{}, &Failure{Status: http.StatusBadRequest, Code: jsonrpc.CodeInvalidParams,
			Msg: MethodListen + ": " + fmt.Sprintf(format, args...) + "; for example " + listenParamsExample}
	}
	if len(bytes.TrimSpace(params)) == 0 || json.Unmarshal(params, &p) != nil {
		return bad("params must be an object with a notifications object")
	}
	n := bytes.TrimSpace(p.Notifications)
	if len(n) == 0 || n[0] != '{' {
		return bad("params.notifications is required and must be an object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(n, &raw); err != nil {
		return bad("params.notifications must be an object")
	}
	var f ListenFilter
	if err := json.Unmarshal(n, &f); err != nil {
		return bad("params.notifications has a field of the wrong type: %s", err.Error())
	}
	if ids, ok := raw["taskIds"]; ok {
		var list []string
		if err := json.Unmarshal(ids, &list); err != nil || list == nil {
			return bad("params.notifications.taskIds must be an array of task id strings")
		}
		if len(list) > maxTaskIDs {
			return bad("params.notifications.taskIds may list at most %d tasks (got %d); open more streams for more", maxTaskIDs, len(list))
		}
		f.TaskIDs = make([]string, 0, len(list))
		seen := map[string]bool{}
		for _, id := range list {
			if !seen[id] {
				seen[id] = true
				f.TaskIDs = append(f.TaskIDs, id)
			}
		}
	}
	return f, nil
}

// DeclaresExtension reports whether a request's own _meta client
// capabilities declare the extension ext.
func DeclaresExtension(meta map[string]json.RawMessage, ext string) bool {
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(meta[MetaClientCapabilities], &caps) != nil {
		return false
	}
	_, ok := caps.Extensions[ext]
	return ok
}

// MissingExtension is the -32021 of a request that needs the extension ext
// but whose _meta does not declare it.
func MissingExtension(m *Message, ext, what string) *Failure {
	f := Failf(http.StatusBadRequest, m, mcp.CodeMissingRequiredClientCapabilities,
		"%s requires this request's _meta clientCapabilities to declare the %s extension", what, ext)
	f.Data = map[string]any{"requiredCapabilities": map[string]any{ExtensionKey: map[string]any{ext: map[string]any{}}}}
	return f
}

// Note is one notification on a subscription stream.
type Note struct {
	Method string
	Params json.RawMessage
}

// NewNote builds the notification method with params (an object, or nil
// for none) tagged with subscription id sub in params._meta, keeping any
// _meta params already have.
func NewNote(method string, sub jsonrpc.ID, params any) (Note, error) {
	obj := map[string]json.RawMessage{}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return Note{}, err
		}
		if err := json.Unmarshal(b, &obj); err != nil {
			return Note{}, fmt.Errorf("notification params must be an object: %w", err)
		}
	}
	meta := map[string]any{}
	if raw, ok := obj["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			meta = map[string]any{}
		}
	}
	meta[MetaSubscriptionID] = sub.Raw()
	b, err := json.Marshal(meta)
	if err != nil {
		return Note{}, err
	}
	obj["_meta"] = b
	p, err := json.Marshal(obj)
	if err != nil {
		return Note{}, err
	}
	return Note{Method: method, Params: p}, nil
}

// Message returns n as the SDK's JSON-RPC notification (for stdio).
func (n Note) Message() *jsonrpc.Request { return &jsonrpc.Request{Method: n.Method, Params: n.Params} }

// Encode returns n as one JSON-RPC message, without a line end.
func (n Note) Encode() ([]byte, error) { return EncodeMessage(n.Message()) }

// StartSSE begins an SSE response for a stream of notes: status 200,
// Content-Type text/event-stream, no caching and no proxy buffering.
func StartSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

// WriteSSE writes msg, one JSON-RPC message without newlines, as one SSE
// event of type message (the Streamable HTTP transport's).
func WriteSSE(w io.Writer, msg []byte) error {
	buf := make([]byte, 0, len(sseEventMessage)+len(msg)+len(sseEventTerminator))
	buf = append(buf, sseEventMessage...)
	buf = append(buf, msg...)
	buf = append(buf, sseEventTerminator...)
	_, err := w.Write(buf)
	return err
}
