package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/jsonnum"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/mcptest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// This file holds the native fuzz targets of the MCP boundary. Their seed
// corpora (the f.Add calls and testdata/fuzz/FuzzXxx) run as ordinary tests;
// fuzz one with, for example,
//
//	go test ./mcpadapter -run '^$' -fuzz '^FuzzDecodeArgs$' -fuzztime 3m -parallel 1

// fuzzTool is a tool's argument table with its published input schema,
// resolved by an independent JSON Schema implementation.
type fuzzTool struct {
	name   string
	fields []field
	schema *jsonschema.Resolved
}

// fuzzTools resolves inputSchema(fields) of every tool exactly as tools/list
// publishes it (through its JSON encoding).
func fuzzTools(tb testing.TB) []fuzzTool {
	tb.Helper()
	var out []fuzzTool
	for _, d := range toolDefs() {
		b, err := json.Marshal(inputSchema(d.fields))
		if err != nil {
			tb.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			tb.Fatalf("%s: the published input schema does not parse as JSON Schema: %v", d.name, err)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			tb.Fatalf("%s: the published input schema does not resolve: %v", d.name, err)
		}
		out = append(out, fuzzTool{name: d.name, fields: d.fields, schema: rs})
	}
	return out
}

// floatExact reports whether a float64 holds the number literal exactly, so
// that a validator working on float64 values sees the number as written.
func floatExact(lit string) bool {
	r, ok := jsonnum.Exact(lit)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return false
	}
	return r.Cmp(new(big.Rat).SetFloat64(f)) == 0
}

// schemaComparable reports whether a JSON Schema validator working on the
// standard decoding of raw sees what decodeArgs sees: raw is one valid JSON
// value, not absent or null (absent arguments are a protocol matter), with no
// key twice in the top-level object (the JSON data model has no duplicate
// keys; decodeArgs refuses them) and no number a float64 would round.
func schemaComparable(raw []byte) bool {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" || !json.Valid(trimmed) {
		return false
	}
	if trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		if _, err := dec.Token(); err != nil {
			return false
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return false
			}
			k, _ := kt.(string)
			if seen[k] {
				return false
			}
			seen[k] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return false
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	// The keys of each open object and whether the next string token is a
	// key: a repeated key at any depth (the report's objects refuse one)
	// is not comparable either, as the schema's decoder keeps the last.
	var keys []map[string]bool
	var inObject []bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{':
				keys, inObject = append(keys, map[string]bool{}), append(inObject, true)
			case '[':
				keys, inObject = append(keys, nil), append(inObject, false)
			default:
				keys, inObject = keys[:len(keys)-1], inObject[:len(inObject)-1]
			}
			expectKey = len(inObject) > 0 && inObject[len(inObject)-1] && dec.More()
			continue
		case string:
			if expectKey {
				if keys[len(keys)-1][tok] {
					return false
				}
				keys[len(keys)-1][tok] = true
				expectKey = false
				continue
			}
		case json.Number:
			if !floatExact(tok.String()) {
				return false
			}
		}
		expectKey = len(inObject) > 0 && inObject[len(inObject)-1] && dec.More()
	}
}

