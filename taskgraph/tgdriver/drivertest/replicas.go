package drivertest

import (
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// replicaTests are the clauses of tgdriver.ReplicaCounter (caps.go).
var replicaTests = []test{
	{"ReplicasCountEachOther", testReplicasCountEachOther},
}

// testReplicasCountEachOther: a ReplicaCounter counts at least itself, and
// two started drivers on one database (two replicas) each come to count
// two, and one again once the other has closed. The count is the driver's
// last look, taken in the background: the contract waits for it. Drivers
// without the capability have nothing to check here.
func testReplicasCountEachOther(t *testing.T, h Harness) {
	db := h.NewDatabase(t)
	first := db.Open(t)
	rc, ok := first.(tgdriver.ReplicaCounter)
	if !ok {
		t.Skipf("the %s driver is not a tgdriver.ReplicaCounter", h.Name())
	}
	if err := first.Start(tgdriver.Hooks{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if n := rc.Replicas(); n < 1 {
		t.Fatalf("Replicas() = %d before any other replica, want at least 1", n)
	}
	second := db.Open(t)
	if err := second.Start(tgdriver.Hooks{}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	rc2, ok := second.(tgdriver.ReplicaCounter)
	if !ok {
		t.Fatalf("a second %s driver on the same database is not a tgdriver.ReplicaCounter", h.Name())
	}
	testwait.For(t, "both replicas to count two", func() bool { return rc.Replicas() == 2 && rc2.Replicas() == 2 })
	if err := second.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	testwait.For(t, "the remaining replica to count one", func() bool { return rc.Replicas() == 1 })
}
