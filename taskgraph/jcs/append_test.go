package jcs

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// compareUTF16Ref is RFC 8785 §3.2.3 spelled out: both names encoded as
// UTF-16 and compared code unit by code unit.
func compareUTF16Ref(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// keyAlphabet mixes the ranges whose UTF-8 and UTF-16 orders differ
// (U+E000-U+FFFF against U+10000 and beyond) with ASCII and other BMP text.
var keyAlphabet = []rune{'a', 'b', 'Z', '1', 0x7f, 0x80, 'é', 0x20ac, 0xd7ff, 0xe000, 0xfb33, 0xfeff, 0xffff, 0x10000, 0x1f600, 0x10ffff}

func randomKey(rng *rand.Rand) string {
	var sb strings.Builder
	for n := rng.IntN(4); n > 0; n-- {
		sb.WriteRune(keyAlphabet[rng.IntN(len(keyAlphabet))])
	}
	return sb.String()
}

// CompareKeys agrees with the UTF-16 reference on names that mix every
// range, and differs from byte order exactly where RFC 8785 says it must.
func TestCompareKeysIsUTF16Order(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	differs := 0
	for i := 0; i < 50000; i++ {
		a, b := randomKey(rng), randomKey(rng)
		if got, want := CompareKeys(a, b), compareUTF16Ref(a, b); got != want {
			t.Fatalf("CompareKeys(%q, %q) = %d, want %d", a, b, got, want)
		}
		if CompareKeys(a, b) != strings.Compare(a, b) {
			differs++
		}
	}
	if differs == 0 {
		t.Fatal("no pair ordered differently from byte order: the test does not reach the case it is for")
	}
}

// Keys beyond the BMP: Append orders them as Canonicalize and the RFC do
// (U+1F600 before U+FB33, although its UTF-8 bytes sort after), which is
// not byte order.
func TestAppendOrdersNonBMPKeysByUTF16(t *testing.T) {
	t.Parallel()
	m := map[string]any{"\ufb33": 1, "😀": 2, "€": 3, "a": 4, "\U0010ffff": 5, "\uffff": 6}
	want := `{"a":4,"€":3,"😀":2,"` + "\U0010ffff" + `":5,"` + "\ufb33" + `":1,"` + "\uffff" + `":6}`
	got, err := Append(nil, m)
	if err != nil || string(got) != want {
		t.Fatalf("Append = %s (%v), want %s", got, err, want)
	}
	c, err := CanonicalizeValue(m)
	if err != nil || string(c) != want {
		t.Fatalf("CanonicalizeValue = %s (%v), want %s", c, err, want)
	}
	keys := []string{"\ufb33", "😀", "€", "a", "\U0010ffff", "\uffff"}
	slices.Sort(keys) // byte order, the store's order before RFC 8785's
	var bytewise []string
	for _, k := range keys {
		bytewise = append(bytewise, `"`+k+`":`)
	}
	if strings.Contains(want, strings.Join(bytewise, "")) {
		t.Fatal("the fixture orders the same in bytes: it shows nothing")
	}
	if ok, err := IsCanonical(want); !ok || err != nil {
		t.Fatalf("IsCanonical(%s) = %v, %v", want, ok, err)
	}
	if ok, _ := IsCanonical(`{"a":4,"€":3,"` + "\U0010ffff" + `":5,"😀":2,"` + "\ufb33" + `":1,"` + "\uffff" + `":6}`); ok {
		t.Fatal("IsCanonical accepted non-BMP keys in byte order")
	}
}

// Append refuses what it cannot write exactly.
func TestAppendRefuses(t *testing.T) {
	t.Parallel()
	for _, v := range []any{int64(1<<53 + 1), int64(-(1<<53 + 1)), 1.5, struct{}{}, map[string]any{"a": []any{uint(1)}}} {
		if _, err := Append(nil, v); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Append(%#v) = %v, want ErrUnsupported", v, err)
		}
	}
	if b, err := Append(nil, int64(1<<53)); err != nil || string(b) != "9007199254740992" {
		t.Errorf("Append(2^53) = %s, %v", b, err)
	}
}

// The fast check never accepts what RFC 8785 would write otherwise, and
// accepts the store's usual shapes.
func TestFastCanonicalCheck(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`{}`, `[]`, `{"a":1,"b":[true,false,null,"x"],"c":{"d":-5}}`, `{"e":"\u001f\n\"\\é"}`, `0`, `-1`} {
		c, err := Canonicalize([]byte(s))
		if err != nil || string(c) != s {
			t.Fatalf("fixture %s is not canonical: %s %v", s, c, err)
		}
		if !IsCanonicalFast([]byte(s)) {
			t.Errorf("rejected canonical %s", s)
		}
	}
	for _, s := range []string{`{"b":1,"a":2}`, `{"a":1,"a":1}`, `{ "a":1}`, `{"a":01}`, `{"a":-0}`, `{"a":1.5}`, `{"a":"\u0041"}`, `{"a":"\/"}`,
		`{"a":"\u000a"}`, `{"a":"\u001F"}`, "{\"a\":\"\xff\"}", `{"a":1}x`, `{"a":1`, `"x`, `{"a":1e3}`, `{"a":1234567890123456}`} {
		if IsCanonicalFast([]byte(s)) {
			c, err := Canonicalize([]byte(s))
			if err != nil || string(c) != s {
				t.Errorf("accepted non-canonical %s (canonical: %s %v)", s, c, err)
			}
		}
	}
}

