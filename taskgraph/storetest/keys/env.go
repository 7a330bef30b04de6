package keys

import (
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/storetest/stenv"
)

// Harness opens stores of one driver on fresh databases (stenv.Harness).
type Harness = stenv.Harness

// env is one store on a fresh database, on a manual clock; this group's
// own helpers are methods of env, the shared ones of stenv.Env.
type env struct{ *stenv.Env }

func setup(t *testing.T, h Harness) *env { t.Helper(); return &env{stenv.Setup(t, h)} }

func setupWith(t *testing.T, h Harness, opts tg.Options) *env {
	t.Helper()
	return &env{stenv.SetupWith(t, h, opts)}
}

func holder(c tg.Claimed) lease.Holder { return stenv.Holder(c) }

func wantConflict(t *testing.T, err error, phrase string) {
	t.Helper()
	stenv.WantConflict(t, err, phrase)
}

// The operators of this group's operator commands.
var (
	alice = tg.Operator{Name: "alice", Reason: "INC-42: the upstream API is back"}
	bob   = tg.Operator{Name: "bob", Reason: "deploy 7.3"}
)
