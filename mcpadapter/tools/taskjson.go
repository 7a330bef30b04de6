package tools

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// timeFormat is RFC 3339 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// taskJSON is a task on the wire. Absent values are null. It never carries
// the claim token.
type taskJSON struct {
	TaskID     string          `json:"task_id"`
	WorkflowID string          `json:"workflow_id"`
	NodeID     string          `json:"node_id"`
	State      string          `json:"state"`
	Payload    json.RawMessage `json:"payload"`
	claimStateJSON
	RetryDelayMS int64 `json:"retry_delay_ms"`
	// ConcurrencyKey is left out when the task has none.
	ConcurrencyKey string          `json:"concurrency_key,omitempty"`
	Result         json.RawMessage `json:"result"`
	Error          *string         `json:"error"`
	StatusMessage  string          `json:"status_message"`
	CreatedAt      string          `json:"created_at"`
	UpdatedAt      string          `json:"updated_at"`
	// Report is the current (or last) attempt's report, TotalUsage the
	// usage of every attempt: both left out when there is none, so that
	// the answers of tasks nobody reported on stay as small as before.
	Report     *reportJSON `json:"report,omitempty"`
	TotalUsage *usageJSON  `json:"total_usage,omitempty"`
	// Gate describes an approval gate; absent for an ordinary task, so
	// that their answers stay as they were.
	Gate *gateJSON `json:"gate,omitempty"`
}

// gateJSON is the gate part of a task on the wire.
type gateJSON struct {
	// Status is "awaiting_approval", "waiting_on_dependencies" or
	// "decided" (the task's state says how).
	Status        string  `json:"status"`
	GateTimeoutMS *int64  `json:"gate_timeout_ms"`
	OnTimeout     *string `json:"on_timeout"`
}

// Gate statuses (gateJSON.Status).
const (
	GateAwaitingApproval = "awaiting_approval"
	GateWaiting          = "waiting_on_dependencies"
	GateDecided          = "decided"
)

func renderGate(t taskgraph.Task) *gateJSON {
	if t.Kind != taskgraph.KindGate {
		return nil
	}
	g := &gateJSON{Status: GateDecided}
	switch {
	case t.AwaitingApproval:
		g.Status = GateAwaitingApproval
	case !t.State.Terminal():
		g.Status = GateWaiting
	}
	if t.GateTimeout > 0 {
		ms, on := t.GateTimeout.Milliseconds(), t.OnTimeout
		g.GateTimeoutMS, g.OnTimeout = &ms, &on
	}
	return g
}

// claimStateJSON is the part of a task on the wire that a full task and
// an outline's task share, at the same place (encoding/json writes an
// embedded struct's fields where it is embedded): its dependencies and
// whether, by whom and until when it is claimed, its attempts, priority,
// routing and due time.
type claimStateJSON struct {
	DependsOn      []string `json:"depends_on"`
	Owner          *string  `json:"owner"`
	Generation     int64    `json:"generation"`
	LeaseExpiresAt *string  `json:"lease_expires_at"`
	Attempts       int      `json:"attempts"`
	MaxAttempts    int      `json:"max_attempts"`
	Priority       int      `json:"priority"`
	Requires       []string `json:"requires"`
	DueAt          *string  `json:"due_at"`
}

func renderClaimState(t taskgraph.Task) claimStateJSON {
	out := claimStateJSON{DependsOn: t.DependsOn, Owner: strOrNil(t.Owner), Generation: t.Generation, Attempts: t.Attempts,
		MaxAttempts: t.MaxAttempts, Priority: t.Priority, Requires: t.Requires}
	if out.DependsOn == nil {
		out.DependsOn = []string{}
	}
	if out.Requires == nil {
		out.Requires = []string{}
	}
	if !t.DueAt.IsZero() {
		s := formatTime(t.DueAt)
		out.DueAt = &s
	}
	if !t.LeaseExpiresAt.IsZero() {
		s := formatTime(t.LeaseExpiresAt)
		out.LeaseExpiresAt = &s
	}
	return out
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func renderTask(t taskgraph.Task) *taskJSON {
	out := &taskJSON{
		TaskID: t.TaskID, WorkflowID: t.WorkflowID, NodeID: t.NodeID, State: string(t.State),
		Payload: t.Payload, claimStateJSON: renderClaimState(t), Result: t.Result, Error: strOrNil(t.Error),
		StatusMessage: t.StatusMessage, CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt),
		RetryDelayMS: t.RetryDelay.Milliseconds(), ConcurrencyKey: t.ConcurrencyKey,
		Report: renderReport(t.Report, 0), Gate: renderGate(t),
	}
	if !t.TotalUsage.IsZero() {
		u := renderUsage(t.TotalUsage)
		out.TotalUsage = &u
	}
	if len(out.Payload) == 0 {
		out.Payload = json.RawMessage(`{}`)
	}
	return out
}

// leaseJSON is the lease of a claim; the only place a claim token appears.
type leaseJSON struct {
	Owner          string `json:"owner"`
	Generation     int64  `json:"generation"`
	ClaimToken     string `json:"claim_token"`
	LeaseExpiresAt string `json:"lease_expires_at"`
}

