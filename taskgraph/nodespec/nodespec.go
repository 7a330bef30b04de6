package nodespec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/dag"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/gate"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jsonvalue"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/keyrate"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Spec describes a task to create (taskgraph.NodeSpec).
type Spec struct {
	NodeID string
	// Payload is a JSON object; nil means {}.
	Payload json.RawMessage
	// DependsOn names nodes of the same workflow that must complete first.
	DependsOn []string
	// MaxAttempts bounds how often the task may be claimed; 0 means limits.DefaultMaxAttempts.
	MaxAttempts int
	// Priority (limits.MinPriority..limits.MaxPriority, default 0): claim-next takes the
	// highest priority first, the oldest task first within a priority.
	Priority int
	// Requires (at most limits.MaxRequires tags, each matching limits.TagPattern) are the
	// capabilities a claimant must advertise; stored sorted and deduplicated.
	Requires []string
	// RetryDelay is the wait before the first retry of a retryable failure
	// that names no delay; it doubles per retry, capped at limits.MaxRetryDelay.
	// nil means limits.DefaultRetryDelay; 0 retries at once. 0..limits.MaxRetryDelay.
	RetryDelay *time.Duration
	// NotBefore, when after the creation's server time (at most
	// MaxNotBefore ahead), keeps the task from being claimed before it: it is
	// pending (once its dependencies completed) but not claimable.
	NotBefore time.Time
	// ConcurrencyKey, when set (an identifier, as workflow_id), names the
	// task's concurrency key: the key's limit caps how many of its tasks
	// are claimed at once and how often they are claimed (see keyrate.Limit).
	ConcurrencyKey string
	// KeyLimit, with ConcurrencyKey, sets the key's limit if it has none
	// (its fields are named concurrency_max_claimed, concurrency_rate and
	// concurrency_rate_interval_ms in errors)
	// yet; a key with a different limit refuses the create (ErrConflict:
	// an operator changes a limit, taskgraph's SetKeyLimit).
	KeyLimit *keyrate.Limit
	// Kind is tgdriver.KindTask ("" too) or tgdriver.KindGate: an approval gate, never
	// claimed, decided by a person (taskgraph's Store.DecideGate) once its
	// dependencies completed.
	Kind string
	// GateTimeout (gates only; 0: none, else 1 s..gate.MaxTimeout, whole
	// milliseconds) is how long a gate awaits a decision once its
	// dependencies completed; then the server decides as OnTimeout says
	// (gate.OnTimeoutApprove or gate.OnTimeoutReject, required with a timeout).
	GateTimeout time.Duration
	OnTimeout   string
}

// Node is a Spec after validation (Normalize).
type Node struct {
	NodeID      string
	Payload     json.RawMessage
	DependsOn   []string
	MaxAttempts int
	Priority    int
	Requires    []string // canonical
	RetryDelay  time.Duration
	NotBefore   time.Time
	Key         string
	KeyLimit    *keyrate.Limit
	Kind        string // tgdriver.KindTask or KindGate
	GateTimeout time.Duration
	OnTimeout   string
}

func Normalize(n Spec) (Node, error) {
	if err := rules.CheckIdentifier("node_id", n.NodeID); err != nil {
		return Node{}, err
	}
	payload := n.Payload
	if len(bytes.TrimSpace(payload)) == 0 || string(bytes.TrimSpace(payload)) == "null" {
		payload = json.RawMessage(`{}`)
	}
	p, err := checkJSON("payload", payload, limits.MaxPayloadBytes, true)
	if err != nil {
		return Node{}, err
	}
	if len(n.DependsOn) > limits.MaxDependsOn {
		return Node{}, rules.Invalid("depends_on", "must list at most %d nodes (got %d)", limits.MaxDependsOn, len(n.DependsOn))
	}
	seen := make(map[string]bool, len(n.DependsOn))
	deps := make([]string, 0, len(n.DependsOn))
	for _, d := range n.DependsOn {
		if err := rules.CheckIdentifier("depends_on", d); err != nil {
			return Node{}, err
		}
		if d == n.NodeID {
			return Node{}, rules.Invalid("depends_on", "node %q cannot depend on itself (the graph must be acyclic)", d)
		}
		if seen[d] {
			return Node{}, rules.Invalid("depends_on", "lists %q twice", d)
		}
		seen[d] = true
		deps = append(deps, d)
	}
	ma := n.MaxAttempts
	if ma == 0 {
		ma = limits.DefaultMaxAttempts
	}
	if ma < limits.MinMaxAttempts || ma > limits.MaxMaxAttempts {
		return Node{}, rules.Invalid("max_attempts", "must be between %d and %d (got %d)", limits.MinMaxAttempts, limits.MaxMaxAttempts, n.MaxAttempts)
	}
	if n.Priority < limits.MinPriority || n.Priority > limits.MaxPriority {
		return Node{}, rules.Invalid("priority", "must be an integer between %d and %d (got %d)", limits.MinPriority, limits.MaxPriority, n.Priority)
	}
	req, err := rules.CanonicalTags("requires", n.Requires, limits.MaxRequires)
	if err != nil {
		return Node{}, err
	}
	rd := limits.DefaultRetryDelay
	if n.RetryDelay != nil {
		rd = *n.RetryDelay
		if rd < 0 || rd > limits.MaxRetryDelay || rd%time.Millisecond != 0 {
			return Node{}, rules.Invalid("retry_delay_ms", "must be a whole number of milliseconds between 0 and %d (got %v)", limits.MaxRetryDelay.Milliseconds(), rd)
		}
	}
	if n.ConcurrencyKey != "" {
		if err := rules.CheckIdentifier("concurrency_key", n.ConcurrencyKey); err != nil {
			return Node{}, err
		}
	}
	if n.KeyLimit != nil {
		if n.ConcurrencyKey == "" {
			return Node{}, rules.Invalid("concurrency_key", "is required with a limit (concurrency_max_claimed, concurrency_rate)")
		}
		if err := n.KeyLimit.Check("concurrency_"); err != nil {
			return Node{}, err
		}
	}
	kind, timeout, onTimeout, err := gate.CheckNode(gate.Node{Kind: n.Kind, Timeout: n.GateTimeout, OnTimeout: n.OnTimeout,
		HasRequires: len(req) > 0, HasNotBefore: !n.NotBefore.IsZero()})
	if err != nil {
		return Node{}, err
	}
	return Node{NodeID: n.NodeID, Payload: p, DependsOn: deps, MaxAttempts: ma, Priority: n.Priority,
		Requires: req, RetryDelay: rd, NotBefore: n.NotBefore, Key: n.ConcurrencyKey, KeyLimit: n.KeyLimit,
		Kind: kind, GateTimeout: timeout, OnTimeout: onTimeout}, nil
}

