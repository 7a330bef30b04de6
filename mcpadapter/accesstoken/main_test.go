package accesstoken

import (
	"os"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// TestMain fails the run when the tests leave a goroutine running.
func TestMain(m *testing.M) { os.Exit(testwait.RunNoLeaks(m)) }
