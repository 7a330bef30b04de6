package storetest

import (
	"testing"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// harnessTests check the harness itself: a Snapshot that missed writes
// would make every "nothing was written" assertion of the suite vacuous.
var harnessTests = []test{
	{"SnapshotSeesEveryWrite", testSnapshotSeesEveryWrite},
}

func testSnapshotSeesEveryWrite(t *testing.T, h Harness) {
	e := setup(t, h)
	empty := e.DB.Snapshot(t)
	if e.DB.Snapshot(t) != empty {
		t.Fatal("two snapshots of an idle database differ")
	}
	tk := e.Create(t, "wf", "a")
	created := e.DB.Snapshot(t)
	if created == empty {
		t.Fatal("the snapshot did not change when a task was created")
	}
	if n := e.Count(t, `SELECT COUNT(*) FROM tasks WHERE task_id = ?`, tk.TaskID); n != 1 {
		t.Fatalf("Query found %d rows of the task just created", n)
	}
	// A change of one value, outside the store, is seen.
	e.DB.Exec(t, `UPDATE events SET detail = '{"x":1}' WHERE task_id = ?`, tk.TaskID)
	if e.DB.Snapshot(t) == created {
		t.Fatal("the snapshot did not change when an event's detail was edited")
	}
	// Reads through the store write nothing.
	edited := e.DB.Snapshot(t)
	if _, err := e.S.Task(e.Ctx, tk.TaskID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.ListTasks(e.Ctx, tg.ListFilter{}); err != nil {
		t.Fatal(err)
	}
	e.Unchanged(t, edited, "reads")
}
