package dag

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
)

func index(ids []string) map[string]int {
	m := make(map[string]int, len(ids))
	for i, id := range ids {
		m[id] = i
	}
	return m
}

func TestOrderPutsDependenciesFirst(t *testing.T) {
	t.Parallel()
	ids := []string{"c", "a", "b"}
	deps := [][]string{{"a", "b", "outside"}, nil, {"a"}}
	order, err := Order(ids, deps, index(ids))
	if err != nil || !slices.Equal(order, []int{1, 2, 0}) {
		t.Fatalf("Order = %v, %v; want [1 2 0] (a, b, c)", order, err)
	}
}

func TestOrderNamesACycle(t *testing.T) {
	t.Parallel()
	ids := []string{"x", "b", "a", "c"}
	deps := [][]string{nil, {"c"}, {"b"}, {"a", "x"}}
	_, err := Order(ids, deps, index(ids))
	var ve *rules.ValidationError
	if !errors.As(err, &ve) || ve.Field != "depends_on" || !strings.Contains(err.Error(), "a -> b -> c -> a") {
		t.Fatalf("Order of a cycle = %v, want a depends_on error naming a -> b -> c -> a", err)
	}
}