func renderLease(g lease.Grant) *leaseJSON {
	return &leaseJSON{Owner: g.Owner, Generation: g.Generation, ClaimToken: g.Token, LeaseExpiresAt: formatTime(g.ExpiresAt)}
}

// taskSchema is the output schema of a task object.
func taskSchema() map[string]any {
	str := map[string]any{"type": "string"}
	strNull := nullable(str)
	timeS := map[string]any{"type": "string", "format": "date-time"}
	states := []string{}
	for _, s := range taskgraph.States {
		states = append(states, string(s))
	}
	props := map[string]any{
		"task_id":          str,
		"workflow_id":      str,
		"node_id":          str,
		"state":            map[string]any{"type": "string", "enum": states},
		"payload":          map[string]any{"type": "object"},
		"depends_on":       map[string]any{"type": "array", "items": str},
		"owner":            strNull,
		"generation":       map[string]any{"type": "integer", "minimum": 0},
		"lease_expires_at": nullable(timeS),
		"attempts":         map[string]any{"type": "integer", "minimum": 0},
		"max_attempts":     map[string]any{"type": "integer", "minimum": taskgraph.MinMaxAttempts, "maximum": taskgraph.MaxMaxAttempts},
		"priority":         map[string]any{"type": "integer", "minimum": taskgraph.MinPriority, "maximum": taskgraph.MaxPriority},
		"requires":         map[string]any{"type": "array", "items": map[string]any{"type": "string", "pattern": taskgraph.TagPattern}, "maxItems": taskgraph.MaxRequires},
		"due_at":           nullable(map[string]any{"type": "string", "format": "date-time", "description": "when a pending task becomes claimable (not_before, a retry's delay); null when it is claimable now"}),
		"retry_delay_ms":   map[string]any{"type": "integer", "minimum": 0, "maximum": taskgraph.MaxRetryDelay.Milliseconds()},
		"result":           map[string]any{"description": "the worker's result (any JSON); null until completed", "anyOf": anyJSONSchema()},
		"error":            strNull,
		"status_message":   str,
		"created_at":       timeS,
		"updated_at":       timeS,
	}
	s := closedObject(props)
	// Present only when there is something to show.
	props["report"] = withDescription(reportSchema(), "the current (or last) attempt's report: progress, status_message and usage as its worker last sent them; absent when it sent none")
	props["total_usage"] = withDescription(usageOutSchema(), "the usage of every attempt of the task; absent when none was reported")
	props["concurrency_key"] = map[string]any{"type": "string", "pattern": taskgraph.IdentifierPattern, "description": "the task's concurrency key; absent when it has none"}
	props["gate"] = map[string]any{"type": "object", "additionalProperties": false, "required": []string{"status", "gate_timeout_ms", "on_timeout"},
		"description": "present only for an approval gate (kind gate): never claimed; a person decides it once its dependencies completed. status awaiting_approval means it waits for that decision (its state is blocked), due_at is when the server decides it as on_timeout says",
		"properties": map[string]any{
			"status":          map[string]any{"type": "string", "enum": []string{GateAwaitingApproval, GateWaiting, GateDecided}},
			"gate_timeout_ms": nullable(map[string]any{"type": "integer"}),
			"on_timeout":      nullable(map[string]any{"type": "string", "enum": []string{taskgraph.OnTimeoutApprove, taskgraph.OnTimeoutReject}}),
		}}
	return s
}

// withDescription is schema with a description.
func withDescription(schema map[string]any, desc string) map[string]any {
	schema["description"] = desc
	return schema
}

// closedObject is the schema of an object with exactly props, all required.
func closedObject(props map[string]any) map[string]any {
	req := make([]string, 0, len(props))
	for k := range props {
		req = append(req, k)
	}
	slices.Sort(req)
	return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}

// nullable is schema or null, spelled as anyOf branches of one type each:
// a type array (["string","null"]) is valid JSON Schema but less portable,
// since clients that map tool schemas onto a single-type dialect (the
// OpenAPI subset of Gemini function declarations) reject or drop it; the MCP
// Inspector's schema-portability check warns about it.
func nullable(schema map[string]any) map[string]any {
	return map[string]any{"anyOf": []any{schema, map[string]any{"type": "null"}}}
}

// anyJSONSchema is "any JSON value" with each type named, rather than a
// schema without a validation keyword, which portable-schema checks (the MCP
// Inspector's) flag as constraining nothing. The two container types are one
// nested anyOf branch: LangChain's MCP adapters (@langchain/mcp-adapters
// 1.1.4) rewrite an anyOf that has an object branch to that branch alone and
// then validate a call's arguments against what is left, which refused every
// result but an object; with no branch of type object at the top they drop
// the anyOf and pass any value (scripts/clients/langchain-client.mjs checks it).
func anyJSONSchema() []any {
	branch := func(types ...string) []any {
		var out []any
		for _, t := range types {
			out = append(out, map[string]any{"type": t})
		}
		return out
	}
	return append([]any{map[string]any{"anyOf": branch("object", "array")}}, branch("string", "number", "boolean", "null")...)
}

func receiptSchema() map[string]any {
	digest := map[string]any{"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
	return map[string]any{"type": "object", "properties": map[string]any{"manifestSha256": digest, "receiptSha256": digest},
		"required": []string{"manifestSha256", "receiptSha256"}, "additionalProperties": false}
}
