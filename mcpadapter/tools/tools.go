package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// toolOutput is the structured result of every tool.
type toolOutput struct {
	Task    *taskJSON  `json:"task"`
	Created *bool      `json:"created,omitempty"`
	Claimed *bool      `json:"claimed,omitempty"`
	Lease   *leaseJSON `json:"lease,omitempty"`
	// Dependencies: graph_task_inspect always, graph_task_claim when it claimed.
	Dependencies *[]depJSON       `json:"dependencies,omitempty"`
	Hint         string           `json:"hint,omitempty"`
	Receipt      manifest.Receipt `json:"receipt"`
	// ClaimedNext and Next: graph_task_complete with claim_next only.
	// Next is the claim's answer, as graph_task_claim gives it, or null;
	// toolResult renders it from next, whose receipt it adds.
	ClaimedNext *bool `json:"claimed_next,omitempty"`
	// NextClaimableAt: graph_task_claim that claimed nothing while a
	// concurrency key's rate held a task back (taskgraph.Claimed).
	NextClaimableAt *string `json:"next_claimable_at,omitempty"`
	// NextClaimableAtLowerBound: with NextClaimableAt, when it is a lower
	// bound (taskgraph.Claimed.NextClaimableAtLowerBound).
	NextClaimableAtLowerBound *bool           `json:"next_claimable_at_lower_bound,omitempty"`
	Next                      json.RawMessage `json:"next,omitempty"`
	// Workflow: graph_task_inspect's outline form only, which then has no
	// task (see outlineOutput).
	Workflow *outlineJSON `json:"-"`
	// Graph: graph_task_create's whole-graph form only, which then has
	// no task (see graphOutput).
	Graph *graphOutput `json:"-"`
	// next is the next claim's answer (its Next), nil when nothing was
	// claimed.
	next *toolOutput
}

// toolDef describes one model tool: its arguments, annotations, output and
// what it does.
type toolDef struct {
	name, title, desc string
	fields            []field
	annotations       *mcp.ToolAnnotations
	extraOutput       map[string]any // output properties beyond task and receipt
	required          []string       // required output properties beyond receipt
}

func boolPtr(b bool) *bool { return &b }

var (
	fTaskID     = field{name: "task_id", kind: kindTaskID, required: true, desc: "the task id returned by graph_task_create or graph_task_claim"}
	fOwner      = field{name: "owner", kind: kindIdentifier, required: true, desc: "who works on the task: the owner returned by graph_task_claim (" + taskgraph.IdentifierPattern + ")"}
	fGeneration = field{name: "generation", kind: kindInt, required: true, min: 1, max: input.MaxSafeInteger, desc: "the fencing generation returned by graph_task_claim"}
	fClaimToken = field{name: "claim_token", kind: kindToken, required: true, desc: "the secret claim_token returned by graph_task_claim"}
	fLeaseMS    = field{name: "lease_ms", kind: kindInt, min: leaseMinMS, max: leaseMaxMS, desc: fmt.Sprintf("lease length in milliseconds (default %d)", lease.DefaultDuration.Milliseconds())}
	fCaps       = field{name: "capabilities", kind: kindTagList, max: taskgraph.MaxCapabilities, desc: fmt.Sprintf("what this worker can do: at most %d tags, each %s; a task is given only if every tag of its requires is among them (default none: only tasks that require nothing)", taskgraph.MaxCapabilities, taskgraph.TagPattern)}
	// claimNextFields are the fields of graph_task_complete's claim_next:
	// graph_task_claim's, with the same kinds and bounds.
	claimNextFields = []field{
		{name: "workflow_id", kind: kindIdentifier, desc: "claim only within this workflow"},
		fCaps,
		fLeaseMS,
	}
	fClaimNext   = field{name: "claim_next", kind: kindClaimNext, desc: "optional: once the completion is accepted, claim your next ready task in the same call, as graph_task_claim without task_id and wait_ms would (owner is yours); the answer's next is that claim, or null with claimed_next false when none was ready. Not with request_id"}
	holderFields = []field{fTaskID, fOwner, fGeneration, fClaimToken}
	fRequestID   = field{name: "request_id", kind: kindIdentifier, desc: "optional: your id for this call (a new UUID per call, " + taskgraph.IdentifierPattern + "); repeat the call with the same request_id to retry it after an error that says it may have been applied: the server answers a call it already applied as it did then, and never applies it twice (kept for 24 hours)"}
)

