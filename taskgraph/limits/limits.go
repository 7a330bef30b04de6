package limits

import "time"

// Sizes and counts. Inputs outside them are rejected by the store with a
// *taskgraph.ValidationError naming the field and the rule.
const (
	// MaxIdentifierLen bounds workflow_id, node_id, owner and request ids.
	MaxIdentifierLen = 128
	// MaxPayloadBytes bounds a task's payload.
	MaxPayloadBytes = 64 << 10
	// MaxResultBytes bounds a completed task's result.
	MaxResultBytes = 256 << 10
	// MaxErrorBytes bounds a failure's error.
	MaxErrorBytes = 64 << 10
	// MaxReasonBytes bounds an operator's reason.
	MaxReasonBytes = 4 << 10
	// MaxDependsOn bounds a node's dependencies.
	MaxDependsOn = 64
	// MaxTasksPerWorkflow bounds the tasks of one workflow.
	MaxTasksPerWorkflow = 10_000
	// MaxCreateNodes bounds the nodes of one whole-graph submit over MCP
	// (graph_task_create's nodes); the store's CreateWorkflow itself
	// takes up to MaxTasksPerWorkflow.
	MaxCreateNodes = 1000
	// MaxCreateBytes bounds the JSON text of one whole-graph submit's
	// nodes over MCP (as sent, payloads included).
	MaxCreateBytes = 512 << 10
	// DefaultMaxAttempts is NodeSpec.MaxAttempts's default.
	DefaultMaxAttempts = 3
	// MinPriority is the lowest NodeSpec.Priority (default 0).
	MinPriority = -100
	// MaxPriority is the highest NodeSpec.Priority.
	MaxPriority = 100
	// MinMaxAttempts is the lowest NodeSpec.MaxAttempts.
	MinMaxAttempts = 1
	// MaxMaxAttempts is the highest NodeSpec.MaxAttempts.
	MaxMaxAttempts = 100
	// MaxJSONDepth bounds the nesting of payloads and results.
	MaxJSONDepth = 64
	// MaxDependencyResultBytes bounds the results carried by one answer's
	// dependencies (a claim, Store.Dependencies).
	MaxDependencyResultBytes = 256 << 10
)

// IdentifierPattern is the rule for workflow_id, node_id and owner.
const IdentifierPattern = `^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`

// TagPattern is the rule for a capability tag (NodeSpec.Requires,
// ClaimRequest.Capabilities): a lower-case letter, then up to 63 lower-case
// letters, digits, '_', '.' or '-'.
const TagPattern = `^[a-z][a-z0-9_.-]{0,63}$`

// Bounds of capability routing, claiming and retry timing.
const (
	// MaxRequires bounds NodeSpec.Requires.
	MaxRequires = 16
	// MaxCapabilities bounds ClaimRequest.Capabilities.
	MaxCapabilities = 64
	// MaxClaimWait bounds ClaimRequest.Wait.
	MaxClaimWait = 30 * time.Second
	// DefaultRetryDelay is NodeSpec.RetryDelay's default: the wait before
	// the first retry of a retryable failure; it doubles per retry.
	DefaultRetryDelay = time.Second
	// MaxRetryDelay bounds NodeSpec.RetryDelay and caps every backoff.
	MaxRetryDelay = 15 * time.Minute
	// MaxRetryAfter bounds the retry delay a failing worker asks for.
	MaxRetryAfter = 24 * time.Hour
	// MaxNotBefore bounds how far ahead of the creation NodeSpec.NotBefore
	// may lie.
	MaxNotBefore = 365 * 24 * time.Hour
)

// Bounds of concurrency keys and their limits (NodeSpec.ConcurrencyKey,
// KeyLimit). A key follows IdentifierPattern.
const (
	// MaxKeyClaimed bounds KeyLimit.MaxClaimed.
	MaxKeyClaimed = 100000
	// MaxKeyRate bounds KeyLimit.Rate: a key's row keeps the times of
	// its last Rate claims.
	MaxKeyRate = 1000
	// MaxKeyRateInterval bounds KeyLimit.RateInterval (at least 1 ms).
	MaxKeyRateInterval = 24 * time.Hour
)
