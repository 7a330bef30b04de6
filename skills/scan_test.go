package skills

import (
	"strings"
	"testing"
)

func TestInternalHost(t *testing.T) {
	for host, internal := range map[string]bool{
		"localhost": true, "LocalHost.": true, "a.localhost": true, "db.internal": true,
		"x.corp": true, "x.lan": true, "x.local": true, "router.home.arpa": true,
		"127.0.0.1": true, "0.0.0.0": true, "10.255.0.1": true, "172.16.0.1": true,
		"172.31.0.1": true, "192.168.0.1": true, "169.254.169.254": true,
		"::1": true, "::": true, "fc00::1": true, "fdff::1": true, "fe80::1%25eth0": true,
		"::ffff:10.0.0.1": true, "100.100.100.200": true,
		"2130706433": true, "0x7f000001": true, "0177.0.0.1": true, "127.1": true, "10.1": true,
		"example.com": false, "8.8.8.8": false, "172.32.0.1": false, "172.15.255.255": false,
		"192.169.0.1": false, "2001:db8::1": false, "local": false, "corp.example.com": false,
		"1.2.3.4.5": false, "4294967296": false, "256.0.0.1": false, "": false,
	} {
		if got := internalHost(host) != ""; got != internal {
			t.Errorf("internalHost(%q) = %v, want %v", host, got, internal)
		}
	}
}

func TestScanTextReportsLineAndKind(t *testing.T) {
	text := "line one\nline two\nkey " + "gh" + "p_" + strings.Repeat("Ab1", 12) + "\n"
	f := scanText([]byte(text))
	if f == nil || f.Rule != RuleCredential || f.Line != 3 || f.What != "a GitHub token" {
		t.Fatalf("finding = %+v", f)
	}
	f = scanText([]byte("a\nb\nc\nsee http://10.0.0.1/\n"))
	if f == nil || f.Rule != RuleInternalHost || f.Line != 4 || !strings.Contains(f.What, "10.0.0.1") {
		t.Fatalf("finding = %+v", f)
	}
	if f := scanText([]byte("# Plain documentation\n\nUse https://example.com.\n")); f != nil {
		t.Fatalf("clean text flagged: %+v", f)
	}
}

func TestScanValuesSeesDecodedStrings(t *testing.T) {
	v := map[string]any{"metadata": map[string]any{"requirements": []any{"ok", "AKIA" + "EXAMPLEEXAMPLE12"}}}
	if f := scanValues(v); f == nil || f.Rule != RuleCredential {
		t.Fatalf("finding = %+v", f)
	}
	if f := scanValues(map[string]any{"description": "fine", "n": int64(3), "b": true, "z": nil}); f != nil {
		t.Fatalf("clean values flagged: %+v", f)
	}
}
