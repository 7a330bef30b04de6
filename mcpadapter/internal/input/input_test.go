package input

import (
	"encoding/json"
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
