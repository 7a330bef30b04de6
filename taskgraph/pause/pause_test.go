package pause

import (
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

func TestHoldingTakesThePauseOfAllClaimingFirst(t *testing.T) {
	t.Parallel()
	all := tgdriver.PauseRow{AtMS: 1000, Reason: "deploy", By: "ana"}
	wf := tgdriver.PauseRow{WorkflowID: "wf", AtMS: 2000, Reason: "bad input", By: "bo"}
	if p := Holding(nil, "wf"); p != nil {
		t.Fatalf("no pause holds a claim, got %+v", p)
	}
	if p := Holding([]tgdriver.PauseRow{all, wf}, "wf"); p == nil || p.WorkflowID != "" || p.Operator != "ana" {
		t.Fatalf("the pause of all claiming holds a claim of wf first, got %+v", p)
	}
	if p := Holding([]tgdriver.PauseRow{wf}, "wf"); p == nil || p.WorkflowID != "wf" {
		t.Fatalf("wf's pause holds a claim of wf, got %+v", p)
	}
	if p := Holding([]tgdriver.PauseRow{wf}, ""); p != nil {
		t.Fatalf("a workflow's pause holds a claim-next of any workflow: %+v", p)
	}
}

func TestStringSaysWhatWhoAndWhy(t *testing.T) {
	t.Parallel()
	s := Of(tgdriver.PauseRow{WorkflowID: "wf", AtMS: 0, Reason: "bad input", By: "bo"}).String()
	for _, want := range []string{"workflow wf is paused", "1970-01-01T00:00:00Z", "operator bo", "bad input"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q does not say %q", s, want)
		}
	}
	if Scope("") != "all claiming" || Scope("wf") != "workflow wf" {
		t.Fatalf("Scope = %q, %q", Scope(""), Scope("wf"))
	}
}
