package keys

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
)

// BenchClaimPastRateHeldKey measures a claim-next and its completion on
// store s while HeldTasks queued tasks of a key held back by its rate (one
// claim an hour, spent) come before every other task in claim order: each
// claim-next passes over them to take a task without a key. Migration
// 0025 parks all but the first Rate of them, so a claim walks one index
// entry of theirs instead of HeldTasks. It reports claims/s; it asserts no
// speed. The drivers' benchmarks of this name call it:
//
//	go test -run '^$' -bench ClaimPastRateHeldKey -benchtime 2000x ./taskgraph/storetest ./taskgraph/tgpostgres
func BenchClaimPastRateHeldKey(b *testing.B, s *tg.Store) {
	ctx := context.Background()
	lim := &tg.KeyLimit{Rate: 1, RateInterval: time.Hour}
	held := make([]tg.NodeSpec, HeldTasks)
	for i := range held {
		held[i] = tg.NodeSpec{NodeID: fmt.Sprint("h", i), Payload: json.RawMessage(`{}`), ConcurrencyKey: "held", KeyLimit: lim, Priority: 10}
	}
	if _, err := s.CreateWorkflow(ctx, "held", held); err != nil {
		b.Fatal(err)
	}
	// The first claim spends the key's rate: the rest are held for an hour.
	if c, ok, err := s.Claim(ctx, tg.ClaimRequest{Owner: "w", Lease: time.Minute}); err != nil || !ok || c.Task.ConcurrencyKey != "held" {
		b.Fatalf("the first claim: %+v ok %v err %v, want a task of key held", c.Task, ok, err)
	}
	wf := 0
	more := func() {
		free := make([]tg.NodeSpec, 1000)
		for i := range free {
			free[i] = tg.NodeSpec{NodeID: fmt.Sprint("f", i), Payload: json.RawMessage(`{}`)}
		}
		wf++
		if _, err := s.CreateWorkflow(ctx, fmt.Sprint("free", wf), free); err != nil {
			b.Fatal(err)
		}
	}
	more()
	b.ResetTimer()
	start := time.Now()
	var paused time.Duration
	for i := 0; i < b.N; i++ {
		c, ok, err := s.Claim(ctx, tg.ClaimRequest{Owner: "w", Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if !ok {
			b.StopTimer()
			p := time.Now()
			more()
			paused += time.Since(p)
			b.StartTimer()
			i--
			continue
		}
		if c.Task.ConcurrencyKey != "" {
			b.Fatalf("claimed %s of key %s, held by its rate", c.Task.NodeID, c.Task.ConcurrencyKey)
		}
		if _, err := s.Complete(ctx, stenv.Holder(c), json.RawMessage(`1`)); err != nil {
			b.Fatal(err)
		}
	}
	took := time.Since(start) - paused
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took.Seconds(), "cycles/s")
}

// HeldTasks is how many queued tasks BenchClaimPastRateHeldKey holds back.
const HeldTasks = 10_000
