package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// Caller is who makes a call and when it arrived: what every operation of
// the surface takes besides its arguments. Transports know it (the HTTP
// front stamps the arrival before it reads the body or waits for a slot,
// and authenticates the principal); the surface passes it to the store as
// the store's API asks (taskgraph.WithArrival, taskgraph.WithPrincipal)
// right before it calls the store.
type Caller struct {
	// Principal is whom the call acts for; nil is no principal: every
	// role, workflow and owner (stdio without serve --principal, HTTP
	// without authentication).
	Principal *principal.Principal
	// Arrival is the server time the request arrived; holder writes are
	// judged at it. Zero: the store's clock when the store is called.
	Arrival time.Time
}

// storeContext is ctx carrying c for the store.
func (c Caller) storeContext(ctx context.Context) context.Context {
	if !c.Arrival.IsZero() {
		ctx = taskgraph.WithArrival(ctx, c.Arrival)
	}
	if c.Principal != nil {
		ctx = taskgraph.WithPrincipal(ctx, c.Principal.Name)
	}
	return ctx
}

// Config configures New.
type Config struct {
	// Store is the task store every tool calls.
	Store *taskgraph.Store
	// Surface is the effective least-authority surface (tools, resources,
	// extensions) after the profile and flags.
	Surface manifest.Surface
	// ExtraLimits are transport limits added to the manifest's limits.
	ExtraLimits map[string]int64
	// Logger receives internal faults; nil discards them.
	Logger *slog.Logger
	// OnToolCall, if set, is called once per tool call with the tool name and
	// its outcome (ok, invalid, not_found, conflict, stale_claim, forbidden,
	// unavailable, protocol_error, internal_error, deadline, cancelled), for
	// metrics.
	OnToolCall func(tool, outcome string)
}

// Surface is the server's tools and the Tasks extension over them, with no
// transport: each operation takes the Caller and the arguments and returns
// the protocol's result or error.
type Surface struct {
	store    *taskgraph.Store
	cfg      Config
	log      *slog.Logger
	manifest manifest.Manifest
	// toolNames are the tools the surface offers, sorted; defs are their
	// definitions by name.
	toolNames []string
	defs      map[string]toolDef
	// roles are the surface and manifest of each set of roles, by
	// roleSetKey.
	roles map[string]roleSurface
}

// roleSurface is the server's surface narrowed by one set of roles, with
// the manifest that describes it.
type roleSurface struct {
	surface  manifest.Surface
	manifest manifest.Manifest
}

