package dag

import (
	"fmt"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
)

// Order orders the nodes of one creation (ids[i] depends on the nodes
// deps[i]; index maps an id to its position) so that every node comes after
// the nodes of the same creation it depends on, or reports a cycle
// (cycleError): a *rules.ValidationError on depends_on.
func Order(ids []string, deps [][]string, index map[string]int) ([]int, error) {
	nodes := len(ids)
	indeg := make([]int, nodes)
	dependents := make([][]int, nodes)
	for i := range nodes {
		for _, d := range deps[i] {
			if j, ok := index[d]; ok {
				indeg[i]++
				dependents[j] = append(dependents[j], i)
			}
		}
	}
	queue := make([]int, 0, nodes)
	for i := range nodes {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for k := 0; k < len(queue); k++ {
		for _, j := range dependents[queue[k]] {
			if indeg[j]--; indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	if len(queue) != nodes {
		return nil, cycleError(ids, deps, index, indeg)
	}
	return queue, nil
}

// maxCyclePath bounds the nodes a cycle error spells out.
const maxCyclePath = 16

// cycleError names one cycle of a creation by its path: the nodes left with
// unmet dependencies after a topological sort (indeg > 0) each depend on at
// least one other such node, so following those dependencies from the
// smallest one (the smallest dependency first, for a stable message) must
// come back to a node already on the path.
func cycleError(ids []string, deps [][]string, index map[string]int, indeg []int) error {
	start := -1
	for i, d := range indeg {
		if d > 0 && (start < 0 || ids[i] < ids[start]) {
			start = i
		}
	}
	onPath := map[int]int{}
	var path []int
	for i := start; ; {
		if at, seen := onPath[i]; seen {
			path = append(path[at:], i)
			break
		}
		onPath[i] = len(path)
		path = append(path, i)
		next := -1
		for _, d := range deps[i] {
			if j, ok := index[d]; ok && indeg[j] > 0 && (next < 0 || d < ids[next]) {
				next = j
			}
		}
		i = next
	}
	names := make([]string, 0, min(len(path), maxCyclePath+1))
	for k, i := range path {
		if k == maxCyclePath && len(path) > maxCyclePath+1 {
			names = append(names, fmt.Sprintf("… (%d more) …", len(path)-maxCyclePath-1), ids[path[len(path)-1]])
			break
		}
		names = append(names, ids[i])
	}
	return rules.Invalid("depends_on", "node %q is on a dependency cycle: %s (each depends on the next); a workflow must be acyclic, and nothing was created",
		ids[path[0]], strings.Join(names, " -> "))
}
