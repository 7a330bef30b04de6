package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSDKCanaryListenDropsTaskIDs: the SDK's subscriptions/listen params
// have no taskIds (go-sdk#1146), so the SDK can neither acknowledge nor
// refuse them, and the server owns the stream (listen.go). When this fails,
// the SDK carries taskIds: see whether its stream can carry
// notifications/tasks too.
func TestSDKCanaryListenDropsTaskIDs(t *testing.T) {
	var p mcp.SubscriptionsListenParams
	if err := json.Unmarshal([]byte(`{"notifications":{"taskIds":["a"],"toolsListChanged":true}}`), &p); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "taskIds") || !strings.Contains(string(b), "toolsListChanged") {
		t.Fatalf("the SDK's listen params re-encode as %s: taskIds kept, the workaround may go", b)
	}
}

func TestParseListen(t *testing.T) {
	f, fail := ParseListen(json.RawMessage(`{"notifications":{"taskIds":["a","b","a"]},"_meta":{}}`), 3)
	if fail != nil || strings.Join(f.TaskIDs, ",") != "a,b" {
		t.Fatalf("%+v %v", f, fail)
	}
	if f, fail := ParseListen(json.RawMessage(`{"notifications":{"toolsListChanged":true}}`), 3); fail != nil || f.TaskIDs != nil {
		t.Fatalf("no taskIds: %+v %v", f, fail)
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"notifications":1}`, `{"notifications":{"taskIds":"a"}}`,
		`{"notifications":{"taskIds":[1]}}`, `{"notifications":{"taskIds":["a","b","c","d"]}}`, `{"notifications":{"taskIds":null}}`} {
		if _, fail := ParseListen(json.RawMessage(bad), 3); fail == nil || fail.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("%s: %v, want -32602", bad, fail)
		}
	}
}

func TestNoteCarriesTheSubscriptionID(t *testing.T) {
	n, err := NewNote(MethodTaskStatus, mustID(t, "s-1"), map[string]any{"taskId": "x", "_meta": map[string]any{"k": 1}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			TaskID string         `json:"taskId"`
			Meta   map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Method != MethodTaskStatus || m.Params.TaskID != "x" ||
		m.Params.Meta[MetaSubscriptionID] != "s-1" || m.Params.Meta["k"] != float64(1) || strings.Contains(string(b), `"id"`) {
		t.Fatalf("%s", b)
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
