package taskgraph_test

// BenchmarkWorkflowView compares the two reads of a whole workflow that a
// view can make, on a workflow of 1,000 tasks whose payloads and results
// are 16 KiB each: Workflow (every column) and WorkflowGraph (without
// payloads and results), on SQLite and, when GRAPH_ENGINEERING_TEST_POSTGRES
// names a server, on PostgreSQL. Run it with
//
//	go test -run '^$' -bench WorkflowView -benchtime 20x -count 5 ./taskgraph
//
// scripts/bench-store.md records the figures.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

func BenchmarkWorkflowView(b *testing.B) {
	opens := map[string]func(b *testing.B) *taskgraph.Store{
		"sqlite": func(b *testing.B) *taskgraph.Store {
			s, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "tasks.db"), taskgraph.Options{}, tgsqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	if v := os.Getenv(pgtest.EnvVar); v != "" && v != "skip" {
		opens["postgres"] = func(b *testing.B) *taskgraph.Store {
			d, err := tgpostgres.Open(context.Background(), pgtest.URL(b), tgpostgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			s, err := taskgraph.OpenDriver(context.Background(), d, taskgraph.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}
	}
	for _, name := range []string{"sqlite", "postgres"} {
		open, ok := opens[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			s := open(b)
			defer s.Close()
			ctx := context.Background()
			const tasks = 1000
			body := strings.Repeat("x", 16<<10)
			specs := make([]taskgraph.NodeSpec, tasks)
			for i := range specs {
				specs[i] = taskgraph.NodeSpec{NodeID: fmt.Sprintf("n%d", i), Payload: json.RawMessage(`{"p":"` + body + `"}`)}
				if i > 0 {
					specs[i].DependsOn = []string{fmt.Sprintf("n%d", (i-1)/2)}
				}
			}
			if _, err := s.CreateWorkflow(ctx, "wf", specs); err != nil {
				b.Fatal(err)
			}
			for range tasks / 2 { // half of them completed with a result
				c, ok, err := s.Claim(ctx, taskgraph.ClaimRequest{Owner: "w", WorkflowID: "wf"})
				if err != nil || !ok {
					b.Fatalf("claim: %v %v", ok, err)
				}
				h := lease.Holder{TaskID: c.Task.TaskID, Owner: c.Lease.Owner, Generation: c.Lease.Generation, Token: c.Lease.Token}
				if _, err := s.Complete(ctx, h, json.RawMessage(`{"r":"`+body+`"}`)); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("Workflow", func(b *testing.B) {
				for b.Loop() {
					if wf, err := s.Workflow(ctx, "wf"); err != nil || len(wf.Tasks) != tasks {
						b.Fatalf("%d tasks, %v", len(wf.Tasks), err)
					}
				}
			})
			b.Run("WorkflowGraph", func(b *testing.B) {
				for b.Loop() {
					if wf, err := s.WorkflowGraph(ctx, "wf", 0); err != nil || len(wf.Tasks) != tasks {
						b.Fatalf("%d tasks, %v", len(wf.Tasks), err)
					}
				}
			})
		})
	}
}