// New builds the surface: the capability manifest of the server and of
// every set of roles.
func New(cfg Config) (*Surface, error) {
	if cfg.Store == nil {
		return nil, errors.New("tools: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	man, err := manifest.Build(cfg.Surface, cfg.ExtraLimits)
	if err != nil {
		return nil, fmt.Errorf("build capability manifest: %w", err)
	}
	s := &Surface{store: cfg.Store, cfg: cfg, log: cfg.Logger, manifest: man}
	if err := s.buildRoleSurfaces(); err != nil {
		return nil, err
	}
	s.defs = map[string]toolDef{}
	for _, d := range toolDefs() {
		if cfg.Surface.Allows(d.name) {
			s.toolNames = append(s.toolNames, d.name)
			s.defs[d.name] = d
		}
	}
	slices.Sort(s.toolNames)
	return s, nil
}

// Manifest returns the capability manifest of the server's whole surface.
func (s *Surface) Manifest() manifest.Manifest { return s.manifest }

// Surface returns the server's whole surface.
func (s *Surface) Surface() manifest.Surface { return s.cfg.Surface }

// ToolNames returns the tools the surface offers, sorted.
func (s *Surface) ToolNames() []string { return slices.Clone(s.toolNames) }

// Tools returns the tools the surface offers, in manifest order, with
// their input and output schemas, for registration.
func (s *Surface) Tools() []*mcp.Tool {
	var out []*mcp.Tool
	for _, d := range toolDefs() {
		if s.cfg.Surface.Allows(d.name) {
			out = append(out, &mcp.Tool{Name: d.name, Title: d.title, Description: d.desc,
				InputSchema: inputSchema(d.fields), OutputSchema: d.outputSchema(), Annotations: d.annotations})
		}
	}
	return out
}

// roleSetKey names a set of roles (sorted, joined).
func roleSetKey(roles []string) string { return strings.Join(principal.SortedUnique(roles), ",") }

// buildRoleSurfaces computes the narrowed surface and manifest of every set
// of roles (eight, the empty set included), once, at New.
func (s *Surface) buildRoleSurfaces() error {
	s.roles = map[string]roleSurface{}
	for mask := 0; mask < 1<<len(principal.AllRoles); mask++ {
		var roles []string
		for i, r := range principal.AllRoles {
			if mask&(1<<i) != 0 {
				roles = append(roles, r)
			}
		}
		prof := principal.Profile(&principal.Principal{Roles: roles})
		base := s.cfg.Surface
		sf := manifest.Surface{
			Resources:      base.Resources && prof.Resources,
			TasksExtension: base.TasksExtension && prof.TasksExtension,
			SkillURIs:      []string{},
		}
		sf.Tools = []string{}
		for _, t := range base.Tools {
			if slices.Contains(prof.AllowedTools, t) {
				sf.Tools = append(sf.Tools, t)
			}
		}
		// The extension surfaces tasks through create and inspect.
		sf.TasksExtension = sf.TasksExtension && slices.Contains(sf.Tools, manifest.ToolCreate) && slices.Contains(sf.Tools, manifest.ToolInspect)
		sf.SkillsExtension = base.SkillsExtension && prof.Skills && sf.Resources
		sf.UIExtension = base.UIExtension && sf.Resources && slices.Contains(sf.Tools, manifest.ToolInspect)
		if sf.SkillsExtension {
			sf.SkillURIs = append([]string{}, base.SkillURIs...)
		}
		m, err := manifest.Build(sf, s.cfg.ExtraLimits)
		if err != nil {
			return fmt.Errorf("build capability manifest for roles %q: %w", roleSetKey(roles), err)
		}
		s.roles[roleSetKey(roles)] = roleSurface{surface: sf, manifest: m}
	}
	return nil
}

// For returns the surface and manifest p sees: the server's own without a
// principal (nil), else its roles' narrowing.
func (s *Surface) For(p *principal.Principal) (manifest.Surface, manifest.Manifest) {
	if p == nil {
		return s.cfg.Surface, s.manifest
	}
	rs := s.roles[roleSetKey(p.Roles)]
	return rs.surface, rs.manifest
}

// manifestFor returns the manifest whose digest c's receipts carry.
func (s *Surface) manifestFor(c Caller) manifest.Manifest {
	_, m := s.For(c.Principal)
	return m
}

func (s *Surface) observe(tool, outcome string) {
	if s.cfg.OnToolCall != nil {
		s.cfg.OnToolCall(tool, outcome)
	}
}

// admit decodes a call's arguments and authorizes them for c.
func (s *Surface) admit(ctx context.Context, c Caller, tool string, rawArgs json.RawMessage) (*args, error) {
	d, ok := s.defs[tool]
	if !ok {
		return nil, fmt.Errorf("tool %q is not one of this server's tools", tool)
	}
	a, err := decodeArgs(rawArgs, d.fields)
	if err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, c.Principal, tool, a); err != nil {
		return nil, err
	}
	return a, nil
}

// ArgumentError returns the tool error of a call whose arguments the
// validator refuses (without authorizing or running anything), and false
// when they are valid or tool is not offered. The HTTP front answers with
// it a call the SDK would refuse before any tool runs (see package wire,
// ModernResultBody).
func (s *Surface) ArgumentError(ctx context.Context, tool string, rawArgs json.RawMessage) (*mcp.CallToolResult, bool) {
	d, ok := s.defs[tool]
	if !ok {
		return nil, false
	}
	if _, err := decodeArgs(rawArgs, d.fields); err != nil {
		res, rerr := s.toolError(ctx, tool, err)
		return res, rerr == nil && res != nil
	}
	return nil, false
}

// toolResult is the result of a successful call: the output with its
// receipt, as structured content and as text. observe counts it as a call
// (the settled result of a task handle is not one).
func (s *Surface) toolResult(c Caller, tool string, out *toolOutput, observe bool) (*mcp.CallToolResult, error) {
	taskID, gen := "", int64(0)
	if out.Task != nil {
		taskID, gen = out.Task.TaskID, out.Task.Generation
	}
	rec, err := manifest.NewReceipt(s.manifestFor(c).SHA256(), manifest.Operation(tool), taskID, gen)
	if err != nil {
		return nil, s.internal(tool, err)
	}
	out.Receipt = rec
	if n := out.next; n != nil {
		// The next claim's answer carries its own receipt, as
		// graph_task_claim's would.
		nrec, err := manifest.NewReceipt(s.manifestFor(c).SHA256(), manifest.Operation(manifest.ToolClaim), n.Task.TaskID, n.Task.Generation)
		if err != nil {
			return nil, s.internal(tool, err)
		}
		n.Receipt = nrec
		if out.Next, err = json.Marshal(n); err != nil {
			return nil, s.internal(tool, err)
		}
	}
	var v any = out
	if out.Workflow != nil {
		v = outlineOutput{Workflow: out.Workflow, Receipt: rec}
	}
	if out.Graph != nil {
		out.Graph.Receipt = rec
		v = out.Graph
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, s.internal(tool, err)
	}
	if observe {
		s.observe(tool, "ok")
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
	}, nil
}

// toolError maps an error from a tool to the result or protocol error.
func (s *Surface) toolError(ctx context.Context, tool string, err error) (*mcp.CallToolResult, error) {
	var ae *argError
	switch {
	case errors.Is(err, taskgraph.ErrUnavailable):
		return s.unavailable(tool, err), nil
	case errors.Is(err, errArgsNotObject):
		s.observe(tool, "protocol_error")
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: arguments must be a JSON object", tool)}
	case errors.As(err, &ae), errors.Is(err, taskgraph.ErrInvalid), errors.Is(err, taskgraph.ErrNotFound),
		errors.Is(err, taskgraph.ErrConflict), errors.Is(err, taskgraph.ErrStaleClaim), errors.Is(err, principal.ErrForbidden):
		kind := outcomeOf(err)
		s.observe(tool, kind)
		return &mcp.CallToolResult{
			Meta:    mcp.Meta{ErrorMetaKey: errorDetail(kind, err)},
			IsError: true,
			Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}},
		}, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		s.observe(tool, "deadline")
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s did not finish within the call deadline; it may or may not have taken effect: repeat it with the same request_id, or inspect the task before retrying", tool)}
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// The client went away or cancelled the call (notifications/cancelled,
		// a closed HTTP connection): not a fault of the server, and nobody is
		// waiting for this answer.
		s.observe(tool, "cancelled")
		s.log.Debug("tool call cancelled by the client", "tool", tool)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s was cancelled by the client; it may or may not have taken effect", tool)}
	case errors.Is(err, taskgraph.ErrClosed):
		s.observe(tool, "internal_error")
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is shutting down; retry against a running server"}
	}
	return nil, s.internal(tool, err)
}

