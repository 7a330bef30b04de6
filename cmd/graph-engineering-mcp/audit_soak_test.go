package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// pythonAgreesWithVerify runs audit verify, audit head and audit export on
// the database at db, then scripts/audit-verify.py on the export with the
// head as --expect: the Python verifier must report it intact with the
// workflows, events (v1 and v2) and audit entries audit verify counted. It
// returns the summary for the test's log.
func pythonAgreesWithVerify(t *testing.T, db string) string {
	t.Helper()
	var rep struct {
		OK           bool
		Workflows    int
		Events       int64
		V1Events     int64 `json:"v1_events"`
		AuditEntries int64 `json:"audit_entries"`
	}
	decodeJSON(t, runAuditCommand(t, "audit", "verify", "--json", "--database", db).want(t, exitOK).stdout, &rep)
	if !rep.OK {
		t.Fatalf("audit verify: %+v", rep)
	}
	head, err := taskgraph.ParseAuditHead(strings.TrimSpace(runAuditCommand(t, "audit", "head", "--database", db).want(t, exitOK).stdout))
	if err != nil {
		t.Fatal(err)
	}
	if head.Entries != rep.AuditEntries || head.Events != rep.Events {
		t.Fatalf("audit head %s, audit verify counted %d entries and %d events", head, rep.AuditEntries, rep.Events)
	}
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(file, []byte(runAuditCommand(t, "audit", "export", "--database", db).want(t, exitOK).stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runPy(t, file, "--expect", head.String())
	m := pyVerified.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("audit-verify.py on the export: exit %d\n%s%s", code, out, errs)
	}
	got := strings.Join(m[1:], " ")
	want := fmt.Sprintf("%d %d %d %d %d", rep.Workflows, rep.Events, rep.V1Events, rep.Events-rep.V1Events, rep.AuditEntries)
	if got != want {
		t.Fatalf("audit-verify.py counts %s (workflows events v1 v2 entries), audit verify %s", got, want)
	}
	return fmt.Sprintf("audit-verify.py agrees with audit verify: %d workflows, %d events, %d audit entries, head %s", rep.Workflows, rep.Events, rep.AuditEntries, head)
}

// runAuditCommand runs an audit command in-process, like runCLI but without
// clearing the HTTP environment (t.Setenv), which the parallel soak tests
// that call pythonAgreesWithVerify may not do; audit commands read none of
// it, and --database names the database.
func runAuditCommand(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{appName}, args...), strings.NewReader(""), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}
