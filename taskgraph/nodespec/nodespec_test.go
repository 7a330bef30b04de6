package nodespec

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

func TestNormalizeFillsDefaultsAndCanonicalizes(t *testing.T) {
	t.Parallel()
	n, err := Normalize(Spec{NodeID: "a", Payload: json.RawMessage(` { "x" : 1 } `), Requires: []string{"gpu", "arm", "gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(n.Payload) != `{"x":1}` || n.MaxAttempts != limits.DefaultMaxAttempts || n.RetryDelay != limits.DefaultRetryDelay ||
		len(n.Requires) != 2 || n.Requires[0] != "arm" || n.Kind != tgdriver.KindTask {
		t.Fatalf("Normalize = %+v", n)
	}
	if n, err := Normalize(Spec{NodeID: "b"}); err != nil || string(n.Payload) != `{}` {
		t.Fatalf("a node without payload = %+v, %v; want {}", n, err)
	}
}

func TestNormalizeNamesTheBrokenField(t *testing.T) {
	t.Parallel()
	neg := -time.Second
	for _, c := range []struct {
		s     Spec
		field string
	}{
		{Spec{}, "node_id"},
		{Spec{NodeID: "a", Payload: json.RawMessage(`[1]`)}, "payload"},
		{Spec{NodeID: "a", DependsOn: []string{"a"}}, "depends_on"},
		{Spec{NodeID: "a", DependsOn: []string{"b", "b"}}, "depends_on"},
		{Spec{NodeID: "a", MaxAttempts: limits.MaxMaxAttempts + 1}, "max_attempts"},
		{Spec{NodeID: "a", Priority: limits.MaxPriority + 1}, "priority"},
		{Spec{NodeID: "a", RetryDelay: &neg}, "retry_delay_ms"},
		{Spec{NodeID: "a", ConcurrencyKey: "-x"}, "concurrency_key"},
		{Spec{NodeID: "a", Kind: tgdriver.KindGate, Requires: []string{"gpu"}}, "requires"},
	} {
		_, err := Normalize(c.s)
		var ve *rules.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("Normalize(%+v) = %v; want an invalid %s", c.s, err, c.field)
		}
	}
}

func TestDiffersComparesContentNotForm(t *testing.T) {
	t.Parallel()
	a := Node{NodeID: "a", Payload: json.RawMessage(`{"x":1,"y":[1,2]}`), DependsOn: []string{"p", "q"}, MaxAttempts: 3}
	b := a
	b.Payload = json.RawMessage(`{"y":[1,2], "x":1}`)
	b.DependsOn = []string{"q", "p"}
	if what := Differs(a, b); what != "" {
		t.Fatalf("the same node in another form differs in %s", what)
	}
	b.MaxAttempts = 4
	if what := Differs(a, b); what != "max_attempts" {
		t.Fatalf("Differs = %q, want max_attempts", what)
	}
	b = a
	b.Payload = json.RawMessage(`{"x":2,"y":[1,2]}`)
	if what := Differs(a, b); what != "payload" {
		t.Fatalf("Differs = %q, want payload", what)
	}
}