// nodeFields are the fields of one node: graph_task_create's single-node
// form (without workflow_id and request_id), and each of its nodes.
var nodeFields = []field{
	{name: "node_id", kind: kindIdentifier, required: true, desc: "the task's name within the workflow"},
	{name: "payload", kind: kindObject, desc: "what the worker needs: a JSON object of at most 64 KiB (default {})"},
	{name: "depends_on", kind: kindIdentifierList, desc: fmt.Sprintf("node ids of the same workflow that must complete first (at most %d)", taskgraph.MaxDependsOn)},
	{name: "max_attempts", kind: kindInt, min: taskgraph.MinMaxAttempts, max: taskgraph.MaxMaxAttempts, desc: fmt.Sprintf("how many claims the task may take before it fails (default %d)", taskgraph.DefaultMaxAttempts)},
	{name: "priority", kind: kindInt, min: taskgraph.MinPriority, max: taskgraph.MaxPriority, desc: fmt.Sprintf("claim-next takes the highest priority first, the oldest task first within a priority (%d..%d, default 0)", taskgraph.MinPriority, taskgraph.MaxPriority)},
	{name: "requires", kind: kindTagList, max: taskgraph.MaxRequires, desc: fmt.Sprintf("capabilities a worker must advertise to claim the task: at most %d tags, each %s (stored sorted and deduplicated; default none)", taskgraph.MaxRequires, taskgraph.TagPattern)},
	{name: "retry_delay_ms", kind: kindInt, min: 0, max: taskgraph.MaxRetryDelay.Milliseconds(), desc: fmt.Sprintf("wait before the first retry of a retryable failure, in milliseconds, doubling per retry and capped at %d (0..%d, default %d; 0 retries at once)", taskgraph.MaxRetryDelay.Milliseconds(), taskgraph.MaxRetryDelay.Milliseconds(), taskgraph.DefaultRetryDelay.Milliseconds())},
	{name: "not_before", kind: kindTime, desc: "RFC 3339 timestamp (UTC, e.g. 2026-03-01T12:00:00Z): the task is not claimable before it (server time); at most 365 days ahead; a past time means now. Applies at creation only"},
	{name: "concurrency_key", kind: kindIdentifier, desc: "a name shared by tasks that must be limited together (for example one per LLM provider or repository); its limit caps how many of them are claimed at once and how many claims it grants per interval (default none)"},
	{name: "concurrency_max_claimed", kind: kindInt, min: 0, max: taskgraph.MaxKeyClaimed, desc: fmt.Sprintf("with concurrency_key: at most this many of the key's tasks claimed at once (0..%d, 0 no cap). Sets the key's limit only while it has none; an operator changes it", taskgraph.MaxKeyClaimed)},
	{name: "concurrency_rate", kind: kindInt, min: 0, max: taskgraph.MaxKeyRate, desc: fmt.Sprintf("with concurrency_key and concurrency_rate_interval_ms: at most this many claims of the key's tasks in any interval (0..%d, 0 no rate)", taskgraph.MaxKeyRate)},
	{name: "concurrency_rate_interval_ms", kind: kindInt, min: 0, max: taskgraph.MaxKeyRateInterval.Milliseconds(), desc: fmt.Sprintf("the interval of concurrency_rate, in milliseconds of server time (1..%d)", taskgraph.MaxKeyRateInterval.Milliseconds())},
	{name: "kind", kind: kindEnum, enum: []string{taskgraph.KindTask, taskgraph.KindGate}, desc: "task (default): claimed by workers; gate: an approval gate that no worker or tool can claim, complete or approve. Once its dependencies complete it awaits a person's decision (an operator, or an HTTP principal with the approve role): approval completes it, rejection fails it and cancels its dependents"},
	{name: "gate_timeout_ms", kind: kindInt, min: time.Second.Milliseconds(), max: taskgraph.MaxGateTimeout.Milliseconds(), desc: "gates only: how long the gate awaits a decision once its dependencies completed, in milliseconds; then the server decides as on_timeout says (default: waits for a person)"},
	{name: "on_timeout", kind: kindEnum, enum: []string{taskgraph.OnTimeoutApprove, taskgraph.OnTimeoutReject}, desc: "gates only, required with gate_timeout_ms: the decision the server makes at the timeout"},
}

