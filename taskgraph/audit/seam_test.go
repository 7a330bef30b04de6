package audit

import (
	"os/exec"
	"strings"
	"testing"
)

// The history's package sits below the domain: it reads a store through
// History and the seam, never through taskgraph or a driver, so that the
// domain can import it without a cycle.
func TestAuditImportsNeitherTheDomainNorADriver(t *testing.T) {
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
	allowed := map[string]bool{module + "taskgraph/audit": true, module + "taskgraph/tgdriver": true, module + "lease": true,
		module + "taskgraph/jcs": true, module + "taskgraph/limits": true}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, module) && !allowed[dep] {
			t.Errorf("package audit depends on %s; it may import only tgdriver (and its lease), jcs and limits of this module", dep)
		}
	}
}
