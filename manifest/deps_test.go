package manifest

import (
	"os/exec"
	"strings"
	"testing"
)

// The manifest publishes the store's bounds without importing the store:
// it reads them from the leaf package taskgraph/limits, so a program that
// only describes a surface (and the store's own packages) links no store
// code and no database driver.
func TestManifestImportsNoStore(t *testing.T) {
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
	allowed := map[string]bool{module + "manifest": true, module + "lease": true, module + "taskgraph/jcs": true, module + "taskgraph/limits": true}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, module) && !allowed[dep] {
			t.Errorf("package manifest depends on %s; it may import only lease, taskgraph/jcs and taskgraph/limits of this module", dep)
		}
		if strings.Contains(dep, "sqlite") || strings.Contains(dep, "pgx") {
			t.Errorf("package manifest depends on the database library %s", dep)
		}
	}
}
