package jsonnum

import (
	"math/big"
	"testing"
)

func TestExact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lit  string
		want string // a big.Rat in its String form; "" when not ok
	}{
		{"0", "0/1"},
		{"-1.5", "-3/2"},
		{"2e3", "2000/1"},
		{"0.0e999999999", "0/1"}, // zero whatever the exponent
		{"9007199254740993", "9007199254740993/1"}, // beyond float64, exact
		{"1e999999", ""}, // too large to expand
		{"01", ""},       // not JSON
		{"1.", ""},
		{"+1", ""},
		{"NaN", ""},
	} {
		r, ok := Exact(tc.lit)
		switch {
		case tc.want == "" && ok:
			t.Errorf("Exact(%q) = %v, want not ok", tc.lit, r)
		case tc.want != "" && (!ok || r.Cmp(mustRat(t, tc.want)) != 0):
			t.Errorf("Exact(%q) = %v, %v; want %s", tc.lit, r, ok, tc.want)
		}
	}
}

func mustRat(t *testing.T, s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("bad rational %q", s)
	}
	return r
}