// fNodes is graph_task_create's whole-graph form.
var fNodes = field{name: "nodes", kind: kindNodes, desc: fmt.Sprintf("instead of node_id and its fields: the nodes of a graph to create at once, all or none (1 to %d, at most %d bytes of JSON), each an object of node_id and the optional fields of the single form (payload, depends_on, max_attempts, priority, requires, retry_delay_ms, not_before, concurrency_*, kind, gate_timeout_ms, on_timeout), with the same rules", taskgraph.MaxCreateNodes, taskgraph.MaxCreateBytes)}

// withRequestID is fields with request_id, the optional id of a call that
// may be retried safely (MCP.md §4, "Request ids").
func withRequestID(fields ...field) []field {
	return append(fields, fRequestID)
}

// tools is the fixed set of model tools, in manifest order.
func toolDefs() []toolDef {
	return []toolDef{
		{
			name: manifest.ToolCancel, title: "Cancel a claimed task",
			desc: "Cancel the task you hold (your own claim only: pass task_id, owner, generation and claim_token from graph_task_claim). The task and every unfinished task that depends on it are cancelled. This is not an administrative abort. " +
				"With release true it gives the claim back instead: the task returns to pending for another worker, the attempt is not counted, nothing downstream changes, and your claim is ended (stop work on the task).",
			fields:      withRequestID(append(append([]field{}, holderFields...), field{name: "release", kind: kindBool, desc: "true to give the claim back (the task returns to pending, the attempt is not counted, nothing downstream changes) instead of cancelling (default false)"})...),
			annotations: &mcp.ToolAnnotations{Title: "Cancel a claimed task", DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)},
		},
		{
			name: manifest.ToolClaim, title: "Claim a ready task",
			desc: "Claim a task for exclusive work. Without task_id it claims the ready task of highest priority, the oldest first within a priority (optionally within workflow_id), waiting up to wait_ms for one to become ready; finding none is not an error (claimed: false). " +
				"Only tasks whose requires are all among your capabilities are given to you (without capabilities, only tasks that require nothing); claiming by task_id a task whose requires you lack is refused, naming the missing tags. " +
				"A claim returns dependencies: each direct dependency's node_id, task_id, state and result (at most 256 KiB of results in all; past that a result is null with result_omitted true: inspect that task_id to read it). " +
				"The result's lease holds owner, generation and the secret claim_token: pass them on every heartbeat, complete, fail or cancel, and heartbeat before lease_expires_at. An expired lease can be claimed by another worker at a higher generation, after which your writes are rejected.",
			fields: withRequestID([]field{
				{name: "owner", kind: kindIdentifier, required: true, desc: "who claims: a stable worker name (" + taskgraph.IdentifierPattern + ")"},
				fLeaseMS,
				{name: "task_id", kind: kindTaskID, desc: "claim this task; omit to claim the next ready task (highest priority, then oldest)"},
				{name: "workflow_id", kind: kindIdentifier, desc: "claim only within this workflow (without task_id)"},
				{name: "wait_ms", kind: kindInt, min: 0, max: waitMaxMS, desc: "how long claim-next may wait for a task to become ready, in milliseconds (default 0)"},
				fCaps,
			}...),
			annotations: &mcp.ToolAnnotations{Title: "Claim a ready task", DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(false)},
			extraOutput: map[string]any{
				"claimed":                       map[string]any{"type": "boolean"},
				"dependencies":                  depsSchema(),
				"hint":                          map[string]any{"type": "string"},
				"lease":                         leaseSchema(),
				"next_claimable_at":             nextClaimableAtSchema(),
				"next_claimable_at_lower_bound": nextClaimableAtLowerBoundSchema(),
			},
			required: []string{"claimed", "task"},
		},
		{
			name: manifest.ToolComplete, title: "Complete a claimed task",
			desc:        "Finish the task you hold with its result (any JSON value, at most 256 KiB). Tasks that depend on it become ready when all their dependencies are complete. Rejected if your claim is no longer live." + reportNote + " With claim_next it also claims your next ready task in the same call (next, or null: then claim with wait_ms).",
			fields:      withRequestID(withReport(append(append([]field{}, holderFields...), field{name: "result", kind: kindAny, required: true, desc: "the task's result: any JSON value"}, fClaimNext)...)...),
			annotations: &mcp.ToolAnnotations{Title: "Complete a claimed task", DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(false)},
			// claimed_next, next and hint: with claim_next only.
			extraOutput: map[string]any{
				"claimed_next": map[string]any{"type": "boolean", "description": "with claim_next: whether the next task was claimed"},
				"next":         map[string]any{"description": "with claim_next: the claim, as graph_task_claim answers it, or null when no task was ready", "anyOf": []any{nextSchema(), map[string]any{"type": "null"}}},
				"hint":         map[string]any{"type": "string"},
				// When claim_next claimed nothing, as graph_task_claim.
				"next_claimable_at":             nextClaimableAtSchema(),
				"next_claimable_at_lower_bound": nextClaimableAtLowerBoundSchema(),
			},
		},
		{
			name: manifest.ToolCreate, title: "Create a task or a graph",
			desc: "Create a task (a node of a workflow's DAG). It is ready to claim once every node in depends_on has completed (and not_before has passed), by a worker whose capabilities include its requires. A retryable failure is retried after retry_delay_ms, doubling per retry (at most 15 minutes). " +
				"A task with a concurrency_key is claimed only while its key's limit allows. " +
				"Idempotent: creating the same workflow_id and node_id again with the same payload, depends_on, max_attempts, priority, requires, retry_delay_ms, concurrency_key and kind returns the existing task (created: false); different content is rejected. " +
				fmt.Sprintf("To create a whole graph in one call, give nodes instead of node_id and its fields: 1 to %d nodes (at most %d KiB), each with node_id and the same optional fields; depends_on may name nodes of the same call or existing ones. All are created, or none: a cycle, an unknown dependency or a node that exists with different content refuses the call, naming the node. The answer's nodes gives each node's task_id, state and created.", taskgraph.MaxCreateNodes, taskgraph.MaxCreateBytes>>10),
			fields: withRequestID(append(append([]field{
				{name: "workflow_id", kind: kindIdentifier, required: true, desc: "the workflow (DAG) the task belongs to; created on first use"},
				{name: "node_id", kind: kindIdentifier, unless: "nodes", desc: "the task's name within the workflow (required unless nodes is given)"},
			}, nodeFields[1:]...), fNodes)...),
			annotations: &mcp.ToolAnnotations{Title: "Create a task or a graph", IdempotentHint: true, DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(false)},
			extraOutput: map[string]any{"created": map[string]any{"type": "boolean", "description": "whether this call created the task (with nodes: any task)"}, "nodes": createdNodesSchema()},
			required:    []string{"created"},
		},
		{
			name: manifest.ToolFail, title: "Fail a claimed task",
			desc: "Report that the task you hold failed, with an error text. With retryable true and attempts left it returns to pending and is claimable again after retry_after_ms, or by default after the task's backoff (retry_delay_ms, 1 s unless set at creation, doubling per retry, at most 15 minutes); otherwise it fails and every unfinished task that depends on it is cancelled." + reportNote,
			fields: withRequestID(withReport(append(append([]field{}, holderFields...), field{name: "error", kind: kindErrorText, required: true, desc: "what went wrong: at most 65536 characters and 64 KiB of UTF-8"}, field{name: "retryable", kind: kindBool, desc: "true if another attempt may succeed (default false)"},
				field{name: "retry_after_ms", kind: kindInt, min: 0, max: taskgraph.MaxRetryAfter.Milliseconds(), desc: fmt.Sprintf("with retryable true: the retry waits this long, in milliseconds (0..%d; 0 retries at once), instead of the task's backoff", taskgraph.MaxRetryAfter.Milliseconds())})...)...),
			annotations: &mcp.ToolAnnotations{Title: "Fail a claimed task", DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)},
		},
		{
			name: manifest.ToolHeartbeat, title: "Extend a claim's lease",
			desc:        "Keep the task you hold: extends the lease to now + lease_ms (server time). The generation does not change. Rejected if your claim is no longer live, in which case stop work on the task." + reportNote,
			fields:      withRequestID(withReport(append(append([]field{}, holderFields...), fLeaseMS)...)...),
			annotations: &mcp.ToolAnnotations{Title: "Extend a claim's lease", IdempotentHint: true, DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(false)},
		},
		{
			name: manifest.ToolInspect, title: "Inspect a task or outline a workflow",
			desc: "Read a task, in one of three forms: task_id; workflow_id with node_id; or workflow_id alone for the workflow's outline. " +
				"A task form returns the task (state, owner, generation, lease expiry, attempts, result or error, status message, the current attempt's report and the usage of all attempts) " +
				"and its direct dependencies with their states and results (at most 256 KiB of results in all; past that a result is null with result_omitted true: inspect that task_id to read it). " +
				fmt.Sprintf("The outline returns workflow: counts by state and every task's id, node_id, state, depends_on, holder, lease expiry, attempts, priority, requires, due_at, report and clipped error and status_message, and the workflow's usage, without payloads or results (at most %d tasks and %d KiB, then truncated: true). ", MaxOutlineTasks, MaxOutlineBytes>>10) +
				"Never returns a claim token.",
			fields: []field{
				{name: "task_id", kind: kindTaskID, desc: "the task id returned by graph_task_create or graph_task_claim (first form: give nothing else)"},
				{name: "workflow_id", kind: kindIdentifier, desc: "the workflow: with node_id, the task of that node (second form); alone, the workflow's outline (third form)"},
				{name: "node_id", kind: kindIdentifier, desc: "with workflow_id: the task's node id (second form)"},
			},
			annotations: &mcp.ToolAnnotations{Title: "Inspect a task or outline a workflow", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
			// task and dependencies answer the task forms, workflow the
			// outline: none is required of every answer.
			extraOutput: map[string]any{"dependencies": depsSchema(), "workflow": outlineSchema()},
			required:    []string{},
		},
	}
}

