package audit

import (
	"errors"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
)

// The verifier judges stored text by RFC 8785's order: a detail with names
// beyond the BMP passes in UTF-16 order and is refused in byte order.
func TestVerifierUsesUTF16KeyOrder(t *testing.T) {
	t.Parallel()
	utf16Order, err := jcs.Append(nil, map[string]any{"\ufb33": 1, "😀": 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"😀":2,"` + "\ufb33" + `":1}`; string(utf16Order) != want {
		t.Fatalf("detail = %s, want %s", utf16Order, want)
	}
	if err := CheckCanonical(string(utf16Order), `{}`, `{}`); err != nil {
		t.Fatalf("RFC 8785 order refused: %v", err)
	}
	byteOrder := `{"` + "\ufb33" + `":1,"😀":2}`
	if err := CheckCanonical(byteOrder, `{}`, `{}`); !errors.Is(err, ErrNotCanonical) {
		t.Fatalf("byte order: %v, want ErrNotCanonical", err)
	}
}
