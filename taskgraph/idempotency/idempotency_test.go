package idempotency

import (
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
