package taskgraph

import (
	"os"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// TestMain removes the benchmark fixtures (see scaleFixture) after the run,
// and fails it when the tests leave a goroutine running.
func TestMain(m *testing.M) {
	code := testwait.RunNoLeaks(m)
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}
