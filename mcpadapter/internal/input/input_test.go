package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// Int rounded through float64 once: 1e-400 read as 0 and
// 3.0000000000000000001 as 3, so a number that is not an integer passed as
// one.
func TestRegressionIntegersAreReadExactly(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "-0": 0, "-0.0": 0, "0e999999999999": 0, "1e3": 1000, "1E+3": 1000, "1000.0": 1000,
		"0.1e1": 1, "0.5e1": 5, "150e-1": 15, "9007199254740991": 9007199254740991, "9.007199254740991e15": 9007199254740991,
		"9223372036854775807": 9223372036854775807, "-9223372036854775808": -9223372036854775808,
		"-9.223372036854775808e18": -9223372036854775808,
	} {
		if got, err := Int(json.RawMessage(in)); err != nil || got != want {
			t.Errorf("Int(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{
		"1e-400", "-1e-400", "3.0000000000000000001", "1000.00000000000001", "1.5", "0.25e1", "1e19",
		"9223372036854775808", "9.223372036854775808e18", "1e400", "1e999999999999", "-1e999999999999",
		`"1"`, "true", "null", "[1]", "{}",
	} {
		if got, err := Int(json.RawMessage(in)); err == nil {
			t.Errorf("Int(%s) = %d, want an error", in, got)
		}
	}
}

// Echoed input went into error messages byte for byte, so input holding
// bytes that are not UTF-8 made the message itself invalid UTF-8.
func TestRegressionEchoedInputIsValidUTF8(t *testing.T) {
	for _, in := range []string{"\x93", "ok\xff\xfe", strings.Repeat("é", 40) + "\xc3", strings.Repeat("\xff", 100)} {
		if got := Clip(in); !utf8.ValidString(got) || len(got) > MaxEcho+len("…")+3*MaxEcho {
			t.Errorf("Clip(%q) = %q", in, got)
		}
	}
}

func TestObjectRefusesARepeatedKey(t *testing.T) {
	if m, ok := Object(json.RawMessage(`{"a":1,"b":{"a":2}}`)); !ok || len(m) != 2 {
		t.Fatalf("Object refused distinct keys: %v %v", m, ok)
	}
	for _, in := range []string{`{"a":1,"a":2}`, `[1]`, `{"a":1`, `"s"`} {
		if _, ok := Object(json.RawMessage(in)); ok {
			t.Errorf("Object(%s) accepted", in)
		}
	}
}

func TestCutKeepsRunes(t *testing.T) {
	if got := Cut("héllo", 2); got != "h…" {
		t.Errorf("Cut = %q, want h…", got)
	}
	if got := Cut("abc", 3); got != "abc" {
		t.Errorf("Cut = %q", got)
	}
}

func TestLoneSurrogate(t *testing.T) {
	for raw, want := range map[string]string{
		`{"a":"\udc00"}`:                 `\udc00`,
		`{"a":"x\ud800"}`:                `\ud800`,
		`{"a":"\ud800x"}`:                `\ud800`,
		`{"a":"\uD800\u0041"}`:           `\uD800`,
		`{"\udfff":1}`:                   `\udfff`,
		`["ok","\ud83d\ude00","\udc01"]`: `\udc01`,
	} {
		if got, ok := LoneSurrogate([]byte(raw)); !ok || got != want {
			t.Errorf("LoneSurrogate(%s) = %q, %v; want %q", raw, got, ok, want)
		}
	}
	for _, raw := range []string{`{"a":"\ud83d\ude00"}`, `{"a":"\\udc00"}`, `{"a":"\\\\\ud83d\ude00"}`, `{"a":"\u0041é😀"}`, `[1,2,{"b":null}]`, `"\n\t\"\\"`} {
		if got, ok := LoneSurrogate([]byte(raw)); ok {
			t.Errorf("LoneSurrogate(%s) = %q, want none", raw, got)
		}
	}
}

// decoderMembers is what Members replaces: the members of obj as
// json.Decoder's tokens read them.
func decoderMembers(t *testing.T, obj []byte) (keys []string, vals []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		keys, vals = append(keys, k.(string)), append(vals, string(v))
	}
	return keys, vals
}

// Members reads every member of a valid object as json.Decoder does: the
// same keys (escapes and invalid UTF-8 decoded alike) and the same raw
// values, in order, whatever the white space, nesting and strings.
func TestMembersReadsAsTheDecoder(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{}`, ` { } `, `{"a":1}`, "{\n \"a\" :\t1 ,\r\n\"b\": \"x,}]\\\"\" }",
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"a":[1,{"b":"}"}],"c":null},"_meta":{"k":true}}}`,
		`{"\u0061b":1,"a\"b":2,"a\\":[],"é":-1.5e+3,"x":false}`,
		"{\"\xff\xfe\":1,\"ok\":\"\xff\"}",
		`{"a":"\ud800","b":[[[[]]]],"c":{"d":{"e":{}}},"a":2}`,
		`{"n":0,"m":-0.0,"s":"","t":"\\","u":"\/"}`,
	} {
		obj := []byte(in)
		if !json.Valid(obj) {
			t.Fatalf("test input %q is not valid JSON", in)
		}
		sameAsDecoder(t, obj)
	}
	stop := errors.New("stop")
	n := 0
	if err := Members([]byte(`{"a":1,"b":2}`), func(string, json.RawMessage) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("Members did not stop at the first error: %v after %d members", err, n)
	}
	if err := Members([]byte(`[1]`), func(string, json.RawMessage) error { return nil }); err == nil {
		t.Error("Members accepted an array")
	}
}

// FuzzMembers: on any valid JSON object, Members and json.Decoder agree.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,"]"]},"c":"\"}"}`))
	f.Add([]byte(" {\"k\\u00e9\" : [ ] , \"z\":1e5 } "))
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !json.Valid(obj) || bytes.TrimSpace(obj)[0] != '{' {
			return
		}
		sameAsDecoder(t, obj)
	})
}

// sameAsDecoder fails t unless Members splits obj into the keys and raw
// values json.Decoder reads.
func sameAsDecoder(t *testing.T, obj []byte) {
	t.Helper()
	wantK, wantV := decoderMembers(t, obj)
	var gotK, gotV []string
	if err := Members(obj, func(k string, v json.RawMessage) error {
		gotK, gotV = append(gotK, k), append(gotV, string(v))
		return nil
	}); err != nil {
		t.Fatalf("Members(%q): %v", obj, err)
	}
	if !slices.Equal(gotK, wantK) || !slices.Equal(gotV, wantV) {
		t.Fatalf("Members(%q) = %q %q, want %q %q", obj, gotK, gotV, wantK, wantV)
	}
}

// String decodes as json.Unmarshal into a string does.
func TestStringIsUnmarshal(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`"abc"`, `""`, `"a\"b"`, `"\u00e9\n"`, "\"\xff\"", `"\ud800"`, `1`, `null`, `{}`, `["a"]`, `true`} {
		var want string
		wantErr := json.Unmarshal([]byte(in), &want)
		got, ok := String(json.RawMessage(in))
		if ok != (wantErr == nil) || got != want {
			t.Errorf("String(%s) = %q %v, want %q (error %v)", in, got, ok, want, wantErr)
		}
	}
}