// Call runs one tool call: it decodes and validates the arguments, checks
// them against the caller's roles and scopes, runs the tool, and attaches
// the receipt. Arguments that are not an object are a protocol error
// (-32602); bad arguments and anything the store rejects are tool errors
// (isError) naming the field or rule; anything else is an internal error
// (-32603). tool must be one the surface offers (ToolNames).
func (s *Surface) Call(ctx context.Context, c Caller, tool string, rawArgs json.RawMessage) (*mcp.CallToolResult, error) {
	ctx = c.storeContext(ctx)
	a, err := s.admit(ctx, c, tool, rawArgs)
	if err == nil {
		var out *toolOutput
		if out, err = s.run(ctx, tool, a); err == nil {
			return s.toolResult(c, tool, out, true)
		}
	}
	return s.toolError(ctx, tool, err)
}

// run runs tool with its decoded, authorized arguments against the store.
// ctx carries the caller's arrival and principal for the store
// (Caller.storeContext).
func (s *Surface) run(ctx context.Context, tool string, a *args) (*toolOutput, error) {
	ctx = withReportOf(withRequestIDOf(ctx, a), a)
	switch tool {
	case manifest.ToolCreate:
		return s.create(ctx, a)
	case manifest.ToolClaim:
		return s.claim(ctx, a)
	case manifest.ToolHeartbeat:
		t, err := s.store.Heartbeat(ctx, holderOf(a), time.Duration(a.num["lease_ms"])*time.Millisecond)
		return taskOutput(t), err
	case manifest.ToolComplete:
		if a.next != nil {
			return s.completeAndClaim(ctx, a)
		}
		t, err := s.store.Complete(ctx, holderOf(a), a.raw["result"])
		return taskOutput(t), err
	case manifest.ToolFail:
		if a.has("retry_after_ms") {
			if !a.bln["retryable"] {
				return nil, fieldErrorf("retry_after_ms", "retry_after_ms applies only with retryable: true")
			}
			t, err := s.store.FailRetryAfter(ctx, holderOf(a), a.str["error"], time.Duration(a.num["retry_after_ms"])*time.Millisecond)
			return taskOutput(t), err
		}
		t, err := s.store.Fail(ctx, holderOf(a), a.str["error"], a.bln["retryable"])
		return taskOutput(t), err
	case manifest.ToolCancel:
		if a.bln["release"] {
			t, err := s.store.Release(ctx, holderOf(a))
			return taskOutput(t), err
		}
		t, err := s.store.Cancel(ctx, holderOf(a))
		return taskOutput(t), err
	case manifest.ToolInspect:
		return s.inspect(ctx, a)
	}
	return nil, fmt.Errorf("tool %q has no implementation", tool)
}

