package audit_test

import (
	"bufio"
	"encoding/json"
	"math/rand"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/audit"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// exportLine is an `audit export` line, with the nested objects kept as the
// exact bytes they were written in.
type exportLine struct {
	Chain      string          `json:"chain"`
	V          int             `json:"v"`
	WorkflowID string          `json:"workflow_id"`
	Seq        int64           `json:"seq"`
	TaskID     string          `json:"task_id"`
	Kind       string          `json:"kind"`
	Owner      string          `json:"owner"`
	Generation int64           `json:"generation"`
	AtMS       int64           `json:"at_ms"`
	Detail     json.RawMessage `json:"detail"`
	DetailJSON string          `json:"detail_json"`
	State      json.RawMessage `json:"state"`
	Content    json.RawMessage `json:"content"`
	RawActor   struct {
		Kind, Name, Principal string
	} `json:"actor"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// The test vectors of MCP.md ("Audit trail format") hash as documented and
// are exactly what ExportEvent and ExportAuditEntry write, in RFC 8785 form.
func TestAuditFormatVectors(t *testing.T) {
	f, err := os.Open("../../MCP.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	in, n := false, 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "<!-- audit-vectors -->":
			in = true
			continue
		case line == "<!-- /audit-vectors -->":
			in = false
		}
		if !in || !strings.HasPrefix(line, "{") {
			continue
		}
		n++
		if c, err := jcs.Canonicalize([]byte(line)); err != nil || string(c) != line {
			t.Errorf("vector %d is not RFC 8785 canonical (%v):\n%s\n%s", n, err, line, c)
		}
		var x exportLine
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			t.Fatalf("vector %d: %v", n, err)
		}
		var got []byte
		var hash string
		if x.Chain == "audit" {
			a := tgdriver.AuditRow{Seq: x.Seq, Kind: x.Kind, WorkflowID: x.WorkflowID, AtMS: x.AtMS, Detail: string(x.Detail), PrevHash: x.PrevHash, Hash: x.Hash}
			if hash, err = audit.EntryHash(a); err != nil {
				t.Fatal(err)
			}
			got, err = audit.ExportEntry(a)
		} else {
			e := tgdriver.EventRow{WorkflowID: x.WorkflowID, Seq: x.Seq, TaskID: x.TaskID, Kind: x.Kind, Owner: x.Owner, Generation: x.Generation,
				AtMS: x.AtMS, PrevHash: x.PrevHash, Hash: x.Hash, HashVersion: x.V}
			if x.V == audit.HashV1 {
				e.Detail = x.DetailJSON
			} else {
				e.Detail, e.TaskState, e.Content = string(x.Detail), string(x.State), string(x.Content)
				e.ActorKind, e.ActorName, e.ActorPrincipal = x.RawActor.Kind, x.RawActor.Name, x.RawActor.Principal
			}
			if hash, err = audit.EventHash(&e); err != nil {
				t.Fatal(err)
			}
			got, err = audit.ExportEvent(&e)
		}
		if err != nil {
			t.Fatal(err)
		}
		if hash != x.Hash {
			t.Errorf("vector %d: hash %s, documented %s", n, hash, x.Hash)
		}
		if string(got) != line {
			t.Errorf("vector %d: exported as\n%s\ndocumented\n%s", n, got, line)
		}
	}
	if n < 5 {
		t.Fatalf("found %d vectors in MCP.md, want at least 5", n)
	}
}

// The store's export lines are what jcs.Canonicalize (checked against the
// RFC's vectors) makes of them, on strings of every kind.
func TestCanonicalEncoderAgreesWithJCS(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []rune{'a', 'Z', '"', '\\', '/', '<', '>', '&', '\b', '\f', '\n', '\r', '\t', 0, 1, 0x1f, 0x7f, 'é', 0x2028, 0x2029, 0xfeff, 0x1f600, 0xffff}
	for i := 0; i < 2000; i++ {
		var sb strings.Builder
		for j := rng.Intn(12); j > 0; j-- {
			sb.WriteRune(alphabet[rng.Intn(len(alphabet))])
		}
		s := sb.String()
		if i%7 == 0 {
			s += "\xff" // invalid UTF-8 becomes U+FFFD
		}
		detail, _ := json.Marshal(map[string]any{"reason": strings.ToValidUTF8(s, "\uFFFD")})
		c, err := jcs.Canonicalize(detail)
		if err != nil {
			t.Fatal(err)
		}
		e := tgdriver.EventRow{WorkflowID: s, TaskID: s, Kind: "k", Owner: s, AtMS: int64(i), HashVersion: audit.HashV2,
			Detail: string(c), TaskState: `{}`, Content: `{}`, ActorKind: "worker", ActorName: s, ActorPrincipal: s}
		out, err := audit.ExportEvent(&e)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if !utf8.Valid(out) {
			t.Fatalf("%q: invalid UTF-8 out", s)
		}
		want, err := jcs.Canonicalize(out)
		if err != nil || string(want) != string(out) {
			t.Fatalf("%q:\n got %s\nwant %s (%v)", s, out, want, err)
		}
	}
}
