package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// tasks show and workflow show say what a task requires and, before it is
// due, until when it waits; --json carries both.
func TestShowRequiresAndWaiting(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	due := t0.Add(time.Hour)
	c, err := e.s.CreateTask(ctx, "r", taskgraph.NodeSpec{NodeID: "gpu", Requires: []string{"gpu", "cuda"}, NotBefore: due})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.CreateTask(ctx, "r", taskgraph.NodeSpec{NodeID: "plain", Requires: []string{"gpu"}}); err != nil {
		t.Fatal(err)
	}
	r := e.cli("", "tasks", "show", c.Task.TaskID).want(t, exitOK)
	for _, want := range []string{"requires       cuda, gpu", "waiting until  " + timestamp(due) + " (in 1h"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tasks show lacks %q:\n%s", want, r.stdout)
		}
	}
	r = e.cli("", "tasks", "show", c.Task.TaskID, "--json").want(t, exitOK)
	if compact := strings.Join(strings.Fields(r.stdout), ""); !strings.Contains(compact, `"requires":["cuda","gpu"]`) || !strings.Contains(compact, `"due_at":"`+due.Format(time.RFC3339)) {
		t.Errorf("tasks show --json:\n%s", r.stdout)
	}
	r = e.cli("", "workflow", "show", "r").want(t, exitOK)
	for _, want := range []string{"waiting until " + timestamp(due), "requires gpu"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("workflow show lacks %q:\n%s", want, r.stdout)
		}
	}
}
