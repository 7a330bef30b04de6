package idempotency

import (
	"slices"
	"strings"
	"testing"
)

func TestSealOpens(t *testing.T) {
	t.Parallel()
	key := Key("principal", "worker-1", "req-1")
	if key == Key("principal", "worker-1", "req-2") || len(key) != 64 {
		t.Fatalf("Key %q: want 64 hex digits, distinct per id", key)
	}
	token := strings.Repeat("token-", 10) // longer than one HMAC block
	sealed := Seal("req-1", key, token)
	if !strings.HasPrefix(sealed, "sealed:") || strings.Contains(sealed, "token") {
		t.Fatalf("Seal = %q, want the token hidden", sealed)
	}
	if got, ok := Open("req-1", key, sealed); !ok || got != token {
		t.Fatalf("Open = %q, %v; want the token back", got, ok)
	}
	if got, _ := Open("req-2", key, sealed); got == token {
		t.Fatal("another request id opened the sealed token")
	}
	if _, ok := Open("req-1", key, "plain"); ok {
		t.Fatal("Open accepted a value that is not sealed")
	}
}

// Differ names every argument that tells two writes apart: a changed
// digest, and one that only one write has; the same arguments are none.
func TestDiffer(t *testing.T) {
	a, err := Digests(map[string]any{"task_id": "t1", "lease_ms": 1000, "caps": []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	same, _ := Digests(map[string]any{"caps": []string{"gpu"}, "lease_ms": 1000, "task_id": "t1"})
	if d := Differ(a, same); d != nil {
		t.Errorf("Differ of the same arguments = %v, want none", d)
	}
	other, _ := Digests(map[string]any{"task_id": "t1", "lease_ms": 2000, "result": "x"})
	if d := Differ(a, other); !slices.Equal(d, []string{"caps", "lease_ms", "result"}) {
		t.Errorf("Differ = %v, want [caps lease_ms result]", d)
	}
	if _, err := Digests(map[string]any{"bad": func() {}}); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("Digests of an argument JSON cannot encode: %v, want an error naming it", err)
	}
}