// withRequestIDOf is ctx carrying the call's request_id, when it has one,
// for the store.
func withRequestIDOf(ctx context.Context, a *args) context.Context {
	if a.has("request_id") {
		return taskgraph.WithRequestID(ctx, a.str["request_id"])
	}
	return ctx
}

func holderOf(a *args) lease.Holder {
	return lease.Holder{TaskID: a.str["task_id"], Owner: a.str["owner"], Generation: a.num["generation"], Token: a.str["claim_token"]}
}

func taskOutput(t taskgraph.Task) *toolOutput { return &toolOutput{Task: renderTask(t)} }

// WaitLimitHint is the hint of a claim-next that found no task while the
// server already held its maximum of parked claims (taskgraph.ErrWaitLimit).
const WaitLimitHint = "no task was claimed: the server holds its maximum of parked claims (claim-next calls waiting for a task), so this one could not wait; retry after a moment"

// KeyRateHint is the hint (a format taking a time) of a claim-next that
// found no task while a task it could take waits for its concurrency key's
// rate: the answer's next_claimable_at.
const KeyRateHint = "no task was claimed: a ready task's concurrency key has granted its claims for now (its rate limit); the next is claimable at %s (next_claimable_at): claim again then, or with wait_ms"

// KeyRateLowerBoundHint is KeyRateHint when next_claimable_at is a lower
// bound (next_claimable_at_lower_bound).
const KeyRateLowerBoundHint = "no task was claimed: the concurrency keys of ready tasks have granted their claims for now (their rate limits); none is claimable before %s (next_claimable_at, a lower bound: the server read its bound of rate-limited keys without finding one with a task for you): claim again then, or with wait_ms"

