package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// kind is the type and rule set of one tool argument. The same table yields
// the published JSON Schema and the validation the server applies, so the two
// cannot drift apart.
type kind int

const (
	kindIdentifier kind = iota // workflow_id, node_id, owner
	kindTaskID
	kindToken
	kindErrorText
	kindInt
	kindBool
	kindObject // payload
	kindAny    // result
	kindIdentifierList
	kindTagList   // requires, capabilities: at most max tags of taskgraph.TagPattern
	kindTime      // not_before: an RFC 3339 timestamp
	kindText      // status_message: short free text
	kindProgress  // progress: {done, total}
	kindUsage     // usage: {input_tokens, output_tokens, cost_usd}
	kindClaimNext // claim_next: {workflow_id, capabilities, lease_ms} (claimNextFields)
	kindEnum      // kind, on_timeout: one of field.enum
	kindNodes     // nodes: 1 to taskgraph.MaxCreateNodes objects of nodeFields
)

var tagRE = regexp.MustCompile(taskgraph.TagPattern)

// maxTimeLen bounds a kindTime string (RFC 3339 with nanoseconds and an
// offset is 35 characters).
const maxTimeLen = 64

// field is one argument of a tool.
type field struct {
	name     string
	kind     kind
	required bool
	min, max int64    // for kindInt
	enum     []string // for kindEnum
	desc     string
	// unless names the argument that makes an optional field's absence
	// valid (node_id, unless nodes is given): a null is then refused as
	// a missing required value, since omitting it asks for no default.
	unless string
}

// taskIDPattern matches a ULID as the store issues them.
const taskIDPattern = `^[0-9A-Z]{26}$`

var (
	identifierRE = regexp.MustCompile(taskgraph.IdentifierPattern)
	taskIDRE     = regexp.MustCompile(taskIDPattern)
)

// schema renders the field's JSON Schema.
func (f field) schema() map[string]any {
	s := map[string]any{"description": f.desc}
	switch f.kind {
	case kindIdentifier:
		s["type"], s["pattern"], s["minLength"], s["maxLength"] = "string", taskgraph.IdentifierPattern, 1, taskgraph.MaxIdentifierLen
	case kindTaskID:
		s["type"], s["pattern"], s["minLength"], s["maxLength"] = "string", taskIDPattern, 26, 26
	case kindToken:
		s["type"], s["minLength"], s["maxLength"] = "string", 1, taskgraph.MaxTokenLen
	case kindErrorText:
		s["type"], s["minLength"], s["maxLength"] = "string", 1, taskgraph.MaxErrorBytes
	case kindInt:
		s["type"], s["minimum"], s["maximum"] = "integer", f.min, f.max
	case kindBool:
		s["type"] = "boolean"
	case kindObject:
		s["type"] = "object"
	case kindAny:
		s["anyOf"] = anyJSONSchema()
	case kindIdentifierList:
		s["type"], s["maxItems"], s["uniqueItems"] = "array", taskgraph.MaxDependsOn, true
		s["items"] = map[string]any{"type": "string", "pattern": taskgraph.IdentifierPattern, "minLength": 1, "maxLength": taskgraph.MaxIdentifierLen}
	case kindTagList:
		s["type"], s["maxItems"] = "array", f.max
		s["items"] = map[string]any{"type": "string", "pattern": taskgraph.TagPattern, "minLength": 1, "maxLength": 64}
	case kindTime:
		s["type"], s["format"], s["maxLength"] = "string", "date-time", maxTimeLen
	case kindText:
		s["type"], s["maxLength"] = "string", taskgraph.MaxStatusMessageBytes
	case kindEnum:
		s["type"], s["enum"] = "string", f.enum
	case kindProgress:
		for k, v := range progressSchema() {
			s[k] = v
		}
	case kindUsage:
		for k, v := range usageSchema() {
			s[k] = v
		}
	case kindClaimNext:
		for k, v := range inputSchema(claimNextFields) {
			s[k] = v
		}
	case kindNodes:
		// Each item is the single-node form's fields, whose descriptions
		// the tool's own fields give once: the items carry only the rules.
		item := inputSchema(nodeFields)
		props := map[string]any{}
		for name, p := range item["properties"].(map[string]any) {
			q := map[string]any{}
			for k, v := range p.(map[string]any) {
				if k != "description" {
					q[k] = v
				}
			}
			props[name] = q
		}
		item["properties"] = props
		s["type"], s["minItems"], s["maxItems"], s["items"] = "array", 1, taskgraph.MaxCreateNodes, item
	}
	return s
}

