package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// tasks show names who caused each event (kind, name, principal) and
// workflow show names the principals that submitted the workflow.
func TestShowCommandsNameActorsAndPrincipals(t *testing.T) {
	e := newEnv(t)
	ctx := taskgraph.WithPrincipal(context.Background(), "planner")
	c, err := e.s.CreateTask(ctx, "wf", taskgraph.NodeSpec{NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	wctx := taskgraph.WithPrincipal(context.Background(), "gpu-pool")
	cl, ok, err := e.s.Claim(wctx, taskgraph.ClaimRequest{Owner: "gpu-pool", TaskID: c.Task.TaskID, Lease: claimLease})
	if err != nil || !ok {
		t.Fatal(err)
	}
	if _, err := e.s.Complete(wctx, holderOfClaim(cl), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	var show struct {
		Events []struct {
			Kind  string `json:"kind"`
			Actor *struct {
				Kind, Name, Principal string
			} `json:"actor"`
		} `json:"events"`
	}
	decodeJSON(t, e.cli("", "tasks", "show", c.Task.TaskID, "--json").want(t, 0).stdout, &show)
	want := map[string]string{"create": "planner", "claim": "gpu-pool", "complete": "gpu-pool"}
	for _, ev := range show.Events {
		if p, ok := want[ev.Kind]; ok && (ev.Actor == nil || ev.Actor.Principal != p) {
			t.Errorf("%s event: actor %+v, want principal %s", ev.Kind, ev.Actor, p)
		}
	}
	text := e.cli("", "tasks", "show", c.Task.TaskID).want(t, 0).stdout
	if !strings.Contains(text, "ACTOR") || !strings.Contains(text, "(principal gpu-pool)") {
		t.Fatalf("tasks show does not name the actors:\n%s", text)
	}
	if out := e.cli("", "workflow", "show", "wf").want(t, 0).stdout; !strings.Contains(out, "submitted by principal planner") {
		t.Fatalf("workflow show does not name the submitting principal:\n%s", out)
	}
}
