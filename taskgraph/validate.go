package taskgraph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/gate"
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
		return &notFoundError{what: "task", id: s}
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

// normalizedNode is a NodeSpec after validation.
type normalizedNode struct {
	NodeID      string
	Payload     json.RawMessage
	DependsOn   []string
	MaxAttempts int
	Priority    int
	Requires    []string // canonical
	RetryDelay  time.Duration
	NotBefore   time.Time
	Key         string
	KeyLimit    *KeyLimit
	Kind        string // KindTask or KindGate
	GateTimeout time.Duration
	OnTimeout   string
}

func normalizeNode(n NodeSpec) (normalizedNode, error) {
	if err := checkIdentifier("node_id", n.NodeID); err != nil {
		return normalizedNode{}, err
	}
	payload := n.Payload
	if len(bytes.TrimSpace(payload)) == 0 || string(bytes.TrimSpace(payload)) == "null" {
		payload = json.RawMessage(`{}`)
	}
	p, err := checkJSON("payload", payload, MaxPayloadBytes, true)
	if err != nil {
		return normalizedNode{}, err
	}
	if len(n.DependsOn) > MaxDependsOn {
		return normalizedNode{}, invalid("depends_on", "must list at most %d nodes (got %d)", MaxDependsOn, len(n.DependsOn))
	}
	seen := make(map[string]bool, len(n.DependsOn))
	deps := make([]string, 0, len(n.DependsOn))
	for _, d := range n.DependsOn {
		if err := checkIdentifier("depends_on", d); err != nil {
			return normalizedNode{}, err
		}
		if d == n.NodeID {
			return normalizedNode{}, invalid("depends_on", "node %q cannot depend on itself (the graph must be acyclic)", d)
		}
		if seen[d] {
			return normalizedNode{}, invalid("depends_on", "lists %q twice", d)
		}
		seen[d] = true
		deps = append(deps, d)
	}
	ma := n.MaxAttempts
	if ma == 0 {
		ma = DefaultMaxAttempts
	}
	if ma < MinMaxAttempts || ma > MaxMaxAttempts {
		return normalizedNode{}, invalid("max_attempts", "must be between %d and %d (got %d)", MinMaxAttempts, MaxMaxAttempts, n.MaxAttempts)
	}
	if n.Priority < MinPriority || n.Priority > MaxPriority {
		return normalizedNode{}, invalid("priority", "must be an integer between %d and %d (got %d)", MinPriority, MaxPriority, n.Priority)
	}
	req, err := canonicalTags("requires", n.Requires, MaxRequires)
	if err != nil {
		return normalizedNode{}, err
	}
	rd := DefaultRetryDelay
	if n.RetryDelay != nil {
		rd = *n.RetryDelay
		if rd < 0 || rd > MaxRetryDelay || rd%time.Millisecond != 0 {
			return normalizedNode{}, invalid("retry_delay_ms", "must be a whole number of milliseconds between 0 and %d (got %v)", MaxRetryDelay.Milliseconds(), rd)
		}
	}
	if n.ConcurrencyKey != "" {
		if err := checkKey("concurrency_key", n.ConcurrencyKey); err != nil {
			return normalizedNode{}, err
		}
	}
	if n.KeyLimit != nil {
		if n.ConcurrencyKey == "" {
			return normalizedNode{}, invalid("concurrency_key", "is required with a limit (concurrency_max_claimed, concurrency_rate)")
		}
		if err := checkKeyLimit("concurrency_", *n.KeyLimit); err != nil {
			return normalizedNode{}, err
		}
	}
	kind, timeout, onTimeout, err := gate.CheckNode(gate.Node{Kind: n.Kind, Timeout: n.GateTimeout, OnTimeout: n.OnTimeout,
		HasRequires: len(req) > 0, HasNotBefore: !n.NotBefore.IsZero()})
	if err != nil {
		return normalizedNode{}, err
	}
	return normalizedNode{NodeID: n.NodeID, Payload: p, DependsOn: deps, MaxAttempts: ma, Priority: n.Priority,
		Requires: req, RetryDelay: rd, NotBefore: n.NotBefore, Key: n.ConcurrencyKey, KeyLimit: n.KeyLimit,
		Kind: kind, GateTimeout: timeout, OnTimeout: onTimeout}, nil
}

func checkErrorText(s string) error { return rules.CheckErrorText(s) }

func checkOperator(op Operator) error { return rules.CheckOperator(op.Name, op.Reason) }

// notFoundError names what was not found. It matches ErrNotFound.
type notFoundError struct{ what, id string }

// Error implements error.
func (e *notFoundError) Error() string {
	return fmt.Sprintf("%s %q not found", e.what, e.id)
}

// Is reports whether target is ErrNotFound.
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }
