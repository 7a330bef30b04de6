package taskgraph

import (
	"os/exec"
	"strings"
	"testing"
)

// The domain imports no driver: everything it knows of one comes through
// tgdriver (doc.go, "The seam"). go list -deps is the proof the review
// asked for; a driver reached through any other package fails it too. The
// history's package (audit) sits below the domain: it reads a store through
// audit.History and the seam, never through taskgraph, so the domain
// imports it without a cycle.
func TestDomainImportsNoDriver(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the package's dependencies")
	}
	const module = "github.com/graph-engineering/graph-engineering-mcp/"
	leaves := []string{"taskgraph/tgdriver", "lease", "taskgraph/jcs", "taskgraph/limits"}
	for _, c := range []struct {
		dir, pkg string
		may      []string
	}{
		{".", "taskgraph", append([]string{"taskgraph/audit", "taskgraph/jsonvalue", "taskgraph/workreport",
			"taskgraph/rules", "taskgraph/keyrate", "taskgraph/waitq", "taskgraph/dag", "taskgraph/idempotency", "taskgraph/retry", "taskgraph/gate", "taskgraph/nodespec", "taskgraph/pause", "taskgraph/taskview", "taskgraph/storeopts", "taskgraph/statusmsg", "taskgraph/broadcast", "taskgraph/hotpace", "taskgraph/hotlane", "taskgraph/sharedread"}, leaves...)},
		{"./audit", "taskgraph/audit", leaves},
		// The leaves split out of taskgraph never import it (no cycle,
		// no store state) nor each other beyond rules.
		{"./rules", "taskgraph/rules", leaves},
		{"./keyrate", "taskgraph/keyrate", append([]string{"taskgraph/rules"}, leaves...)},
		{"./waitq", "taskgraph/waitq", append([]string{"taskgraph/rules"}, leaves...)},
		{"./dag", "taskgraph/dag", append([]string{"taskgraph/rules"}, leaves...)},
		{"./idempotency", "taskgraph/idempotency", nil},
		{"./retry", "taskgraph/retry", leaves},
		{"./pause", "taskgraph/pause", leaves},
		{"./storeopts", "taskgraph/storeopts", leaves},
		{"./broadcast", "taskgraph/broadcast", nil},
		{"./hotpace", "taskgraph/hotpace", nil},
		{"./sharedread", "taskgraph/sharedread", nil},
		{"./hotlane", "taskgraph/hotlane", []string{"taskgraph/hotpace"}},
		{"./statusmsg", "taskgraph/statusmsg", append([]string{"taskgraph/taskview", "taskgraph/pause", "taskgraph/workreport", "taskgraph/gate", "taskgraph/rules"}, leaves...)},
		{"./taskview", "taskgraph/taskview", append([]string{"taskgraph/pause", "taskgraph/workreport", "taskgraph/gate", "taskgraph/rules"}, leaves...)},
		{"./gate", "taskgraph/gate", append([]string{"taskgraph/rules"}, leaves...)},
		{"./nodespec", "taskgraph/nodespec", append([]string{"taskgraph/rules", "taskgraph/gate", "taskgraph/keyrate", "taskgraph/jsonvalue", "taskgraph/dag"}, leaves...)},
	} {
		out, err := exec.Command(goTool, "list", "-deps", c.dir).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", c.dir, err)
		}
		allowed := map[string]bool{module + c.pkg: true}
		for _, p := range c.may {
			allowed[module+p] = true
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, module) && !allowed[dep] {
				t.Errorf("package %s depends on %s; it may import only %s of this module", c.pkg, dep, strings.Join(c.may, ", "))
			}
			if strings.Contains(dep, "sqlite") || strings.Contains(dep, "pgx") {
				t.Errorf("package %s depends on the database library %s", c.pkg, dep)
			}
		}
	}
}
