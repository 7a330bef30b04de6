package taskgraph

import (
	"os"
	"testing"
)

// TestMain removes the benchmark fixtures (see scaleFixture) after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}