// ErrorMetaKey is the _meta key of a tool error's machine-readable detail:
// {"kind": "invalid" | "not_found" | "conflict" | "stale_claim" |
// "unavailable" | "forbidden", "field"?, "reason"?, "retryable"?,
// "scope"? (of forbidden: "role", "workflows" or "owners"), "missing"? (of a
// claim refused for capabilities: the tags it lacked)}, so clients need not
// parse the text.
const ErrorMetaKey = "graph-engineering/error"

// errorDetail is the _meta detail of a tool error.
func errorDetail(kind string, err error) map[string]any {
	d := map[string]any{"kind": kind}
	var ve *taskgraph.ValidationError
	var se *lease.StaleClaimError
	var ae *argError
	var fe *principal.ForbiddenError
	var me *taskgraph.MissingCapabilitiesError
	switch {
	case kind == "unavailable":
		d["reason"], d["retryable"], _ = taskgraph.UnavailableReason(err)
	case errors.As(err, &se):
		d["reason"] = string(se.Reason)
	case errors.As(err, &fe):
		d["scope"] = fe.Scope
	case errors.As(err, &me):
		d["missing"] = me.Missing
	case errors.As(err, &ve):
		d["field"] = ve.Field
	case errors.As(err, &ae) && ae.field != "":
		d["field"] = ae.field
	}
	return d
}

func outcomeOf(err error) string {
	var ae *argError
	switch {
	case errors.As(err, &ae), errors.Is(err, taskgraph.ErrInvalid):
		return "invalid"
	case errors.Is(err, taskgraph.ErrNotFound):
		return "not_found"
	case errors.Is(err, taskgraph.ErrConflict):
		return "conflict"
	case errors.Is(err, taskgraph.ErrStaleClaim):
		return "stale_claim"
	case errors.Is(err, principal.ErrForbidden):
		return "forbidden"
	}
	return "error"
}

// internal logs an unexpected fault and returns the -32603 the client sees;
// the details stay in the server log.
func (s *Surface) internal(what string, err error) error {
	if errors.Is(err, taskgraph.ErrUnavailable) {
		return s.unavailableRPC(what, err)
	}
	s.log.Error("internal error", "in", what, "err", err)
	s.observe(what, "internal_error")
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error; the server logged the details and keeps serving"}
}