// checkAccepted asserts that arguments decodeArgs accepted satisfy every rule
// of every field, judged independently of decodeArgs.
func checkAccepted(t *testing.T, tool fuzzTool, raw []byte, a *args) {
	t.Helper()
	trimmed := bytes.TrimSpace(raw)
	m := map[string]json.RawMessage{}
	if len(trimmed) != 0 && string(trimmed) != "null" {
		if err := json.Unmarshal(trimmed, &m); err != nil {
			t.Fatalf("%s accepted %s, which is not a JSON object: %v", tool.name, short(raw), err)
		}
	}
	byName := map[string]field{}
	for _, f := range tool.fields {
		byName[f.name] = f
	}
	for k := range m {
		if _, ok := byName[k]; !ok {
			t.Fatalf("%s accepted the unknown argument %q in %s", tool.name, k, short(raw))
		}
	}
	identifierRE := regexp.MustCompile(taskgraph.IdentifierPattern)
	for _, f := range tool.fields {
		v, present := m[f.name]
		if !present {
			if f.required {
				t.Fatalf("%s accepted %s without the required %s", tool.name, short(raw), f.name)
			}
			if _, ok := a.raw[f.name]; ok {
				t.Fatalf("%s: %s is absent from %s but decoded", tool.name, f.name, short(raw))
			}
			continue
		}
		if string(v) == "null" && f.kind != kindAny {
			t.Fatalf("%s accepted %s: null in %s; its schema type does not include null", tool.name, f.name, short(raw))
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s accepted %s = %s (from %s): %s", tool.name, f.name, short(v), short(raw), fmt.Sprintf(format, args...))
		}
		var s string
		switch f.kind {
		case kindIdentifier, kindTaskID, kindToken, kindErrorText:
			if err := json.Unmarshal(v, &s); err != nil {
				fail("not a string")
			}
			if a.str[f.name] != s {
				fail("decoded as %q, want %q", a.str[f.name], s)
			}
		}
		runes := utf8.RuneCountInString(s)
		switch f.kind {
		case kindIdentifier:
			if !identifierRE.MatchString(s) || runes < 1 || runes > taskgraph.MaxIdentifierLen {
				fail("not an identifier")
			}
		case kindTaskID:
			if len(s) != 26 || strings.Trim(s, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
				fail("not a task id")
			}
		case kindToken:
			if runes < 1 || runes > taskgraph.MaxTokenLen {
				fail("%d characters", runes)
			}
		case kindErrorText:
			if runes < 1 || runes > taskgraph.MaxErrorBytes {
				fail("%d characters", runes)
			}
		case kindInt:
			n, ok := a.num[f.name]
			exact, isNum := jsonnum.Exact(string(v))
			switch {
			case !ok:
				fail("no integer decoded")
			case !isNum:
				fail("not a JSON number of manageable size")
			case !exact.IsInt():
				fail("%s is not an integer", exact.RatString())
			case exact.Num().Cmp(big.NewInt(n)) != 0:
				fail("decoded as %d, the number is %s", n, exact.RatString())
			case n < f.min || n > f.max:
				fail("%d is outside %d..%d", n, f.min, f.max)
			}
		case kindText:
			if err := json.Unmarshal(v, &s); err != nil || utf8.RuneCountInString(s) > taskgraph.MaxStatusMessageBytes || a.str[f.name] != s {
				fail("not a string of at most %d characters, or decoded as %q", taskgraph.MaxStatusMessageBytes, a.str[f.name])
			}
		case kindProgress, kindUsage:
			checkReportAccepted(v, f.kind, a, fail)
		case kindBool:
			b, ok := a.bln[f.name]
			if !ok || (string(v) != "true" && string(v) != "false") || b != (string(v) == "true") {
				fail("decoded as %v", b)
			}
		case kindObject:
			var obj map[string]json.RawMessage
			if json.Unmarshal(v, &obj) != nil || obj == nil {
				fail("not a JSON object")
			}
			if !bytes.Equal(a.raw[f.name], v) {
				fail("passed on as %s", a.raw[f.name])
			}
		case kindAny:
			if !bytes.Equal(a.raw[f.name], v) {
				fail("passed on as %s", a.raw[f.name])
			}
		case kindIdentifierList:
			var list []string
			if err := json.Unmarshal(v, &list); err != nil {
				fail("not an array of strings")
			}
			if len(list) > taskgraph.MaxDependsOn {
				fail("%d entries", len(list))
			}
			seen := map[string]bool{}
			for _, e := range list {
				if !identifierRE.MatchString(e) || seen[e] {
					fail("entry %q", e)
				}
				seen[e] = true
			}
			if !slices.Equal(a.lst[f.name], list) {
				fail("decoded as %q", a.lst[f.name])
			}
		}
	}
}

// checkReportAccepted judges an accepted progress or usage object
// independently of decodeArgs: only its keys, each a number in bounds
// (tokens whole), done at most total, decoded to the same values.
func checkReportAccepted(v json.RawMessage, k kind, a *args, fail func(string, ...any)) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil || obj == nil {
		fail("not a JSON object")
	}
	num := func(key string, max float64, whole bool) (float64, bool) {
		raw, ok := obj[key]
		if !ok {
			return 0, false
		}
		exact, isNum := jsonnum.Exact(string(raw))
		if !isNum || exact.Sign() < 0 || (whole && !exact.IsInt()) {
			fail("%s is %s", key, raw)
		}
		f, _ := exact.Float64()
		if f > max {
			fail("%s = %v is above %v", key, f, max)
		}
		return f, true
	}
	if k == kindProgress {
		for key := range obj {
			if key != "done" && key != "total" {
				fail("unknown key %q", key)
			}
		}
		done, ok := num("done", taskgraph.MaxProgressValue, false)
		if !ok || a.progress == nil || a.progress.Done != done {
			fail("done missing or decoded as %+v", a.progress)
		}
		if total, ok := num("total", taskgraph.MaxProgressValue, false); ok && (a.progress.Total == nil || *a.progress.Total != total) {
			fail("done %v of total %v, decoded as %+v", done, total, a.progress)
		}
		return
	}
	for key := range obj {
		if key != "input_tokens" && key != "output_tokens" && key != "cost_usd" {
			fail("unknown key %q", key)
		}
	}
	in, _ := num("input_tokens", taskgraph.MaxUsageTokens, true)
	out, _ := num("output_tokens", taskgraph.MaxUsageTokens, true)
	cost, _ := num("cost_usd", taskgraph.MaxUsageCostUSD, false)
	if u := a.usage; u == nil || float64(u.InputTokens) != in || float64(u.OutputTokens) != out || u.CostUSD != cost {
		fail("decoded as %+v", a.usage)
	}
}

