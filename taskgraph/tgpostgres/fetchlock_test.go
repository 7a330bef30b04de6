package tgpostgres

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// Fetch locks the rows of its updates (two or more) before it updates
// any, in task id order, whether or not their guards hold, and then the
// rows of the capped keys of the tasks whose claims they may end, in key
// order (answered in Fetched.Keys): lockUpdatedSQL, lockUpdatedKeysSQL.
// An update statement does not take its rows in its arrays' order: over a
// small table PostgreSQL plans it as a hash join, which updates in the
// table's order, and without the lock first a batch's completions
// deadlocked with creations locking their dependencies in task id order
// (storetest Key: KeyCreateDepsBesideBatchLockInOrder, four deadlocks in
// one run). Which rows the transaction holds is seen from another
// connection (FOR NO KEY UPDATE SKIP LOCKED) while it is open; the updates'
// guards never hold here, so a row held was locked before them.
func TestFetchLocksUpdatedRowsFirst(t *testing.T) {
	ctx := testCtx(t)
	url := pgtest.URL(t)
	d := open(t, url, Options{})
	c := raw(t, url)
	execAll(t, c,
		`INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('w', 1, 1)`,
		`INSERT INTO concurrency_keys (key, max_claimed, updated_at_ms) VALUES ('capped', 5, 0), ('free', 0, 0)`,
		`INSERT INTO tasks (task_id, workflow_id, node_id, payload, depends_on, state, max_attempts, unmet, created_at_ms, updated_at_ms, concurrency_key)
			VALUES ('c1', 'w', 'c1', '{}', '[]', 'pending', 3, 0, 1, 1, 'capped'), ('c2', 'w', 'c2', '{}', '[]', 'pending', 3, 0, 1, 1, ''),
			('f1', 'w', 'f1', '{}', '[]', 'pending', 3, 0, 1, 1, 'free'), ('f2', 'w', 'f2', '{}', '[]', 'pending', 3, 0, 1, 1, ''),
			('h1', 'w', 'h1', '{}', '[]', 'pending', 3, 0, 1, 1, ''), ('h2', 'w', 'h2', '{}', '[]', 'pending', 3, 0, 1, 1, '')`,
	)
	// Guards no pending task passes: nothing is updated.
	complete := func(id string) tgdriver.TaskUpdate {
		return tgdriver.TaskUpdate{TaskID: id,
			Set:   tgdriver.TaskSet{State: tgdriver.Val("completed"), Result: tgdriver.Val(`{}`), UpdatedAtMS: 2},
			Guard: tgdriver.TaskGuard{States: []string{"claimed"}, Generation: tgdriver.Val[int64](9)}}
	}
	heartbeat := func(id string) tgdriver.TaskUpdate {
		return tgdriver.TaskUpdate{TaskID: id,
			Set:   tgdriver.TaskSet{StatusMessage: tgdriver.Val("working"), UpdatedAtMS: 2},
			Guard: tgdriver.TaskGuard{States: []string{"claimed"}, Generation: tgdriver.Val[int64](9)}}
	}
	for _, tc := range []struct {
		name    string
		updates []tgdriver.TaskUpdate
		keys    []string // the keys' rows held
	}{
		{"completions, one with a capped key", []tgdriver.TaskUpdate{complete("c1"), complete("c2")}, []string{"capped"}},
		{"completions without a capped key", []tgdriver.TaskUpdate{complete("f1"), complete("f2")}, nil},
		{"heartbeats", []tgdriver.TaskUpdate{heartbeat("h1"), heartbeat("h2")}, nil},
		{"two shapes", []tgdriver.TaskUpdate{complete("c1"), heartbeat("h1")}, []string{"capped"}},
		{"out of task id order", []tgdriver.TaskUpdate{complete("f2"), complete("f1")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ids []string
			for _, u := range tc.updates {
				ids = append(ids, u.TaskID)
			}
			fetched, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			var keys []string
			go func() {
				done <- d.Write(ctx, func(tx tgdriver.Tx) error {
					got, err := tx.Fetch(context.Background(), tgdriver.Fetch{Updates: tc.updates})
					if err != nil {
						return err
					}
					for i, u := range got.Updated {
						if u.OK {
							t.Errorf("update %d (%s) passed its guard", i, ids[i])
						}
					}
					keys = got.Keys
					close(fetched)
					<-release
					return nil
				})
			}()
			testwait.Recv(t, "the fetch", fetched)
			// free lists the rows of query's table another transaction
			// could lock now.
			free := func(query string, ids []string) []string {
				rows, err := c.Query(ctx, query, ids)
				if err == nil {
					ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
				}
				if err != nil {
					t.Fatal(err)
				}
				return ids
			}
			freeTasks := free(`SELECT task_id FROM tasks WHERE task_id = ANY($1) FOR NO KEY UPDATE SKIP LOCKED`, ids)
			freeKeys := free(`SELECT key FROM concurrency_keys WHERE key = ANY($1) FOR NO KEY UPDATE SKIP LOCKED`, []string{"capped", "free"})
			close(release)
			if err := testwait.Recv(t, "the write", done); err != nil {
				t.Fatal(err)
			}
			if len(freeTasks) > 0 {
				t.Errorf("rows of the updates not held by the fetch: %v (of %v)", freeTasks, ids)
			}
			var heldKeys []string
			for _, k := range []string{"capped", "free"} {
				if !slices.Contains(freeKeys, k) {
					heldKeys = append(heldKeys, k)
				}
			}
			if !slices.Equal(heldKeys, tc.keys) || !slices.Equal(keys, tc.keys) {
				t.Errorf("keys' rows held by the fetch %v, answered in Fetched.Keys %v; want %v", heldKeys, keys, tc.keys)
			}
		})
	}
}
