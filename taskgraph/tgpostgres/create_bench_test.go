package tgpostgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// BenchmarkCreateWorkflow creates one workflow of 500 nodes per op
// through the store (one replica): ten layers of 50, each node of a layer
// after the first depending on two nodes of the layer before, so a
// creation inserts 500 tasks and 900 edges. It reports tasks created per
// second of wall time; it asserts no speed.
//
//	go test -run '^$' -bench CreateWorkflow -benchtime 20x -count 3 ./taskgraph/tgpostgres
func BenchmarkCreateWorkflow(b *testing.B) {
	const layers, width = 10, 50
	ctx := context.Background()
	s, closeS := openStore(b, pgtest.URL(b))
	defer closeS()
	nodes := make([]tg.NodeSpec, 0, layers*width)
	for l := 0; l < layers; l++ {
		for i := 0; i < width; i++ {
			n := tg.NodeSpec{NodeID: fmt.Sprintf("l%d-n%02d", l, i), Payload: json.RawMessage(`{"job":"bench"}`)}
			if l > 0 {
				n.DependsOn = []string{fmt.Sprintf("l%d-n%02d", l-1, i), fmt.Sprintf("l%d-n%02d", l-1, (i+1)%width)}
			}
			nodes = append(nodes, n)
		}
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := s.CreateWorkflow(ctx, fmt.Sprintf("bench-%06d", i), nodes); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(nodes))/time.Since(start).Seconds(), "tasks/s")
}