// inputSchema renders a tool's input schema from its fields.
func inputSchema(fields []field) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, f := range fields {
		props[f.name] = f.schema()
		if f.required {
			required = append(required, f.name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

// args holds decoded, validated arguments.
type args struct {
	raw map[string]json.RawMessage
	str map[string]string
	num map[string]int64
	bln map[string]bool
	lst map[string][]string
	tim map[string]time.Time
	// progress and usage: a report's objects, nil when not given.
	progress *taskgraph.Progress
	usage    *taskgraph.Usage
	// next: graph_task_complete's claim_next, decoded against
	// claimNextFields; nil when not given.
	next *args
	// nodes: graph_task_create's nodes, each decoded against nodeFields;
	// nil when not given.
	nodes []*args
}

// setArg sets m[k] = v, making m first if it is nil.
func setArg[V any](m *map[string]V, k string, v V) {
	if *m == nil {
		*m = make(map[string]V, 4)
	}
	(*m)[k] = v
}

func (a *args) has(name string) bool { _, ok := a.raw[name]; return ok }

// argError is a problem with the arguments of a tool call. It is answered as
// a tool error (isError: true) naming the field and the rule, so a model can
// correct itself.
type argError struct {
	// field names the argument the error is about ("" when none is), for
	// the error's _meta detail.
	field string
	msg   string
}

func (e *argError) Error() string { return "invalid arguments: " + e.msg }

func argErrorf(format string, a ...any) error { return &argError{msg: fmt.Sprintf(format, a...)} }

// fieldErrorf is argErrorf about the argument name.
func fieldErrorf(name, format string, a ...any) error {
	return &argError{field: name, msg: fmt.Sprintf(format, a...)}
}

// overflowError refuses a JSON value holding a number beyond float64 range.
func overflowError(name, number string) error {
	return fieldErrorf(name, "%s holds the number %s, beyond the range of a 64-bit float (about ±1.8e308), which most JSON decoders cannot read; send such values as strings", name, input.Clip(number))
}

// withField names the argument an argError is about, unless it names one.
func withField(err error, name string) error {
	var ae *argError
	if errors.As(err, &ae) && ae.field == "" {
		ae.field = name
	}
	return err
}

// errArgsNotObject marks arguments that are not a JSON object: a protocol
// error (-32602), not a tool error.
var errArgsNotObject = errors.New("tool arguments must be a JSON object")

// decodeArgs parses a tool's arguments (a JSON object; absent means {})
// against its fields: no unknown or duplicate keys, every value of the right
// type and within bounds, and no lone UTF-16 surrogate in any string.
// Numbers are read exactly, never through float64.
func decodeArgs(raw json.RawMessage, fields []field) (*args, error) {
	// Only raw is made up front: the typed maps are made by the first value
	// they get (a call sets a few of them), reading a nil map gives the zero value.
	a := &args{raw: map[string]json.RawMessage{}}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return nil, errArgsNotObject
	}
	if !json.Valid(trimmed) {
		return nil, errArgsNotObject
	}
	if err := input.RawMembers(trimmed, func(rk []byte, v json.RawMessage) error {
		i := slices.IndexFunc(fields, func(f field) bool { return input.KeyIs(rk, f.name) })
		if i < 0 {
			k := input.Key(rk)
			return fieldErrorf(input.Clip(k), "unknown argument %q; allowed: %s", input.Clip(k), fieldNames(fields))
		}
		k := fields[i].name
		if _, dup := a.raw[k]; dup {
			return fieldErrorf(k, "the key %q appears twice", input.Clip(k))
		}
		a.raw[k] = v
		return nil
	}); err != nil {
		return nil, err
	}
	for _, f := range fields {
		v, ok := a.raw[f.name]
		if !ok {
			if f.required {
				return nil, fieldErrorf(f.name, "%s is required", f.name)
			}
			continue
		}
		if string(v) == "null" && f.kind != kindAny {
			// The schema's types do not include null: an explicit null is
			// not a way to ask for the default (a null task_id must not
			// turn a claim of one task into a claim of any task).
			if f.required {
				return nil, fieldErrorf(f.name, "%s is required (got null)", f.name)
			}
			if f.unless != "" {
				return nil, fieldErrorf(f.name, "%s is required (got null) unless %s is given", f.name, f.unless)
			}
			return nil, fieldErrorf(f.name, "%s must not be null; omit it to use the default", f.name)
		}
		if esc, ok := input.LoneSurrogate(v); ok {
			// The store keeps payloads and results as sent, and a worker
			// whose decoder reads the escape faithfully cannot write it out.
			return nil, fieldErrorf(f.name, "%s holds a lone UTF-16 surrogate (%s), which is not a Unicode character and which many JSON decoders cannot write out as UTF-8; send valid Unicode text", f.name, esc)
		}
		if err := a.check(f, v); err != nil {
			return nil, withField(err, f.name)
		}
	}
	return a, nil
}

func fieldNames(fields []field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (a *args) check(f field, v json.RawMessage) error {
	switch f.kind {
	case kindIdentifier, kindTaskID, kindToken, kindErrorText:
		s, ok := input.String(v)
		if !ok {
			return argErrorf("%s must be a string", f.name)
		}
		if err := checkString(f, s); err != nil {
			return err
		}
		setArg(&a.str, f.name, s)
	case kindInt:
		n, err := input.Int(v)
		if err != nil || n < f.min || n > f.max {
			return argErrorf("%s must be an integer between %d and %d (got %s)", f.name, f.min, f.max, input.Clip(string(v)))
		}
		setArg(&a.num, f.name, n)
	case kindEnum:
		s, ok := input.String(v)
		if !ok || !slices.Contains(f.enum, s) {
			return argErrorf("%s must be one of %s (got %s)", f.name, strings.Join(f.enum, ", "), input.Clip(string(v)))
		}
		setArg(&a.str, f.name, s)
	case kindBool:
		switch string(v) {
		case "true":
			setArg(&a.bln, f.name, true)
		case "false":
			setArg(&a.bln, f.name, false)
		default:
			return argErrorf("%s must be true or false", f.name)
		}
	case kindObject:
		if len(v) == 0 || v[0] != '{' {
			return argErrorf("%s must be a JSON object", f.name)
		}
		if n, ok := taskgraph.OverflowingNumber(v); ok {
			return overflowError(f.name, n)
		}
	case kindAny:
		if n, ok := taskgraph.OverflowingNumber(v); ok {
			return overflowError(f.name, n)
		}
	case kindIdentifierList:
		var list []string
		if err := json.Unmarshal(v, &list); err != nil {
			return argErrorf("%s must be an array of node ids (strings)", f.name)
		}
		if len(list) > taskgraph.MaxDependsOn {
			return argErrorf("%s must list at most %d nodes (got %d)", f.name, taskgraph.MaxDependsOn, len(list))
		}
		seen := map[string]bool{}
		for _, s := range list {
			if !identifierRE.MatchString(s) {
				return argErrorf("%s entry %q must match %s", f.name, input.Clip(s), taskgraph.IdentifierPattern)
			}
			if seen[s] {
				return argErrorf("%s lists %q twice", f.name, s)
			}
			seen[s] = true
		}
		setArg(&a.lst, f.name, list)
	case kindTagList:
		var list []string
		if err := json.Unmarshal(v, &list); err != nil {
			return fieldErrorf(f.name, "%s must be an array of tags (strings)", f.name)
		}
		if int64(len(list)) > f.max {
			return fieldErrorf(f.name, "%s must list at most %d tags (got %d)", f.name, f.max, len(list))
		}
		for _, s := range list {
			if !tagRE.MatchString(s) {
				return fieldErrorf(f.name, "%s tag %q must match %s: a lower-case letter, then up to 63 lower-case letters, digits, '_', '.' or '-'", f.name, input.Clip(s), taskgraph.TagPattern)
			}
		}
		setArg(&a.lst, f.name, list)
	case kindText, kindProgress, kindUsage:
		return a.checkReportArg(f, v)
	case kindClaimNext:
		next, err := decodeArgs(v, claimNextFields)
		if errors.Is(err, errArgsNotObject) {
			return fieldErrorf(f.name, "%s must be a JSON object with optional workflow_id, capabilities and lease_ms", f.name)
		}
		if err != nil {
			// Name the inner argument by its path, in the text and the
			// detail alike (claim_next.lease_ms).
			var ae *argError
			if errors.As(err, &ae) {
				inner, msg := f.name, f.name+": "+ae.msg
				if ae.field != "" {
					inner = f.name + "." + ae.field
					if strings.HasPrefix(ae.msg, ae.field+" ") {
						msg = f.name + "." + ae.msg
					}
				}
				return &argError{field: inner, msg: msg}
			}
			return err
		}
		a.next = next
	case kindNodes:
		return a.checkNodes(f, v)
	case kindTime:
		var s string
		if err := json.Unmarshal(v, &s); err != nil || len(s) > maxTimeLen {
			return fieldErrorf(f.name, "%s must be an RFC 3339 timestamp string such as 2026-03-01T12:00:00Z", f.name)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fieldErrorf(f.name, "%s must be an RFC 3339 timestamp such as 2026-03-01T12:00:00Z (got %q)", f.name, input.Clip(s))
		}
		setArg(&a.tim, f.name, t.UTC())
	}
	return nil
}

func checkString(f field, s string) error {
	if !utf8.ValidString(s) {
		return argErrorf("%s must be valid UTF-8", f.name)
	}
	switch f.kind {
	case kindIdentifier:
		if !identifierRE.MatchString(s) {
			return argErrorf("%s must match %s: 1 to %d characters, a letter or digit first, then letters, digits, '_', '.', ':' or '-' (got %q)",
				f.name, taskgraph.IdentifierPattern, taskgraph.MaxIdentifierLen, input.Clip(s))
		}
	case kindTaskID:
		if !taskIDRE.MatchString(s) {
			return argErrorf("%s must be a task id as returned by graph_task_create or graph_task_claim: 26 characters of 0-9 and A-Z (got %q)", f.name, input.Clip(s))
		}
	case kindToken:
		// Lengths are counted in characters, as the schema's maxLength is;
		// the store bounds the bytes.
		if s == "" || utf8.RuneCountInString(s) > taskgraph.MaxTokenLen {
			return argErrorf("%s must be the claim_token returned by graph_task_claim (1 to %d characters)", f.name, taskgraph.MaxTokenLen)
		}
	case kindErrorText:
		if s == "" {
			return argErrorf("%s must say what went wrong (a non-empty string)", f.name)
		}
		if n := utf8.RuneCountInString(s); n > taskgraph.MaxErrorBytes {
			return argErrorf("%s must be at most %d characters and %d bytes (got %d characters)", f.name, taskgraph.MaxErrorBytes, taskgraph.MaxErrorBytes, n)
		}
	}
	return nil
}

// Tool argument bounds, in the units of the wire (milliseconds).
var (
	leaseMinMS = lease.MinDuration.Milliseconds()
	leaseMaxMS = lease.MaxDuration.Milliseconds()
	waitMaxMS  = taskgraph.MaxClaimWait.Milliseconds()
)

// checkNodes decodes graph_task_create's nodes: a non-empty array of at most
// taskgraph.MaxCreateNodes objects and taskgraph.MaxCreateBytes bytes, each
// checked against nodeFields as the single-node form's fields are. An error
// names the node by its index and node_id, and the field by its path
// (nodes[3].depends_on).
func (a *args) checkNodes(f field, v json.RawMessage) error {
	if len(v) > taskgraph.MaxCreateBytes {
		return fieldErrorf(f.name, "%s must be at most %d bytes of JSON (got %d); submit a larger graph in several calls, the later ones naming nodes of the earlier ones in depends_on; nothing was created", f.name, taskgraph.MaxCreateBytes, len(v))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil || len(v) == 0 || v[0] != '[' {
		return fieldErrorf(f.name, "%s must be an array of node objects, each with node_id and the optional payload, depends_on, max_attempts, priority, requires, retry_delay_ms and not_before", f.name)
	}
	if len(items) == 0 {
		return fieldErrorf(f.name, "%s must hold at least one node (1 to %d); nothing was created", f.name, taskgraph.MaxCreateNodes)
	}
	if len(items) > taskgraph.MaxCreateNodes {
		return fieldErrorf(f.name, "%s must hold 1 to %d nodes (got %d); submit a larger graph in several calls, the later ones naming nodes of the earlier ones in depends_on; nothing was created", f.name, taskgraph.MaxCreateNodes, len(items))
	}
	a.nodes = make([]*args, len(items))
	for i, item := range items {
		n, err := decodeArgs(item, nodeFields)
		if errors.Is(err, errArgsNotObject) {
			return fieldErrorf(fmt.Sprintf("%s[%d]", f.name, i), "%s[%d] must be a JSON object with node_id and the optional fields of a node", f.name, i)
		}
		if err != nil {
			var ae *argError
			if !errors.As(err, &ae) {
				return err
			}
			at := fmt.Sprintf("%s[%d]", f.name, i)
			if id, ok := nodeIDOf(item); ok {
				at += fmt.Sprintf(" (node_id %q)", id)
			}
			inner := fmt.Sprintf("%s[%d]", f.name, i)
			if ae.field != "" {
				inner += "." + ae.field
			}
			return &argError{field: inner, msg: at + ": " + ae.msg}
		}
		a.nodes[i] = n
	}
	return nil
}

// nodeIDOf is the node_id of a node object that failed to decode, when it
// has a valid one, to name the node in the error.
func nodeIDOf(item json.RawMessage) (string, bool) {
	var n struct {
		NodeID string `json:"node_id"`
	}
	if json.Unmarshal(item, &n) != nil || !identifierRE.MatchString(n.NodeID) {
		return "", false
	}
	return n.NodeID, true
}
