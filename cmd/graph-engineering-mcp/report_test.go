package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// tasks show, workflow show and workflow watch show what workers
// reported, and both verifiers (audit verify and scripts/audit-verify.py)
// accept the history that records it, fractional numbers included.
func TestWorkerReportShownAndVerified(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	created, err := e.s.CreateWorkflow(ctx, "wf", []taskgraph.NodeSpec{{NodeID: "a"}, {NodeID: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := created[0].Task.TaskID, created[1].Task.TaskID
	ca := e.claim("w1", a)
	total := 10.0
	rep := taskgraph.Report{Progress: &taskgraph.Progress{Done: 3, Total: &total}, StatusMessage: "parsing files\nsecond line",
		Usage: &taskgraph.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.0125}}
	if _, err := e.s.Heartbeat(taskgraph.WithReport(ctx, rep), holderOfClaim(ca), time.Minute); err != nil {
		t.Fatal(err)
	}
	// Numbers RFC 8785 writes differently from Python's repr.
	cb := e.claim("w2", b)
	tiny := taskgraph.Report{Progress: &taskgraph.Progress{Done: 1e-7}, Usage: &taskgraph.Usage{CostUSD: 0.000001}}
	if _, err := e.s.Complete(taskgraph.WithReport(ctx, tiny), holderOfClaim(cb), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}

	out := e.cli("", "tasks", "show", a).want(t, exitOK).stdout
	// The table's columns are aligned: compare words.
	words := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"progress 3 of 10 (30%)", "worker says parsing files second line", "by generation 1",
		"usage 1200 input and 300 output tokens, $0.0125 (every attempt)"} {
		if !strings.Contains(words, want) {
			t.Errorf("tasks show lacks %q:\n%s", want, out)
		}
	}
	var shown struct {
		Task struct {
			Report     taskgraph.Report `json:"report"`
			TotalUsage taskgraph.Usage  `json:"total_usage"`
		} `json:"task"`
	}
	decodeJSON(t, e.cli("", "tasks", "show", a, "--json").want(t, exitOK).stdout, &shown)
	if r := shown.Task; r.Report.StatusMessage != rep.StatusMessage || r.TotalUsage != *rep.Usage || r.Report.Progress == nil || *r.Report.Progress.Total != 10 {
		t.Errorf("tasks show --json: %+v", shown)
	}
	var wf struct {
		Usage taskgraph.Usage `json:"usage"`
	}
	decodeJSON(t, e.cli("", "workflow", "show", "wf", "--json").want(t, exitOK).stdout, &wf)
	if want := (taskgraph.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.0125 + 0.000001}); wf.Usage != want {
		t.Errorf("workflow show --json usage %+v, want %+v", wf.Usage, want)
	}
	v, err := e.s.Workflow(ctx, "wf")
	if err != nil {
		t.Fatal(err)
	}
	frame := redrawFrame(v, e.clock.Now(), asciiStyle)
	if !strings.Contains(frame, "claimed by w1 (generation 1): 3 of 10 (30%): parsing files second line") || !strings.Contains(frame, "usage: 1200 input and 300 output tokens") {
		t.Errorf("the watch frame does not show the report:\n%s", frame)
	}
	t.Log(pythonAgreesWithVerify(t, e.path))
}
