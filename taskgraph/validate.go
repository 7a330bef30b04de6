package taskgraph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
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

var identifierRE = regexp.MustCompile(IdentifierPattern)

// ValidIdentifier reports whether s matches IdentifierPattern.
func ValidIdentifier(s string) bool { return identifierRE.MatchString(s) }

func checkIdentifier(field, s string) error {
	if s == "" {
		return invalid(field, "is required")
	}
	if !identifierRE.MatchString(s) {
		if len(s) > MaxIdentifierLen {
			return invalid(field, "must be at most %d characters (got %d)", MaxIdentifierLen, len(s))
		}
		return invalid(field, "must match %s: a letter or digit, then letters, digits, '_', '.', ':' or '-'", IdentifierPattern)
	}
	return nil
}

func checkTaskID(s string) error {
	if s == "" {
		return invalid("task_id", "is required")
	}
	if len(s) != 26 || !isCrockford(s) {
		return &notFoundError{what: "task", id: s}
	}
	return nil
}

func isCrockford(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// checkJSON validates one JSON value: well formed, a single value, no
// duplicate object keys, nesting at most MaxJSONDepth. It returns the value
// compacted.
func checkJSON(field string, raw []byte, max int, wantObject bool) (json.RawMessage, error) {
	// Whitespace does not count against the bound, but a raw input far past
	// it is refused before it is parsed.
	if len(raw) > 4*max {
		return nil, invalid(field, "must be at most %d bytes of JSON (got %d)", max, len(raw))
	}
	if !utf8.Valid(raw) {
		return nil, invalid(field, "must be valid UTF-8 JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := walkJSON(dec, 0, wantObject); err != nil {
		return nil, invalid(field, "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid(field, "must be a single JSON value (found data after it)")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalid(field, "is not valid JSON: %v", err)
	}
	if buf.Len() > max {
		return nil, invalid(field, "must be at most %d bytes of JSON (got %d)", max, buf.Len())
	}
	return json.RawMessage(buf.Bytes()), nil
}

// overflows reports whether the JSON number n is beyond float64 range.
// Such a number is valid JSON and the store would keep it exactly, but a
// worker whose JSON decoder reads numbers as doubles (JavaScript, Python's
// json with floats, Go's encoding/json into any) fails on it after its claim
// has committed, burning an attempt; so payloads and results refuse it.
// Integers beyond 2^53 and numbers that underflow to zero decode (rounded),
// so they are kept.
func overflows(n string) bool {
	f, err := strconv.ParseFloat(n, 64)
	return err != nil && math.IsInf(f, 0)
}

func clipNumber(n string) string {
	if len(n) > 40 {
		return n[:40] + "…"
	}
	return n
}

// mayOverflow is a cheap byte scan that is true whenever raw may hold a
// number beyond float64 range: one with an exponent of three or more digits
// (the largest float64 is about 1.8e308), or with 309 or more digits in a
// row. It may be true for text inside strings too; OverflowingNumber then
// decides exactly. It keeps that exact (and much slower) scan off the path
// of every ordinary request.
func mayOverflow(raw []byte) bool {
	run := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c >= '0' && c <= '9' {
			run++
			if run >= 309 {
				return true
			}
			continue
		}
		if (c == 'e' || c == 'E') && (run > 0 || (i > 0 && raw[i-1] == '.')) {
			j := i + 1
			if j < len(raw) && (raw[j] == '+' || raw[j] == '-') {
				j++
			}
			k := j
			for k < len(raw) && raw[k] >= '0' && raw[k] <= '9' {
				k++
			}
			if k-j >= 3 {
				return true
			}
		}
		run = 0
	}
	return false
}

// OverflowingNumber returns the first number in the JSON value raw that is
// beyond float64 range (see the payload rules), and whether there is one.
// Invalid JSON has none.
func OverflowingNumber(raw []byte) (string, bool) {
	if !mayOverflow(raw) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if n, ok := tok.(json.Number); ok && overflows(string(n)) {
			return string(n), true
		}
	}
}

// walkJSON reads one value from dec.
func walkJSON(dec *json.Decoder, depth int, wantObject bool) error {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			if depth == 0 {
				return errors.New("is empty; expected a JSON value")
			}
			// The decoder reports a value cut short as a plain EOF.
			return errors.New("is not valid JSON: unexpected end of input")
		}
		return fmt.Errorf("is not valid JSON: %v", err)
	}
	d, isDelim := tok.(json.Delim)
	if wantObject && (!isDelim || d != '{') {
		return errors.New("must be a JSON object")
	}
	if n, ok := tok.(json.Number); ok && overflows(string(n)) {
		return fmt.Errorf("holds the number %s, beyond the range of a 64-bit float (about ±1.8e308), which most JSON decoders cannot read; send such values as strings", clipNumber(string(n)))
	}
	if !isDelim {
		return nil
	}
	if depth+1 > MaxJSONDepth {
		return fmt.Errorf("nests deeper than %d levels", MaxJSONDepth)
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("is not valid JSON: %v", err)
			}
			k, _ := kt.(string)
			if seen[k] {
				return fmt.Errorf("has the key %q twice in one object", k)
			}
			seen[k] = true
			if err := walkJSON(dec, depth+1, false); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := walkJSON(dec, depth+1, false); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // closing delimiter
		return fmt.Errorf("is not valid JSON: %v", err)
	}
	return nil
}

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
	return normalizedNode{NodeID: n.NodeID, Payload: p, DependsOn: deps, MaxAttempts: ma, Priority: n.Priority,
		Requires: req, RetryDelay: rd, NotBefore: n.NotBefore}, nil
}

func checkErrorText(s string) error {
	if s == "" {
		return invalid("error", "is required: say what went wrong")
	}
	if len(s) > MaxErrorBytes {
		return invalid("error", "must be at most %d bytes (got %d)", MaxErrorBytes, len(s))
	}
	if !utf8.ValidString(s) {
		return invalid("error", "must be valid UTF-8")
	}
	return nil
}

func checkOperator(op Operator) error {
	if op.Name == "" {
		return invalid("operator", "is required: name who is acting")
	}
	if len(op.Name) > MaxIdentifierLen || !utf8.ValidString(op.Name) {
		return invalid("operator", "must be valid UTF-8 of at most %d bytes", MaxIdentifierLen)
	}
	if op.Reason == "" {
		return invalid("reason", "is required: say why, it is recorded in the history")
	}
	if len(op.Reason) > MaxReasonBytes || !utf8.ValidString(op.Reason) {
		return invalid("reason", "must be valid UTF-8 of at most %d bytes", MaxReasonBytes)
	}
	return nil
}

// notFoundError names what was not found. It matches ErrNotFound.
type notFoundError struct{ what, id string }

// Error implements error.
func (e *notFoundError) Error() string {
	return fmt.Sprintf("%s %q not found", e.what, e.id)
}

// Is reports whether target is ErrNotFound.
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }
