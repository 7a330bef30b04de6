package tools

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// Every cause the store reports has advice here and a row in MCP.md, with
// the retryable value the store gives it.
func TestUnavailableReasonsAreDocumented(t *testing.T) {
	b, err := os.ReadFile("../../MCP.md")
	if err != nil {
		t.Fatal(err)
	}
	sentinels := taskgraph.UnavailableErrors()
	for _, sentinel := range sentinels {
		err := fmt.Errorf("wrapped: %w", sentinel)
		reason, retryable, ok := taskgraph.UnavailableReason(err)
		if !ok || unavailableAdvice[reason] == "" {
			t.Errorf("%v: reason %q has no advice", sentinel, reason)
		}
		// The advice says whether the call may have been applied, as the
		// store does, and MCP.md's row says whether a blind retry is safe.
		applied := taskgraph.MayHaveApplied(err)
		advice := unavailableAdvice[reason]
		if says := strings.Contains(advice, "may have been applied") || strings.Contains(advice, "may or may not have taken effect"); says != applied {
			t.Errorf("advice for %s: says the call may have been applied %v, the store %v: %q", reason, says, applied, advice)
		} else if !applied && !strings.Contains(advice, "nothing was written") {
			t.Errorf("advice for %s does not say nothing was written: %q", reason, advice)
		}
		// A call that may have been applied is safe to repeat only with its
		// request_id, and its advice says so.
		blind := map[bool]string{true: "no: inspect first (with its `request_id`: yes", false: "yes |"}[applied]
		if applied && !strings.Contains(advice, "same request_id") {
			t.Errorf("advice for %s does not say to repeat the call with its request_id: %q", reason, advice)
		}
		if row := fmt.Sprintf("| `%s` | `%v` | %s", reason, retryable, blind); !strings.Contains(string(b), row) {
			t.Errorf("MCP.md lacks the row %s", row)
		}
	}
	if len(unavailableAdvice) != len(sentinels) {
		t.Errorf("advice for %d reasons, want the store's %d", len(unavailableAdvice), len(sentinels))
	}
}
