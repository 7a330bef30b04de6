package taskgraph

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// TestVerifyFigure measures VerifyHistory on a database of N tasks, each
// created, claimed and completed (3 events each), when
// GRAPH_ENGINEERING_VERIFY_FIGURE=N is set (200000 for the figure in the
// issue). It asserts nothing about time; it logs the seconds of five runs
// and their median. TestVerifyFigurePostgres (package tgpostgres) copies the
// same database into PostgreSQL.
func TestVerifyFigure(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GRAPH_ENGINEERING_VERIFY_FIGURE"))
	if n <= 0 {
		t.Skip("set GRAPH_ENGINEERING_VERIFY_FIGURE=N to measure audit verify on N tasks")
	}
	ctx := context.Background()
	// GRAPH_ENGINEERING_VERIFY_FIGURE_DB keeps the database at that path
	// (and reuses it when it exists).
	path := os.Getenv("GRAPH_ENGINEERING_VERIFY_FIGURE_DB")
	build := true
	if path == "" {
		path = filepath.Join(t.TempDir(), "figure.db")
	} else if _, err := os.Stat(path); err == nil {
		build = false
	}
	s, err := openSQLite(ctx, path, Options{}, tgsqlite.Options{Sync: tgsqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const perWF = 1000
	start := time.Now()
	for w := 0; build && w*perWF < n; w++ {
		nodes := make([]NodeSpec, 0, perWF)
		for i := 0; i < perWF && w*perWF+i < n; i++ {
			nodes = append(nodes, NodeSpec{NodeID: fmt.Sprintf("n%04d", i), Payload: json.RawMessage(`{"i":1}`)})
		}
		if _, err := s.CreateWorkflow(ctx, fmt.Sprintf("wf%04d", w), nodes); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := 0; build && g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for {
				c, ok, err := s.Claim(ctx, ClaimRequest{Owner: fmt.Sprintf("w%d", g)})
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				if _, err := s.Complete(ctx, holder(c), json.RawMessage(`{"ok":true}`)); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	if build {
		t.Logf("built %d tasks in %.1f s", n, time.Since(start).Seconds())
	}
	var secs []float64
	for i := 0; i < 5; i++ {
		start = time.Now()
		rep, err := s.VerifyHistory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		secs = append(secs, time.Since(start).Seconds())
		t.Logf("VerifyHistory: %d workflows, %d tasks, %d events, %d audit entries in %.2f s", rep.Workflows, rep.Tasks, rep.Events, rep.AuditEntries, secs[i])
	}
	sort.Float64s(secs)
	t.Logf("VerifyHistory: median %.2f s of %d runs", secs[len(secs)/2], len(secs))
}
