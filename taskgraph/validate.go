package taskgraph

import (
	"encoding/json"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jsonvalue"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
)

// Bounds on everything the store accepts. Inputs outside them are rejected
// with a *ValidationError naming the field and the rule; nothing is written.
// They are defined in the leaf package limits (which the capability manifest
// publishes) and re-exported here.
const (
	MaxIdentifierLen    = limits.MaxIdentifierLen
	MaxPayloadBytes     = limits.MaxPayloadBytes
	MaxResultBytes      = limits.MaxResultBytes
	MaxErrorBytes       = limits.MaxErrorBytes
	MaxReasonBytes      = limits.MaxReasonBytes
	MaxDependsOn        = limits.MaxDependsOn
	MaxTasksPerWorkflow = limits.MaxTasksPerWorkflow
	// MaxCreateNodes and MaxCreateBytes bound a whole-graph submit over
	// MCP (graph_task_create's nodes), which the adapter enforces.
	MaxCreateNodes     = limits.MaxCreateNodes
	MaxCreateBytes     = limits.MaxCreateBytes
	DefaultMaxAttempts = limits.DefaultMaxAttempts
	// MinPriority and MaxPriority bound NodeSpec.Priority (default 0).
	MinPriority    = limits.MinPriority
	MaxPriority    = limits.MaxPriority
	MinMaxAttempts = limits.MinMaxAttempts
	MaxMaxAttempts = limits.MaxMaxAttempts
	// MaxJSONDepth bounds the nesting of payloads and results.
	MaxJSONDepth = limits.MaxJSONDepth
)

// IdentifierPattern is the rule for workflow_id, node_id and owner.
const IdentifierPattern = limits.IdentifierPattern

// ValidIdentifier reports whether s matches IdentifierPattern.
func ValidIdentifier(s string) bool { return rules.ValidIdentifier(s) }

func checkIdentifier(field, s string) error { return rules.CheckIdentifier(field, s) }

func checkTaskID(s string) error {
	if s == "" {
		return invalid("task_id", "is required")
	}
	if !rules.TaskIDForm(s) {
		return &NotFoundError{What: "task", ID: s}
	}
	return nil
}

// checkJSON validates one JSON value (jsonvalue.Check) as field, with
// at most max bytes once compacted. It returns the value compacted.
func checkJSON(field string, raw []byte, max int, wantObject bool) (json.RawMessage, error) {
	v, err := jsonvalue.Check(raw, max, MaxJSONDepth, wantObject)
	if err != nil {
		return nil, invalid(field, "%s", err.Error())
	}
	return v, nil
}

// OverflowingNumber returns the first number in the JSON value raw that is
// beyond float64 range (see the payload rules), and whether there is one.
// Invalid JSON has none.
func OverflowingNumber(raw []byte) (string, bool) { return jsonvalue.OverflowingNumber(raw) }

func checkErrorText(s string) error { return rules.CheckErrorText(s) }

func checkOperator(op Operator) error { return rules.CheckOperator(op.Name, op.Reason) }
