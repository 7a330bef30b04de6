package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Parse reads the body in one pass; it must still call invalid exactly what
// json.Valid (and so the SDK's decoder) calls invalid, however deep a value
// nests and wherever it sits.
func TestParseAgreesWithJSONValidOnNesting(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name string
		body func(n int) string
		base int // the depth of the nested value's parent
	}{
		{"an envelope member", func(n int) string { return `{"jsonrpc":"2.0","id":1,"method":"x","x":` + nest(n) + `}` }, 1},
		{"params", func(n int) string { return `{"jsonrpc":"2.0","id":1,"method":"x","params":` + nest(n) + `}` }, 1},
		{"a params member", func(n int) string { return `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":` + nest(n) + `}}` }, 2},
		{"_meta", func(n int) string { return `{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":` + nest(n) + `}}` }, 2},
		{"a _meta member", func(n int) string {
			return `{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"k":` + nest(n) + `}}}`
		}, 3},
	} {
		for _, n := range []int{maxNesting - tc.base, maxNesting - tc.base + 1} {
			body := []byte(tc.body(n))
			_, fail := Parse(body)
			parseError := fail != nil && fail.Code == jsonrpc.CodeParseError
			if parseError == json.Valid(body) {
				t.Errorf("%s nested %d deep: json.Valid %v, Parse %+v", tc.name, n, json.Valid(body), fail)
			}
		}
	}
}

// A member named twice is refused, in the envelope with id null (which of
// two ids would be answered?), in params and params._meta with the id.
func TestParseRefusesRepeatedMembers(t *testing.T) {
	for body, want := range map[string]struct {
		code  int64
		msg   string
		hasID bool
	}{
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`:                                 {jsonrpc.CodeInvalidRequest, `the member "id" appears twice`, false},
		`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}`:                  {jsonrpc.CodeInvalidRequest, `the member "method" appears twice`, false},
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`: {jsonrpc.CodeInvalidParams, `the member "name" of params appears twice`, true},
		`{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"k":1,"k":2}}}`:          {jsonrpc.CodeInvalidParams, `the key "k" of params._meta appears twice`, true},
	} {
		_, fail := Parse([]byte(body))
		if fail == nil || fail.Code != want.code || !strings.Contains(fail.Msg, want.msg) || (fail.ID != nil) != want.hasID {
			t.Errorf("%s: got %+v, want %d %q (id known: %v)", body, fail, want.code, want.msg, want.hasID)
		}
	}
	// Repeats deeper down (in arguments) are the argument validator's.
	m, fail := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"k":1,"k":2}}}`))
	if fail != nil {
		t.Fatalf("repeated argument keys: %+v", fail)
	}
	if name, args, ok := m.ToolCall(); !ok || name != "a" || string(args) != `{"k":1,"k":2}` {
		t.Fatalf("ToolCall = %q %s %v", name, args, ok)
	}
}

// Parse keeps each part of the message as it was sent.
func TestParseKeepsTheParts(t *testing.T) {
	m, fail := Parse([]byte(` { "jsonrpc" : "2.0" , "id" : "a" , "method" : "tools/call" , "params" : { "name" : "t" , "arguments" : { "x" : [ 1 , 2 ] } , "_meta" : { "k" : true } } } `))
	if fail != nil {
		t.Fatal(fail.Msg)
	}
	if m.Method != "tools/call" || !m.HasID || m.ID.Raw() != "a" || string(m.Meta["k"]) != "true" {
		t.Fatalf("parsed %+v", m)
	}
	if !json.Valid(m.Params) || !strings.HasPrefix(string(m.Params), "{") {
		t.Fatalf("params %q", m.Params)
	}
	if _, args, _ := m.ToolCall(); string(args) != `{ "x" : [ 1 , 2 ] }` {
		t.Fatalf("arguments %q", args)
	}
}
