package jsonvalue

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// The cheap pre-scan never hides an overflowing number from the exact one.
func TestMayOverflowNeverMissesAnOverflow(t *testing.T) {
	for _, raw := range []string{`1e400`, `{"a":[1,-1.8e308]}`, `1E+309`, `0.5e999`, strings.Repeat("9", 309), `{"x":` + strings.Repeat("1", 400) + `}`} {
		if !mayOverflow([]byte(raw)) {
			t.Errorf("mayOverflow(%.40s) = false for an overflowing number", raw)
		}
		if _, ok := OverflowingNumber([]byte(raw)); !ok {
			t.Errorf("OverflowingNumber(%.40s) found nothing", raw)
		}
	}
	for _, raw := range []string{`{"owner":"w","lease_ms":60000,"claim_token":"abcdefabcdef"}`, `1e30`, `1.7976931348623157e308`, `{"e":"ee","v":12e-5}`, strings.Repeat("9", 308)} {
		if _, ok := OverflowingNumber([]byte(raw)); ok {
			t.Errorf("OverflowingNumber(%.40s) reported an overflow", raw)
		}
	}
	if mayOverflow([]byte(`{"owner":"w","lease_ms":60000,"claim_token":"abcdefabcdef","result":{"ok":true}}`)) {
		t.Error("an ordinary request went to the slow scan")
	}
}

// fastCases are values the fast path must judge as the decoder does.
var fastCases = []string{
	`{"ok":true}`, ` { "a" : [ 1 , 2.5e10 , -0.0 , "x\"y" , null , false , {} , [] ] } `, `"\u00e9\n"`, `0`, `-1`, `1e400`,
	`01`, `1.`, `.5`, `-`, `1e`, `1e+`, `tru`, `nul`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a\u0000":1,"a":2}`,
	`{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{1:2}`, `"abc`, "\"a\tb\"", `"\x"`, `"\u12"`, `"\u12G4"`, `[[[[1]]]]`, `{"a":{"b":{"c":{}}}}`,
	`{} {}`, `{}x`, ``, `   `, `[`, `{`, `{"a"`, `{"a":`, `1.7976931348623157e308`, `-1.8e308`, `12e-999`, `9e99`,
	strings.Repeat("9", 200) + "e99", strings.Repeat("9", 201), strings.Repeat("9", 300) + "e8", `{"k":"` + strings.Repeat("é", 50) + `"}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18}`,
	`"\ud800"`, `{"\ud800":1,"\udbff":2}`, "\"\u2028\"", `"<&>"`, `[1,{"a":[true,{"b":null}]}]`,
}

// checkAgrees runs Check with and without its fast path and fails when
// they disagree: the fast path accepts only what the decoder accepts, and
// then gives the same compacted value.
func checkAgrees(t *testing.T, raw []byte, max, maxDepth int, wantObject bool) {
	t.Helper()
	fast, fastOK := fastCheck(raw, max, maxDepth, wantObject)
	if !fastOK {
		return
	}
	// The full path alone: what Check did before the fast path.
	want, err := checkFull(raw, max, maxDepth, wantObject)
	if err != nil {
		t.Fatalf("fast path accepted %q (max %d, depth %d, object %v), the decoder refuses it: %v", raw, max, maxDepth, wantObject, err)
	}
	if !bytes.Equal(fast, want) {
		t.Fatalf("fast path compacted %q to %q, the decoder to %q", raw, fast, want)
	}
}

func TestFastCheckAgreesWithTheDecoder(t *testing.T) {
	t.Parallel()
	accepted := 0
	for _, c := range fastCases {
		for _, wantObject := range []bool{false, true} {
			for _, lim := range [][2]int{{1 << 20, 64}, {8, 64}, {1 << 20, 2}, {1 << 20, 1}} {
				checkAgrees(t, []byte(c), lim[0], lim[1], wantObject)
				if _, ok := fastCheck([]byte(c), lim[0], lim[1], wantObject); ok {
					accepted++
				}
			}
		}
	}
	// The fast path is taken by the ordinary values (else it saves nothing).
	for _, c := range []string{`{"ok":true}`, `{"i":12,"s":"x","a":[1.5,null]}`} {
		if _, ok := fastCheck([]byte(c), 1<<20, 64, true); !ok {
			t.Errorf("fast path refused the ordinary value %s", c)
		}
	}
	if accepted == 0 {
		t.Fatal("the fast path accepted nothing")
	}
}

func FuzzFastCheck(f *testing.F) {
	for _, c := range fastCases {
		f.Add([]byte(c), true)
		f.Add([]byte(c), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, wantObject bool) {
		if !utf8.Valid(raw) {
			return
		}
		checkAgrees(t, raw, 1<<16, 8, wantObject)
		checkAgrees(t, raw, 16, 3, wantObject)
	})
}

func BenchmarkCheckResult(b *testing.B) {
	raw := []byte(`{"ok":true}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(raw, 1<<20, 64, false); err != nil {
			b.Fatal(err)
		}
	}
}
