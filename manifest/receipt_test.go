package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// independentReceipt writes the receipt object by hand, members in
// ascending order, and hashes it with crypto/sha256. The strings used are
// plain ASCII, so quoting needs no escapes.
func independentReceipt(manifestSHA, op, taskID string, gen int64) string {
	obj := `{"generation":` + strconv.FormatInt(gen, 10) +
		`,"manifestSha256":"` + manifestSHA +
		`","operation":"` + op +
		`","taskId":"` + taskID + `"}`
	sum := sha256.Sum256([]byte(obj))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestReceiptIndependentDigest(t *testing.T) {
	m, err := Build(NewSurface(Options{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	const task = "01J9Z8Y7X6W5V4T3S2R1Q0P9N8"
	for _, tc := range []struct {
		op  string
		gen int64
	}{{"create", 0}, {"claim", 1}, {"heartbeat", 7}, {"complete", 1<<53 - 1}} {
		got, err := ReceiptSHA256(m.SHA256(), tc.op, task, tc.gen)
		if err != nil {
			t.Fatalf("ReceiptSHA256(%s, %d): %v", tc.op, tc.gen, err)
		}
		if want := independentReceipt(m.SHA256(), tc.op, task, tc.gen); got != want {
			t.Errorf("ReceiptSHA256(%s, %d) = %s, want %s", tc.op, tc.gen, got, want)
		}
	}
}

func TestReceiptBindsEveryInput(t *testing.T) {
	a, b := Digest([]byte("manifest a")), Digest([]byte("manifest b"))
	base := func() (string, string, string, int64) { return a, "complete", "T1", 3 }
	ref, err := ReceiptSHA256(base())
	if err != nil {
		t.Fatal(err)
	}
	variants := map[string][4]any{
		"manifest":   {b, "complete", "T1", int64(3)},
		"operation":  {a, "fail", "T1", int64(3)},
		"task":       {a, "complete", "T2", int64(3)},
		"generation": {a, "complete", "T1", int64(4)},
	}
	for name, v := range variants {
		got, err := ReceiptSHA256(v[0].(string), v[1].(string), v[2].(string), v[3].(int64))
		if err != nil {
			t.Fatal(err)
		}
		if got == ref {
			t.Errorf("changing the %s does not change the receipt", name)
		}
	}
}

func TestNewReceipt(t *testing.T) {
	ms := Digest([]byte("m"))
	r, err := NewReceipt(ms, "cancel", "T9", 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.ManifestSHA256 != ms || r.ReceiptSHA256 != independentReceipt(ms, "cancel", "T9", 2) {
		t.Errorf("NewReceipt = %+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"manifestSha256":"` + ms + `","receiptSha256":"` + r.ReceiptSHA256 + `"}`; string(b) != want {
		t.Errorf("Receipt JSON = %s, want %s", b, want)
	}
	if _, err := NewReceipt("nope", "cancel", "T9", 2); !errors.Is(err, ErrInvalidReceipt) {
		t.Errorf("NewReceipt with a bad digest: %v", err)
	}
}

func TestReceiptRejects(t *testing.T) {
	ms := Digest([]byte("m"))
	cases := []struct {
		name, manifest, op, task string
		gen                      int64
		wantMsg                  string
	}{
		{"empty manifest digest", "", "claim", "T", 1, "manifestSha256"},
		{"uppercase manifest digest", "sha256:" + strings.ToUpper(ms[7:]), "claim", "T", 1, "manifestSha256"},
		{"unprefixed manifest digest", ms[7:], "claim", "T", 1, "manifestSha256"},
		{"tool name as operation", ms, ToolClaim, "T", 1, `operation "graph_task_claim" is not one of`},
		{"operator operation", ms, "requeue", "T", 1, `operation "requeue"`},
		{"empty operation", ms, "", "T", 1, "operation"},
		{"empty task", ms, "claim", "", 1, "taskId"},
		{"empty task of inspect", ms, "inspect", "", 1, "taskId"},
		{"empty task of complete", ms, "complete", "", 0, "taskId"},
		{"empty task of create at a generation", ms, "create", "", 1, "taskId"},
		{"long task", ms, "claim", strings.Repeat("T", MaxTaskIDBytes+1), 1, "taskId"},
		{"non-UTF-8 task", ms, "claim", "T\xff", 1, "taskId"},
		{"negative generation", ms, "claim", "T", -1, "generation"},
		{"inexact generation", ms, "claim", "T", 1 << 53, "generation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReceiptSHA256(tc.manifest, tc.op, tc.task, tc.gen)
			if !errors.Is(err, ErrInvalidReceipt) {
				t.Fatalf("ReceiptSHA256 = %q, %v; want ErrInvalidReceipt", got, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
		})
	}
	// A claim that found nothing, a workflow outline and a whole-graph
	// create bind no task.
	for _, op := range []string{"claim", "inspect", "create"} {
		if _, err := ReceiptSHA256(ms, op, "", 0); err != nil {
			t.Errorf("%s without a task at generation 0 rejected: %v", op, err)
		}
	}
	if _, err := ReceiptSHA256(ms, "claim", strings.Repeat("T", MaxTaskIDBytes), 0); err != nil {
		t.Errorf("task id of exactly %d bytes rejected: %v", MaxTaskIDBytes, err)
	}
}

// TestReceiptDirectFormIsCanonical requires the receipt written directly
// (a task ID of plain ASCII) to be the digest of the RFC 8785 form that
// DigestJSON computes through an encode and a parse, and task IDs that need
// escapes to keep working through DigestJSON.
func TestReceiptDirectFormIsCanonical(t *testing.T) {
	t.Parallel()
	ms := Digest([]byte("m"))
	ids := []string{"", "01J9Z8Y7X6W5V4T3S2R1Q0P9N8", "a<b>&c/d", " ~!#$%'()*+,-.:;=?@[]^_`{|}", "with\"quote", `back\slash`, "tab\t", "é", "\u2028", "\x7f"}
	for gen := int64(0); gen <= 3; gen++ {
		for _, id := range append(ids, strings.Repeat("z", MaxTaskIDBytes)) {
			if id == "" && gen != 0 {
				continue
			}
			got, err := ReceiptSHA256(ms, "claim", id, gen*(1<<51))
			if err != nil {
				t.Fatalf("ReceiptSHA256(%q): %v", id, err)
			}
			want, err := DigestJSON(receiptDoc{Generation: gen * (1 << 51), ManifestSHA256: ms, Operation: "claim", TaskID: id})
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("ReceiptSHA256(%q, %d) = %s, DigestJSON %s", id, gen*(1<<51), got, want)
			}
		}
	}
}