// UnknownWorkflowHint is the hint (a format taking the workflow id) of a
// claim-next within a workflow_id that no workflow has: nothing was claimed
// because the workflow does not exist, not because it has no ready task.
const UnknownWorkflowHint = "no task was claimed: no workflow %q exists; check workflow_id (claims keep answering claimed: false until a task of that workflow is created)"

// ShuttingDownHint is the hint of a claim-next that found no task after its
// server began to shut down (taskgraph.Store.Drain): it did not wait (any
// longer), so that the shutdown is not held by parked claims.
const ShuttingDownHint = "no task was claimed: the server is shutting down, so this claim did not wait for a task; retry (against a server that is up) after a moment"

// claim runs graph_task_claim.
func (s *Surface) claim(ctx context.Context, a *args) (*toolOutput, error) {
	req := taskgraph.ClaimRequest{
		Owner: a.str["owner"], TaskID: a.str["task_id"], WorkflowID: a.str["workflow_id"],
		Lease: time.Duration(a.num["lease_ms"]) * time.Millisecond, Wait: time.Duration(a.num["wait_ms"]) * time.Millisecond,
		Capabilities: a.lst["capabilities"],
	}
	c, ok, err := s.store.Claim(ctx, req)
	if errors.Is(err, taskgraph.ErrWaitLimit) {
		// Not the worker's fault and nothing to fix: it found no task now.
		return &toolOutput{Claimed: boolPtr(false), Hint: WaitLimitHint}, nil
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		out := &toolOutput{Claimed: boolPtr(false), Hint: s.noClaimHint(ctx, c, req.WorkflowID)}
		out.setNextClaimableAt(c)
		return out, nil
	}
	return claimedOutput(c), nil
}

// setNextClaimableAt puts on a claim-next's answer that claimed nothing
// (c) when a concurrency key's rate next lets it take a task, if one holds
// a task back, and whether that time is a lower bound.
func (o *toolOutput) setNextClaimableAt(c taskgraph.Claimed) {
	if c.NextClaimableAt.IsZero() {
		return
	}
	at := formatTime(c.NextClaimableAt)
	o.NextClaimableAt = &at
	if c.NextClaimableAtLowerBound {
		o.NextClaimableAtLowerBound = boolPtr(true)
	}
}

func nextClaimableAtSchema() map[string]any {
	return map[string]any{"type": "string", "format": "date-time",
		"description": "only when nothing was claimed while a concurrency key's rate holds back a task this claim could take: the server time at which the earliest such key allows its next claim"}
}

func nextClaimableAtLowerBoundSchema() map[string]any {
	return map[string]any{"type": "boolean",
		"description": "only with next_claimable_at, when it is a lower bound: the server read its bound of rate-limited keys without finding one with a task this claim could take, so nothing is claimable by rate before next_claimable_at, and perhaps not then either"}
}

// claimedOutput is graph_task_claim's answer to a claim that claimed c.
func claimedOutput(c taskgraph.Claimed) *toolOutput {
	return &toolOutput{Task: renderTask(c.Task), Claimed: boolPtr(true), Lease: renderLease(c.Lease), Dependencies: renderDeps(c.Dependencies)}
}