// FuzzAppend: the typed encoder and the parser-based one agree on the same
// value, whatever its strings (keys and values; invalid UTF-8 is coerced
// by both), and the fast check and IsCanonical accept the result.
func FuzzAppend(f *testing.F) {
	f.Add("a", "b", "\ufb33", "😀", int64(5))
	f.Add("\uffff", "\U0010ffff", "", "\x00\"\\", int64(-1<<53))
	f.Add("\xff", "é", "€", "\ue000", int64(0))
	f.Fuzz(func(t *testing.T, k1, k2, k3, s string, n int64) {
		n %= 1 << 53
		fix := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		m := map[string]any{fix(k1): s, fix(k2): []any{n, true, nil, []string{s, k1}}, fix(k3): map[string]any{fix(s): int(n % 1000)}}
		got, err := Append(nil, m)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		want, err := CanonicalizeValue(m)
		if err != nil {
			t.Fatalf("CanonicalizeValue: %v", err)
		}
		if string(got) != string(want) {
			t.Fatalf("Append and CanonicalizeValue disagree:\n%s\n%s", got, want)
		}
		if ok, err := IsCanonical(string(got)); !ok || err != nil {
			t.Fatalf("IsCanonical(%s) = %v, %v", got, ok, err)
		}
		if !utf8.Valid(got) || !json.Valid(got) {
			t.Fatalf("not valid JSON: %q", got)
		}
	})
}

// FuzzIsCanonical: on any input, the fast check accepts only text that
// Canonicalize leaves unchanged, and IsCanonical says exactly that.
func FuzzIsCanonical(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"b":1,"a":2}`, `{"😀":1,"` + "\ufb33" + `":2}`, `{"` + "\ufb33" + `":2,"😀":1}`, `[1,"x",{"":null}]`, `1.5`, `{"a":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, cerr := Canonicalize(raw)
		exact := cerr == nil && string(c) == string(raw)
		if IsCanonicalFast(raw) && !exact {
			t.Fatalf("IsCanonicalFast accepted %q; canonical is %q (%v)", raw, c, cerr)
		}
		if ok, _ := IsCanonical(string(raw)); ok != exact {
			t.Fatalf("IsCanonical(%q) = %v, want %v", raw, ok, exact)
		}
	})
}