// Differs names the field in which n, a node created again, differs from
// existing, the node as stored; "" when they are the same node (payloads
// compared semantically, dependencies as sets).
func Differs(existing, n Node) string {
	a := slices.Sorted(slices.Values(existing.DependsOn))
	b := slices.Sorted(slices.Values(n.DependsOn))
	switch {
	case !SameJSON(existing.Payload, n.Payload):
		return "payload"
	case !slices.Equal(a, b):
		return "depends_on"
	case existing.MaxAttempts != n.MaxAttempts:
		return "max_attempts"
	case existing.Priority != n.Priority:
		return "priority"
	case !slices.Equal(existing.Requires, n.Requires):
		return "requires"
	case existing.RetryDelay != n.RetryDelay:
		return "retry_delay_ms"
	case existing.Key != n.Key:
		return "concurrency_key"
	case existing.Kind != n.Kind:
		return "kind"
	case existing.GateTimeout != n.GateTimeout || existing.OnTimeout != n.OnTimeout:
		return "gate_timeout_ms or on_timeout"
	}
	return ""
}

// checkJSON validates one JSON value (jsonvalue.Check) as field, with at
// most max bytes once compacted, and returns it compacted.
func checkJSON(field string, raw []byte, max int, wantObject bool) (json.RawMessage, error) {
	v, err := jsonvalue.Check(raw, max, limits.MaxJSONDepth, wantObject)
	if err != nil {
		return nil, rules.Invalid(field, "%s", err.Error())
	}
	return v, nil
}

// SameJSON compares two JSON values semantically (object key order and
// whitespace do not matter; numbers compare by their text).
func SameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	da := json.NewDecoder(bytes.NewReader(a))
	da.UseNumber()
	db := json.NewDecoder(bytes.NewReader(b))
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// NormalizeAll normalizes the nodes of one creation (Normalize), each
// named at most once, and orders them so that every node comes after the
// nodes of the same creation it depends on (dag.Order), or reports the
// first broken node or a cycle. A node's error names it when there are
// several.
func NormalizeAll(specs []Spec) (nodes []Node, order []int, err error) {
	nodes = make([]Node, len(specs))
	index := make(map[string]int, len(specs))
	ids, deps := make([]string, len(specs)), make([][]string, len(specs))
	for i, s := range specs {
		n, err := Normalize(s)
		if err != nil {
			if len(specs) > 1 {
				return nil, nil, fmt.Errorf("node %d (%q): %w", i, s.NodeID, err)
			}
			return nil, nil, err
		}
		if _, dup := index[n.NodeID]; dup {
			return nil, nil, rules.Invalid("node_id", "node %q appears twice in one workflow creation", n.NodeID)
		}
		index[n.NodeID] = i
		nodes[i], ids[i], deps[i] = n, n.NodeID, n.DependsOn
	}
	order, err = dag.Order(ids, deps, index)
	if err != nil {
		return nil, nil, err
	}
	return nodes, order, nil
}

// CreateDetail is the detail of the history's create event of n, created
// in state with due time dueMS (0: none): what the node set beyond the
// defaults.
func (n Node) CreateDetail(state string, dueMS int64) map[string]any {
	detail := map[string]any{"node_id": n.NodeID, "depends_on": n.DependsOn, "state": state, "max_attempts": n.MaxAttempts}
	if n.Priority != 0 {
		detail["priority"] = n.Priority
	}
	if len(n.Requires) > 0 {
		detail["requires"] = n.Requires
	}
	if dueMS > 0 {
		detail["due_at_ms"] = dueMS
	}
	if n.RetryDelay != limits.DefaultRetryDelay {
		detail["retry_delay_ms"] = n.RetryDelay.Milliseconds()
	}
	if n.Key != "" {
		detail["concurrency_key"] = n.Key
	}
	if n.Kind == tgdriver.KindGate {
		detail["kind"] = tgdriver.KindGate
		if n.GateTimeout > 0 {
			detail["gate_timeout_ms"] = n.GateTimeout.Milliseconds()
			detail["on_timeout"] = n.OnTimeout
		}
	}
	return detail
}