// noClaimHint is the hint of a claim-next within workflowID ("": any) that
// found nothing (c): the pause that stopped it, or that no such workflow
// exists, or "" when it simply found no ready task.
func (s *Surface) noClaimHint(ctx context.Context, c taskgraph.Claimed, workflowID string) string {
	if c.Draining {
		return ShuttingDownHint
	}
	if c.Paused != nil {
		// An operator paused claiming: say so, and that waiting is the fix.
		return "no task was claimed: " + c.Paused.String()
	}
	if !c.NextClaimableAt.IsZero() {
		if c.NextClaimableAtLowerBound {
			return fmt.Sprintf(KeyRateLowerBoundHint, formatTime(c.NextClaimableAt))
		}
		return fmt.Sprintf(KeyRateHint, formatTime(c.NextClaimableAt))
	}
	// A typo in workflow_id would otherwise look like an empty
	// workflow forever. Asked after the wait, so a workflow created
	// meanwhile is not called unknown; not an error, since a worker may
	// start before its workflow is created.
	if workflowID != "" {
		if _, err := s.store.WorkflowSummary(ctx, workflowID); errors.Is(err, taskgraph.ErrNotFound) {
			return fmt.Sprintf(UnknownWorkflowHint, workflowID)
		}
	}
	return ""
}

// claimNextRequestIDRule refuses graph_task_complete with both claim_next
// and request_id: the store keeps no answer of a completion that claims
// (taskgraph.Store.CompleteAndClaim), so such a call could not be retried
// safely.
const claimNextRequestIDRule = "claim_next and request_id cannot be combined: a completion that also claims is not kept for retries. Either complete with request_id and then call graph_task_claim, or complete with claim_next and no request_id; nothing was written"

// completeAndClaim runs graph_task_complete with claim_next: the
// completion and, only if it was accepted, a claim-next that does not wait,
// in one transaction (taskgraph.Store.CompleteAndClaim).
func (s *Surface) completeAndClaim(ctx context.Context, a *args) (*toolOutput, error) {
	if a.has("request_id") {
		return nil, fieldErrorf("request_id", claimNextRequestIDRule)
	}
	n := a.next
	req := taskgraph.ClaimRequest{Owner: a.str["owner"], WorkflowID: n.str["workflow_id"],
		Lease: time.Duration(n.num["lease_ms"]) * time.Millisecond, Capabilities: n.lst["capabilities"]}
	t, c, ok, err := s.store.CompleteAndClaim(ctx, holderOf(a), a.raw["result"], req)
	if err != nil {
		return nil, err
	}
	out := taskOutput(t)
	out.ClaimedNext = boolPtr(ok)
	if ok {
		out.next = claimedOutput(c)
	} else {
		out.Next = json.RawMessage("null")
		out.Hint = s.noClaimHint(ctx, c, req.WorkflowID)
		out.setNextClaimableAt(c)
	}
	return out, nil
}

// leaseSchema is the output schema of a claim's lease.
func leaseSchema() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": false,
		"required": []string{"claim_token", "generation", "lease_expires_at", "owner"},
		"properties": map[string]any{
			"owner":            map[string]any{"type": "string"},
			"generation":       map[string]any{"type": "integer", "minimum": 1},
			"claim_token":      map[string]any{"type": "string"},
			"lease_expires_at": map[string]any{"type": "string", "format": "date-time"},
		}}
}

// nextSchema is the output schema of graph_task_complete's next: the
// answer of a graph_task_claim that claimed.
func nextSchema() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": false,
		"required": []string{"claimed", "dependencies", "lease", "receipt", "task"},
		"properties": map[string]any{
			"task":         taskSchema(),
			"claimed":      map[string]any{"type": "boolean"},
			"lease":        leaseSchema(),
			"dependencies": depsSchema(),
			"receipt":      receiptSchema(),
		}}
}

// outputSchema renders a tool's output schema.
func (d toolDef) outputSchema() map[string]any {
	task := taskSchema()
	if d.name == manifest.ToolClaim {
		task = map[string]any{"oneOf": []any{task, map[string]any{"type": "null"}}}
	}
	props := map[string]any{"task": task, "receipt": receiptSchema()}
	for k, v := range d.extraOutput {
		props[k] = v
	}
	req := append([]string{"receipt"}, d.required...)
	// Without a list of its own a tool's answers all carry task; an empty
	// list requires nothing beyond receipt.
	if d.required == nil {
		req = append(req, "task")
	}
	slices.Sort(req)
	return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
}
