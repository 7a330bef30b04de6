package workreport

import (
	"errors"
	"math"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
)

// Check names the member outside its bounds; Detail writes what Check
// accepts as canonical JSON, numbers as RFC 8785 writes them.
func TestCheckNamesTheFieldAndDetailIsCanonical(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	for want, rep := range map[string]Report{
		"progress.done":       {Progress: &Progress{Done: math.NaN()}},
		"progress.total":      {Progress: &Progress{Done: 1, Total: f(MaxProgressValue * 2)}},
		"status_message":      {StatusMessage: "\xff"},
		"usage.input_tokens":  {Usage: &Usage{InputTokens: -1}},
		"usage.output_tokens": {Usage: &Usage{OutputTokens: MaxUsageTokens + 1}},
		"usage.cost_usd":      {Usage: &Usage{CostUSD: math.Inf(1)}},
	} {
		var fe *FieldError
		if err := Check(rep); !errors.As(err, &fe) || fe.Field != want {
			t.Errorf("Check(%+v) = %v, want a *FieldError naming %s", rep, err, want)
		}
	}
	rep := Report{Progress: &Progress{Done: 0.0125, Total: f(3)}, StatusMessage: "ok", Usage: &Usage{InputTokens: 7, CostUSD: 1e-7}}
	if err := Check(rep); err != nil {
		t.Fatal(err)
	}
	b, err := jcs.Append(nil, rep.Detail())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"progress":{"done":0.0125,"total":3},"status_message":"ok","usage":{"cost_usd":1e-7,"input_tokens":7,"output_tokens":0}}`
	if string(b) != want {
		t.Errorf("Detail = %s, want %s", b, want)
	}
}
