package jsonvalue

import (
	"strings"
	"testing"
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