func FuzzDecodeArgs(f *testing.F) {
	tools := fuzzTools(f)
	index := map[string]uint8{}
	for i, tl := range tools {
		index[tl.name] = uint8(i)
	}
	const id = `"01ARZ3NDEKTSV4RRFFQ69G5FAV"`
	holder := `"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":"tok"`
	seeds := map[string][]string{
		"graph_task_create": {
			`{"workflow_id":"wf","node_id":"a"}`,
			`{"workflow_id":"wf","nodes":[{"node_id":"a"},{"node_id":"b","depends_on":["a"],"payload":{"k":1},"max_attempts":2,"priority":-3,"requires":["gpu"],"retry_delay_ms":0,"not_before":"2026-03-01T12:00:00Z"}]}`,
			`{"workflow_id":"wf","nodes":[]}`,
			`{"workflow_id":"wf","nodes":null}`,
			`{"workflow_id":"wf","nodes":[null]}`,
			`{"workflow_id":"wf","nodes":[{}]}`,
			`{"workflow_id":"wf","nodes":[{"node_id":"a","nodes":[]}]}`,
			`{"workflow_id":"wf","nodes":[{"node_id":"a","max_attempts":0}]}`,
			`{"workflow_id":"wf","nodes":[{"node_id":"a","depends_on":["b","b"]}]}`,
			`{"workflow_id":"wf","nodes":[{"node_id":"a","node_id":"b"}]}`,
			`{"workflow_id":"wf","nodes":{"node_id":"a"}}`,
			`{"workflow_id":"wf"}`,
			`{"workflow_id":"wf","node_id":"a","payload":{"x":[1,2,{"y":null}]},"depends_on":["b","c"],"max_attempts":100}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":0}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":101}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":1.5}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":1e1}`,
			`{"workflow_id":"wf","node_id":"a","max_attempts":3.0000000000000000001}`,
			`{"workflow_id":"wf","node_id":"a","depends_on":["b","b"]}`,
			`{"workflow_id":"wf","node_id":"a","depends_on":null}`,
			`{"workflow_id":"wf","node_id":"a","payload":null}`,
			`{"workflow_id":"wf","node_id":"a","payload":[1]}`,
			`{"workflow_id":"wf","node_id":"a","payload":{"k":1,"k":2}}`,
			`{"workflow_id":"wf","workflow_id":"wf","node_id":"a"}`,
			`{"workflow_id":"w\u0066","node_id":"a"}`,
			`{"workflow_id":"wf\u200d","node_id":"a"}`,
			`{"workflow_id":"wf\u0000","node_id":"a"}`,
			`{"workflow_id":"аpple","node_id":"a"}`,
			`{"workflow_id":"` + strings.Repeat("a", 128) + `","node_id":"a"}`,
			`{"workflow_id":"` + strings.Repeat("a", 129) + `","node_id":"a"}`,
			`{"workflow_id":"wf","node_id":"a","force":true}`,
			`{"workflow_id":"wf","node_id":"a","` + strings.Repeat("k", 1100) + `":true}`,
			`{"workflow_id":"wf","node_id":"a","depends_on":[1]}`,
			`{"workflow_id":"wf","node_id":"a","depends_on":["b",null]}`,
			"{\"workflow_id\":\"wf\",\"node_id\":\"\xff\"}",
		},
		"graph_task_claim": {
			`{"owner":"w"}`,
			`{"owner":"w","lease_ms":1000,"wait_ms":0,"workflow_id":"wf"}`,
			`{"owner":"w","lease_ms":999}`,
			`{"owner":"w","lease_ms":900001}`,
			`{"owner":"w","lease_ms":-1000}`,
			`{"owner":"w","lease_ms":"30000"}`,
			`{"owner":"w","lease_ms":1e3}`,
			`{"owner":"w","lease_ms":1000.0}`,
			`{"owner":"w","lease_ms":1E+3}`,
			`{"owner":"w","lease_ms":1e400}`,
			`{"owner":"w","wait_ms":0e99999999999}`,
			`{"owner":"w","wait_ms":-0.0e-7}`,
			`{"owner":"w","lease_ms":18446744073709551616}`,
			`{"owner":"w","wait_ms":-0}`,
			`{"owner":"w","wait_ms":-0.0}`,
			`{"owner":"w","wait_ms":1e-400}`,
			`{"owner":"w","wait_ms":0.1e1}`,
			`{"owner":"w","lease_ms":null}`,
			`{"owner":"w","task_id":null}`,
			`{"owner":"w","task_id":"01arz3ndektsv4rrffq69g5fav"}`,
			`{"owner":"w","task_id":"01ARZ3NDEKTSV4RRFFQ69G5FA"}`,
			`{"owner":true}`,
			`{"owner":["w"]}`,
			`{"owner":{"w":1}}`,
			`["owner","w"]`,
			`"owner"`,
			`null`,
			``,
			`{}`,
			`{"owner":"w"} {}`,
			`{"owner":"w",}`,
		},
		"graph_task_heartbeat": {
			`{` + holder + `}`,
			`{` + holder + `,"lease_ms":900000}`,
			`{"task_id":` + id + `,"owner":"w1","generation":9007199254740991,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":9007199254740992,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":9007199254740993,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":0,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":-1,"claim_token":"t"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":""}`,
			`{"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":"` + strings.Repeat("t", 128) + `"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":"` + strings.Repeat("t", 129) + `"}`,
			`{"task_id":` + id + `,"owner":"w1","generation":1,"claim_token":"` + strings.Repeat("é", 100) + `"}`,
			`{` + holder + `,"progress":{"done":3,"total":10},"status_message":"parsing","usage":{"input_tokens":1200,"output_tokens":300,"cost_usd":0.0125}}`,
			`{` + holder + `,"progress":{"done":11,"total":10}}`,
			`{` + holder + `,"progress":{"done":1e15}}`,
			`{` + holder + `,"progress":{"done":1e16}}`,
			`{` + holder + `,"progress":{"done":-0}}`,
			`{` + holder + `,"progress":{"total":1}}`,
			`{` + holder + `,"progress":{"done":1,"done":2}}`,
			`{` + holder + `,"progress":{"done":"1"}}`,
			`{` + holder + `,"progress":{"done":1e400}}`,
			`{` + holder + `,"usage":{"input_tokens":1.0,"cost_usd":1e-7}}`,
			`{` + holder + `,"usage":{"input_tokens":1.5}}`,
			`{` + holder + `,"usage":{"input_tokens":9007199254740992}}`,
			`{` + holder + `,"usage":{"tokens":1}}`,
			`{` + holder + `,"usage":[]}`,
			`{` + holder + `,"status_message":"` + strings.Repeat("é", 512) + `"}`,
			`{` + holder + `,"status_message":"` + strings.Repeat("x", 513) + `"}`,
		},
		"graph_task_complete": {
			`{` + holder + `,"result":null}`,
			`{` + holder + `,"result":{"big":9007199254740993}}`,
			`{` + holder + `}`,
		},
		"graph_task_fail": {
			`{` + holder + `,"error":"boom","retryable":true}`,
			`{` + holder + `,"error":"","retryable":false}`,
			`{` + holder + `,"error":"boom","retryable":"true"}`,
			`{` + holder + `,"error":"boom","retryable":1}`,
		},
		"graph_task_cancel": {
			`{` + holder + `}`,
			`{` + holder + `,"generation":2}`,
		},
		"graph_task_inspect": {
			`{"task_id":` + id + `}`,
			`{"task_id":"../../etc/passwd"}`,
			`{"task_id":7}`,
		},
	}
	for tool, list := range seeds {
		for _, s := range list {
			f.Add(index[tool], []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		tool := tools[int(which)%len(tools)]
		a, err := decodeArgs(raw, tool.fields)
		if err != nil {
			var ae *argError
			if !errors.Is(err, errArgsNotObject) && !errors.As(err, &ae) {
				t.Fatalf("%s: %s: an error that is neither a tool error nor -32602: %v", tool.name, short(raw), err)
			}
			if msg := err.Error(); !utf8.ValidString(msg) || len(msg) > 1024 {
				t.Fatalf("%s: %s: the error message is not short, valid UTF-8 (%d bytes)", tool.name, short(raw), len(msg))
			}
		} else {
			checkAccepted(t, tool, raw, a)
		}
		if !schemaComparable(raw) {
			return
		}
		verr := schemaAccepts(tool.schema, bytes.TrimSpace(raw))
		if (err == nil) != (verr == nil) {
			t.Fatalf("%s: decodeArgs and the published inputSchema disagree on %s:\ndecodeArgs: %.300v\ninputSchema: %.300v", tool.name, short(raw), err, verr)
		}
	})
}

var schemaAccepts = mcptest.SchemaAccepts
