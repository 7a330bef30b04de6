package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// short quotes at most 200 bytes of b for a failure message.
func short[T ~string | ~[]byte](b T) string {
	if len(b) > 200 {
		return fmt.Sprintf("%q… (%d bytes)", b[:200], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// fieldsOf returns the argument table of the named tool.
func fieldsOf(t *testing.T, tool string) []field {
	t.Helper()
	for _, d := range toolDefs() {
		if d.name == tool {
			return d.fields
		}
	}
	t.Fatalf("no tool %s", tool)
	return nil
}

// Regressions found by FuzzDecodeArgs, FuzzStdio and the hostile table
// (the transport halves of these live with the MCP server's tests).

// The validator rounded through float64: 1e-400 read as 0 and
// 3.0000000000000000001 as 3, so a number that is not an integer passed as
// one.
func TestRegressionArgumentIntegersAreReadExactly(t *testing.T) {
	claim := fieldsOf(t, manifest.ToolClaim)
	for _, in := range []string{`{"owner":"w","wait_ms":1e-400}`, `{"owner":"w","lease_ms":1000.00000000000000001}`} {
		if _, err := decodeArgs(json.RawMessage(in), claim); err == nil || !strings.Contains(err.Error(), "must be an integer") {
			t.Errorf("decodeArgs(%s) = %v, want an integer error", in, err)
		}
	}
	if a, err := decodeArgs(json.RawMessage(`{"owner":"w","lease_ms":1e3,"wait_ms":-0}`), claim); err != nil || a.num["lease_ms"] != 1000 || a.num["wait_ms"] != 0 {
		t.Errorf("decodeArgs of 1e3 and -0: %v", err)
	}
}

// result is any JSON value, null included (other arguments refuse null;
// the transport half is TestRegressionNullIsNotAbsent).
func TestResultMayBeNull(t *testing.T) {
	complete := fieldsOf(t, manifest.ToolComplete)
	if _, err := decodeArgs(json.RawMessage(`{"task_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","owner":"w","generation":1,"claim_token":"t","result":null}`), complete); err != nil {
		t.Errorf("result null: %v", err)
	}
}

// decodeArgs counted claim_token and error lengths in bytes while the
// published schema's maxLength counts characters, so a schema-valid call was
// refused. The decoder now applies the schema's character bounds; the store
// keeps the byte bounds, which JSON Schema cannot express.
func TestRegressionLengthsAreCharacters(t *testing.T) {
	heartbeat, fail := fieldsOf(t, manifest.ToolHeartbeat), fieldsOf(t, manifest.ToolFail)
	holder := `"task_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","owner":"w","generation":1`
	for _, tc := range []struct {
		fields []field
		args   string
		ok     bool
	}{
		{heartbeat, `{` + holder + `,"claim_token":"` + strings.Repeat("é", 128) + `"}`, true},
		{heartbeat, `{` + holder + `,"claim_token":"` + strings.Repeat("é", 129) + `"}`, false},
		{heartbeat, `{` + holder + `,"claim_token":"` + strings.Repeat("t", 129) + `"}`, false},
		{fail, `{` + holder + `,"claim_token":"t","error":"` + strings.Repeat("é", 65536) + `"}`, true},
		{fail, `{` + holder + `,"claim_token":"t","error":"` + strings.Repeat("e", 65537) + `"}`, false},
	} {
		if _, err := decodeArgs(json.RawMessage(tc.args), tc.fields); (err == nil) != tc.ok {
			t.Errorf("decodeArgs(%s): %v, want ok=%v", short(tc.args), err, tc.ok)
		}
	}
}

// Unknown and duplicate argument names were echoed whole into the tool
// error, so a 10 MB name came back as 10 MB of error text; every other echo
// of input is clipped.
func TestRegressionArgumentNamesAreClipped(t *testing.T) {
	name := strings.Repeat("k", 10<<20)
	for _, in := range []string{`{"` + name + `":1}`, `{"owner":"w","` + name + `":1,"` + name + `":2}`} {
		_, err := decodeArgs(json.RawMessage(in), fieldsOf(t, manifest.ToolClaim))
		if err == nil || len(err.Error()) > 1024 {
			t.Errorf("decodeArgs(%s): %d bytes of error", short(in), len(fmt.Sprint(err)))
		}
	}
}

// Echoed input went into error messages byte for byte, so a value holding
// bytes that are not UTF-8 (here "generation":"\x93") made the message
// itself invalid UTF-8. Found by FuzzDecodeArgs.
func TestRegressionEchoedArgumentIsValidUTF8(t *testing.T) {
	_, err := decodeArgs(json.RawMessage("{\"task_id\":\"00000000000000000000000000\",\"owner\":\"0\",\"generation\":\"\x93\"}"), fieldsOf(t, manifest.ToolHeartbeat))
	if err == nil || !utf8.ValidString(err.Error()) {
		t.Errorf("decodeArgs: %q", err)
	}
}

// A lone surrogate ("\udc00") was accepted in a payload and stored as
// sent, and crashed a worker that wrote it out as UTF-8 (issue 29 item 13):
// it is refused, naming the field, in every argument; a surrogate pair is a
// character like any other.
func TestLoneSurrogatesAreRefusedNamingTheField(t *testing.T) {
	create, complete := fieldsOf(t, manifest.ToolCreate), fieldsOf(t, manifest.ToolComplete)
	holder := `"task_id":"01ARZ3NDEKTSV4RRFFQ69G5FAV","owner":"w","generation":1,"claim_token":"t"`
	for _, tc := range []struct {
		fields []field
		args   string
		field  string
	}{
		{create, `{"workflow_id":"w","node_id":"n","payload":{"note":"\udc00"}}`, "payload"},
		{create, `{"workflow_id":"w","node_id":"n","payload":{"\ud800":1}}`, "payload"},
		{complete, `{` + holder + `,"result":["ok","\ud83d"]}`, "result"},
		{fieldsOf(t, manifest.ToolFail), `{` + holder + `,"error":"bad \udfff"}`, "error"},
	} {
		_, err := decodeArgs(json.RawMessage(tc.args), tc.fields)
		var ae *argError
		if !errors.As(err, &ae) || ae.field != tc.field || !strings.Contains(err.Error(), "lone UTF-16 surrogate") {
			t.Errorf("decodeArgs(%s) = %v, want an error naming %s", tc.args, err, tc.field)
		}
	}
	if _, err := decodeArgs(json.RawMessage(`{"workflow_id":"w","node_id":"n","payload":{"note":"\ud83d\ude00 é"}}`), create); err != nil {
		t.Errorf("a surrogate pair was refused: %v", err)
	}
}
