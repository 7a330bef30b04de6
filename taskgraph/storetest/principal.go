package storetest

import (
	"testing"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// principalTests: the store records which principal created each task.
var principalTests = []test{
	{"CreatedByIsThePrincipal", testCreatedByIsThePrincipal},
}

func testCreatedByIsThePrincipal(t *testing.T, h Harness) {
	e := setup(t, h)
	ctx := tg.WithPrincipal(e.Ctx, "planner")
	c, err := e.S.CreateTask(ctx, "wf", tg.NodeSpec{NodeID: "a"})
	if err != nil || c.Task.CreatedBy != "planner" {
		t.Fatalf("create as planner: %+v %v; want CreatedBy planner", c.Task, err)
	}
	out, err := e.S.CreateWorkflow(ctx, "wf", []tg.NodeSpec{{NodeID: "b"}, {NodeID: "c", DependsOn: []string{"b"}}})
	if err != nil || out[0].Task.CreatedBy != "planner" || out[1].Task.CreatedBy != "planner" {
		t.Fatalf("workflow as planner: %+v %v", out, err)
	}
	// Without a principal (stdio, operator commands) the creator is empty.
	anon := e.Create(t, "wf", "d")
	if anon.CreatedBy != "" {
		t.Errorf("create without a principal: CreatedBy %q, want empty", anon.CreatedBy)
	}
	// An idempotent repeat by someone else keeps the original creator.
	again, err := e.S.CreateTask(tg.WithPrincipal(e.Ctx, "other"), "wf", tg.NodeSpec{NodeID: "a"})
	if err != nil || again.Created || again.Task.CreatedBy != "planner" {
		t.Fatalf("repeat by another principal: %+v %v; want the planner's task unchanged", again, err)
	}
	// Reads and writes return it.
	got, err := e.S.Task(e.Ctx, c.Task.TaskID)
	if err != nil || got.CreatedBy != "planner" {
		t.Fatalf("read back: %+v %v", got, err)
	}
	cl, ok, err := e.S.Claim(e.Ctx, tg.ClaimRequest{Owner: "w", TaskID: c.Task.TaskID})
	if err != nil || !ok || cl.Task.CreatedBy != "planner" {
		t.Fatalf("claim: %+v %v %v; want CreatedBy kept", cl.Task, ok, err)
	}
	if rows := e.DB.Query(t, "SELECT created_by FROM tasks WHERE task_id = ?", anon.TaskID); len(rows) != 1 || rows[0][0] != "" {
		t.Errorf("created_by of an anonymous task is %v, want NULL", rows)
	}
}
