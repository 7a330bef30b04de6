package storetest

import (
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/keys"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
)

// Harness opens stores of one driver on fresh databases (stenv.Harness).
type Harness = stenv.Harness

// Database is one fresh database of a Harness (stenv.Database).
type Database = stenv.Database

// t0 is where every store's manual clock starts.
var t0 = stenv.T0

// Run runs every behaviour of the suite as a subtest of t, each on a fresh
// database of h. The subtests are independent, so they run in parallel (see
// Harness.Parallel): a subtest shares nothing with another but the process.
func Run(t *testing.T, h Harness) {
	if h.NewDatabase == nil {
		t.Fatalf("storetest: harness %q has no NewDatabase", h.Name)
	}
	var slots chan struct{}
	if h.Parallel > 0 {
		slots = make(chan struct{}, h.Parallel)
	}
	groups := []struct {
		name  string
		tests []test
	}{
		{"Harness", harnessTests},
		{"Fencing", fencingTests},
		{"Graph", graphTests},
		{"Operator", operatorTests},
		{"History", historyTests},
		{"Audit", auditTests},
		{"Anchor", anchorTests},
		{"Bounds", boundsTests},
		{"Concurrency", concurrencyTests},
		{"Race", raceTests},
		{"LeaseTime", leaseTimeTests},
		{"Principal", principalTests},
		{"Flow", flowTests},
		{"Routing", routingTests},
		{"Request", requestTests},
		{"NextClaim", nextClaimTests},
		{"Report", reportTests},
		{"Pause", pauseTests},
		{"Poison", poisonTests},
		{"Key", group(keys.Tests)},
		{"Gate", gateTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					if slots != nil {
						slots <- struct{}{}
						// Released after the subtest's cleanups, which close its
						// stores and drop its database.
						t.Cleanup(func() { <-slots })
					}
					tc.fn(t, h)
				})
			}
		})
	}
}

// test is one behaviour of the suite.
type test struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// group converts a group of the suite kept in a package of its own.
func group(ts []stenv.Test) []test {
	out := make([]test, len(ts))
	for i, tc := range ts {
		out[i] = test{tc.Name, tc.Fn}
	}
	return out
}

// env is one store on a fresh database, on a manual clock; the suite's
// own helpers are methods of env, the shared ones of stenv.Env.
type env struct{ *stenv.Env }

func setup(t *testing.T, h Harness) *env { t.Helper(); return &env{stenv.Setup(t, h)} }

func setupWith(t *testing.T, h Harness, opts tg.Options) *env {
	t.Helper()
	return &env{stenv.SetupWith(t, h, opts)}
}

func holder(c tg.Claimed) lease.Holder { return stenv.Holder(c) }

func wantStale(t *testing.T, err error, reason lease.Reason) {
	t.Helper()
	stenv.WantStale(t, err, reason)
}

func wantConflict(t *testing.T, err error, phrase string) {
	t.Helper()
	stenv.WantConflict(t, err, phrase)
}
