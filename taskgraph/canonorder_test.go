package taskgraph

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// The audit trail's key order is RFC 8785's (UTF-16 code units), which
// differs from byte order only for names with characters beyond U+FFFF.
// Every name the store has written into a hashed detail, state or content
// is a fixed ASCII name (audit.go, package audit), where the two orders
// agree: switching the store from byte order to UTF-16 order changed no
// stored hash, and old histories verify unchanged. This test pins both halves: the names of a
// history holding every kind of event are ASCII, and it verifies.
func TestHashedNamesAreASCIISoKeyOrderChangedNoHash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.create(t, "wf", "a")
	c := b.create(t, "wf", "c", "a")
	b.create(t, "wf", "d")
	ca := b.claim(t, "w", a.TaskID, time.Minute)
	if _, err := b.s.Heartbeat(b.ctx, holder(ca), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.Complete(b.ctx, holder(ca), json.RawMessage(`{"ok":"😀"}`)); err != nil {
		t.Fatal(err)
	}
	cc := b.claim(t, "w", c.TaskID, time.Minute)
	if _, err := b.s.Fail(b.ctx, holder(cc), "boom 😀", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.s.CancelTask(b.ctx, c.TaskID, "no longer 😀 needed"); err != nil {
		t.Fatal(err)
	}
	b.verify(t)
	var out bytes.Buffer
	if err := b.s.ExportAudit(b.ctx, &out); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var obj map[string]any
		if err := json.Unmarshal(line, &obj); err != nil {
			t.Fatal(err)
		}
		if k, ok := obj["kind"].(string); ok {
			kinds[k] = true
		}
		var walk func(path string, v any)
		walk = func(path string, v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					for i := 0; i < len(k); i++ {
						if k[i] >= 0x80 {
							t.Errorf("%s holds the non-ASCII name %q: its order depends on the encoder's", path, k)
						}
					}
					walk(path+"."+k, e)
				}
			case []any:
				for _, e := range x {
					walk(path, e)
				}
			}
		}
		walk("line", obj)
	}
	for _, k := range []string{EventCreate, EventClaim, EventHeartbeat, EventComplete, EventRetry, EventCancel, EventReady} {
		if !kinds[k] {
			t.Errorf("the history holds no %s event; got %v", k, kinds)
		}
	}
}
