package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// admin limit shows a key, changes its limit (recorded with the operator,
// applied to the next claim), keeps what a flag leaves out, and refuses
// wrong arguments; tasks show names a task's key.
func TestAdminLimit(t *testing.T) {
	e := newEnv(t)
	c, err := e.s.CreateTask(e.ctx, "wf", taskgraph.NodeSpec{NodeID: "a", ConcurrencyKey: "llm", KeyLimit: &taskgraph.KeyLimit{MaxClaimed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.CreateTask(e.ctx, "wf", taskgraph.NodeSpec{NodeID: "b", ConcurrencyKey: "llm"}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"admin", "limit", "--max", "2", "--reason", "x", "--yes"},             // no key
		{"admin", "limit", "llm", "--max", "2", "--yes"},                       // no reason
		{"admin", "limit", "llm", "--max", "-1", "--reason", "x", "--yes"},     // negative
		{"admin", "limit", "llm", "--rate", "10", "--reason", "x", "--yes"},    // no interval
		{"admin", "limit", "llm", "--rate", "10/0s", "--reason", "x", "--yes"}, // empty interval
		{"admin", "limit", "bad key", "--reason", "x", "--yes"},
	} {
		e.cli("", args...).want(t, exitUsage)
	}
	r := e.cli("", "admin", "limit", "llm").want(t, exitOK)
	if !strings.Contains(r.stdout, "at most 1 claimed at once") {
		t.Fatalf("admin limit llm says %q", r.stdout)
	}
	r = e.cli("", "tasks", "show", c.Task.TaskID).want(t, exitOK)
	if !strings.Contains(r.stdout, "llm") {
		t.Fatalf("tasks show does not name the key: %q", r.stdout)
	}
	r = e.cli("", "tasks", "show", c.Task.TaskID, "--json").want(t, exitOK)
	if !strings.Contains(r.stdout, `"concurrency_key": "llm"`) && !strings.Contains(r.stdout, `"concurrency_key":"llm"`) {
		t.Fatalf("tasks show --json does not name the key: %q", r.stdout)
	}
	claim := func() bool {
		t.Helper()
		_, ok, err := e.s.Claim(e.ctx, taskgraph.ClaimRequest{Owner: "w", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim() || claim() {
		t.Fatal("the cap of 1 did not hold")
	}
	r = e.cli("", "admin", "limit", "llm", "--max", "2", "--rate", "60/1m", "--reason", "quota raised", "--operator", "alice", "--yes", "--json").want(t, exitOK)
	var out limitJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Operation != "limit" || out.Operator != "alice" || out.Before == nil || out.Before.MaxClaimed != 1 ||
		out.After == nil || out.After.MaxClaimed != 2 || out.After.Rate != 60 || out.After.RateIntervalMS != 60000 || out.After.Claimed != 1 {
		t.Fatalf("admin limit --json: %q %v", r.stdout, err)
	}
	if !claim() {
		t.Fatal("a claim under the raised cap was refused")
	}
	// --rate none lifts the rate and keeps the cap.
	r = e.cli("", "admin", "limit", "llm", "--rate", "none", "--reason", "no quota", "--yes").want(t, exitOK)
	if !strings.Contains(r.stdout, "at most 2 claimed at once; 2 claimed now") || strings.Contains(r.stdout, "claims per") {
		t.Fatalf("admin limit --rate none says %q", r.stdout)
	}
	// A key nobody named shows as none.
	r = e.cli("", "admin", "limit", "other", "--json").want(t, exitOK)
	if !strings.Contains(r.stdout, `"before": null`) && !strings.Contains(r.stdout, `"before":null`) {
		t.Fatalf("admin limit of an unknown key: %q", r.stdout)
	}
}
