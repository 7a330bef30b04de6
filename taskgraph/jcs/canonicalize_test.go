package jcs

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
var appendixB = []struct {
	bits uint64
	want string
}{
	{0x0000000000000000, "0"},
	{0x8000000000000000, "0"},
	{0x0000000000000001, "5e-324"},
	{0x8000000000000001, "-5e-324"},
	{0x7fefffffffffffff, "1.7976931348623157e+308"},
	{0xffefffffffffffff, "-1.7976931348623157e+308"},
	{0x4340000000000000, "9007199254740992"},
	{0xc340000000000000, "-9007199254740992"},
	{0x4430000000000000, "295147905179352830000"},
	{0x44b52d02c7e14af5, "9.999999999999997e+22"},
	{0x44b52d02c7e14af6, "1e+23"},
	{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
	{0x444b1ae4d6e2ef4e, "999999999999999700000"},
	{0x444b1ae4d6e2ef4f, "999999999999999900000"},
	{0x444b1ae4d6e2ef50, "1e+21"},
	{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
	{0x3eb0c6f7a0b5ed8d, "0.000001"},
	{0x41b3de4355555553, "333333333.3333332"},
	{0x41b3de4355555554, "333333333.33333325"},
	{0x41b3de4355555555, "333333333.3333333"},
	{0x41b3de4355555556, "333333333.3333334"},
	{0x41b3de4355555557, "333333333.33333343"},
	{0xbecbf647612f3696, "-0.0000033333333333333333"},
	{0x43143ff3c1cb0959, "1424953923781206.2"},
}

func TestFormatNumberAppendixB(t *testing.T) {
	for _, tc := range appendixB {
		f := math.Float64frombits(tc.bits)
		if got := formatNumber(f); got != tc.want {
			t.Errorf("formatNumber(%016x) = %q, want %q", tc.bits, got, tc.want)
		}
		// The same value reaching Canonicalize as JSON text (written by Go,
		// so in a different spelling) must come out identically.
		raw := []byte("[" + strconv.FormatFloat(f, 'g', -1, 64) + "]")
		got, err := Canonicalize(raw)
		if err != nil {
			t.Fatalf("Canonicalize(%s): %v", raw, err)
		}
		if string(got) != "["+tc.want+"]" {
			t.Errorf("Canonicalize(%s) = %s, want [%s]", raw, got, tc.want)
		}
	}
}

func TestAppendixBNonFiniteRejected(t *testing.T) {
	for _, bits := range []uint64{0x7fffffffffffffff, 0x7ff0000000000000, 0xfff0000000000000} {
		f := math.Float64frombits(bits)
		if _, err := CanonicalizeValue(f); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("CanonicalizeValue(%v) error = %v, want ErrInvalidJSON", f, err)
		}
	}
}

func TestCanonicalizeNumbers(t *testing.T) {
	cases := map[string]string{
		"1e21":                          "1e+21",
		"1E21":                          "1e+21",
		"1e-7":                          "1e-7",
		"0.000001":                      "0.000001",
		"0.0000001":                     "1e-7",
		"-0":                            "0",
		"-0.0e5":                        "0",
		"100":                           "100",
		"100.000":                       "100",
		"1e2":                           "100",
		"4.50":                          "4.5",
		"2e-3":                          "0.002",
		"1E30":                          "1e+30",
		"0.000000000000000000000000001": "1e-27",
		"333333333.33333329":            "333333333.3333333",
		"-1.5":                          "-1.5",
		"123e-2":                        "1.23",
		"1e20":                          "100000000000000000000",
		"123456789012345678901":         "123456789012345680000",
		// Parsed as a double, as the RFC prescribes: 2^53+1 rounds to 2^53.
		"9007199254740993": "9007199254740992",
		// Underflow to zero is the double's value, not an error.
		"1e-400": "0",
		"5e-324": "5e-324",
	}
	for in, want := range cases {
		got, err := Canonicalize([]byte(in))
		if err != nil {
			t.Errorf("Canonicalize(%s): %v", in, err)
			continue
		}
		if string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestFormatNumberRoundTrips checks, over many random doubles, that the
// text parses back to the same double and uses the layout ECMAScript picks
// for its magnitude.
func TestFormatNumberRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		s := formatNumber(f)
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != f {
			t.Fatalf("formatNumber(%016x) = %q, parses back as %v (%v)", math.Float64bits(f), s, back, err)
		}
		abs := math.Abs(f)
		exponential := strings.ContainsRune(s, 'e')
		if wantExp := abs != 0 && (abs >= 1e21 || abs < 1e-6); exponential != wantExp {
			t.Fatalf("formatNumber(%v) = %q: exponential form %v, want %v", f, s, exponential, wantExp)
		}
		if strings.ContainsAny(s, "E") || strings.Contains(s, "e+0") || strings.Contains(s, "e-0") {
			t.Fatalf("formatNumber(%v) = %q: exponent not in ECMAScript form", f, s)
		}
	}
}

// RFC 8785 §3.2.2 example.
func TestCanonicalizeRFCExample(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// RFC 8785 §3.2.3 sorting example.
func TestCanonicalizeRFCSortingExample(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{" +
		`"\r":"Carriage Return",` +
		`"1":"One",` +
		"\"\u0080\":\"Control\"," +
		`"ö":"Latin Small Letter O With Diaeresis",` +
		`"€":"Euro Sign",` +
		`"😀":"Emoji: Grinning Face",` +
		"\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"" +
		"}"
	got, err := Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestCanonicalizeStructureAndStrings(t *testing.T) {
	cases := []struct{ in, want string }{
		{" \t\r\n{ \"b\" : [ 1 , { } , [ ] ] , \"a\" : \"x\" } \n", `{"a":"x","b":[1,{},[]]}`},
		{`{"b":{"d":1,"c":2},"a":[{"z":0,"y":0}]}`, `{"a":[{"y":0,"z":0}],"b":{"c":2,"d":1}}`},
		{`"\u001f\u007f\u2028\/"`, "\"\\u001f\u007f\u2028/\""},
		{`"\b\f\n\r\t\"\\"`, `"\b\f\n\r\t\"\\"`},
		{`"\u0008\u000C\u0000"`, `"\b\f\u0000"`},
		{`"<>&"`, `"<>&"`},
		{`"\u00e9"`, `"é"`},
		{`true`, `true`},
		{`null`, `null`},
		{`[false]`, `[false]`},
		{`""`, `""`},
		// A prefix sorts before its extensions.
		{`{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},
		// UTF-16 order, not code point order: U+E000 is above the high
		// surrogate that starts U+1F600.
		{`{"\ue000":1,"\ud83d\ude00":2}`, "{\"\U0001F600\":2,\"\ue000\":1}"},
		// Two supplementary characters sharing a high surrogate.
		{`{"\ud83d\ude01":1,"\ud83d\ude00":2}`, "{\"\U0001F600\":2,\"\U0001F601\":1}"},
	}
	for _, tc := range cases {
		got, err := Canonicalize([]byte(tc.in))
		if err != nil {
			t.Errorf("Canonicalize(%q): %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("Canonicalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCanonicalizeRejects(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	cases := []struct {
		name, in, wantMsg string
	}{
		{"empty", "", "empty input"},
		{"whitespace only", "  ", "empty input"},
		{"duplicate key", `{"a":1,"b":2,"a":3}`, `member name "a" twice`},
		{"duplicate key after unescaping", `{"a":1,"\u0061":2}`, `member name "a" twice`},
		{"nested duplicate key", `[{"x":{"k":1,"k":1}}]`, `member name "k" twice`},
		{"invalid UTF-8 in string", "\"a\xffb\"", "invalid UTF-8"},
		{"invalid UTF-8 in key", "{\"\xc3\":1}", "invalid UTF-8"},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", "invalid UTF-8"},
		{"lone high surrogate", `"\ud83d"`, "lone surrogate"},
		{"high surrogate then letter", `"\ud83dx"`, "lone surrogate"},
		{"high surrogate then BMP escape", `"\ud83d\u0041"`, "lone surrogate"},
		{"lone low surrogate", `"\ude00"`, "lone surrogate"},
		{"number overflow", `1e400`, "outside the range"},
		{"negative overflow", `[-1e400]`, "outside the range"},
		{"NaN literal", `NaN`, "expected a JSON value"},
		{"Infinity literal", `[Infinity]`, "expected a JSON value"},
		{"leading zero", `01`, "after the JSON value"},
		{"leading plus", `+1`, "expected a JSON value"},
		{"bare point", `1.`, "after the decimal point"},
		{"bare exponent", `1e`, "in the exponent"},
		{"trailing data", `{} {}`, "after the JSON value"},
		{"trailing comma array", `[1,]`, "expected a JSON value"},
		{"trailing comma object", `{"a":1,}`, "expected a member name"},
		{"unquoted key", `{a:1}`, "expected a member name"},
		{"missing colon", `{"a" 1}`, "expected ':'"},
		{"raw control character", "\"a\nb\"", "must be escaped"},
		{"bad escape", `"\x"`, "invalid escape"},
		{"short unicode escape", `"\u12"`, "\\u escape"},
		{"unterminated string", `"abc`, "unterminated string"},
		{"unterminated object", `{"a":1`, "expected ',' or '}'"},
		{"bad literal", `tru`, "expected \"true\""},
		{"byte order mark", "\ufeff{}", "expected a JSON value"},
		{"too deep", deep, "nesting deeper than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("Canonicalize(%q) = %q, %v; want an error matching ErrInvalidJSON", tc.in, got, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
		})
	}
}

func TestCanonicalizeDepthLimitIsInclusive(t *testing.T) {
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	got, err := Canonicalize([]byte(ok))
	if err != nil {
		t.Fatalf("nesting of exactly MaxDepth rejected: %v", err)
	}
	if string(got) != ok {
		t.Errorf("nested arrays changed")
	}
}

func TestCanonicalizeValue(t *testing.T) {
	type inner struct {
		Z int    `json:"z"`
		A string `json:"a"`
	}
	tenth, fifth := 0.1, 0.2
	v := map[string]any{
		"html":  "<a & b>",
		"inner": inner{Z: 1, A: "x"},
		"float": tenth + fifth,
		"list":  []int{3, 1, 2},
	}
	got, err := CanonicalizeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"float":0.30000000000000004,"html":"<a & b>","inner":{"a":"x","z":1},"list":[3,1,2]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if _, err := CanonicalizeValue(make(chan int)); !errors.Is(err, ErrInvalidJSON) {
		t.Errorf("CanonicalizeValue(chan) error = %v, want ErrInvalidJSON", err)
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,null,-0.5e-7]}`, `"\ud83d\ude00\u0001"`, `1e21`, `[{"":{}}]`,
		`{"a":1,"a":1}`, "\"\xff\"", `123456789012345678901234567890`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := Canonicalize(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("error %v does not match ErrInvalidJSON", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Canonicalize(%q) = %q, not valid JSON", raw, out)
		}
		again, err := Canonicalize(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", raw, out, again, err)
		}
	})
}
