package taskgraph

import (
	"os/exec"
	"strings"
	"testing"
)

// The domain imports no driver: everything it knows of one comes through
// tgdriver (doc.go, "The seam"). go list -deps is the proof the review
// asked for; a driver reached through any other package fails it too.
func TestDomainImportsNoDriver(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the package's dependencies")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/graph-engineering/graph-engineering-mcp/"
	allowed := map[string]bool{module + "taskgraph": true, module + "taskgraph/tgdriver": true, module + "lease": true, module + "taskgraph/jcs": true, module + "taskgraph/limits": true,
		module + "taskgraph/audit": true, module + "taskgraph/jsonvalue": true}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, module) && !allowed[dep] {
			t.Errorf("package taskgraph depends on %s; the domain may import only lease, tgdriver, taskgraph/jcs, taskgraph/limits, taskgraph/audit and taskgraph/jsonvalue of this module", dep)
		}
		if strings.Contains(dep, "sqlite") || strings.Contains(dep, "pgx") {
			t.Errorf("package taskgraph depends on the database library %s", dep)
		}
	}
}
