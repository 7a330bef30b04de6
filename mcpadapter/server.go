package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/skills"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// ServerName is the name the server reports in serverInfo.
const ServerName = "graph-engineering"

// Instructions are sent to clients in the initialize and server/discover results.
const Instructions = `graph-engineering coordinates work as durable task graphs (workflows of tasks with dependencies). Use only the advertised graph_task_* tools.
Claims are exclusive and fenced: graph_task_claim returns an owner, a generation and a secret claim_token. Pass the task_id with that owner, generation and claim_token on every graph_task_heartbeat, graph_task_complete, graph_task_fail and graph_task_cancel, and heartbeat before lease_expires_at. A write from a superseded generation or an expired lease is rejected: stop work on that task.
This server grants no human approval, checkpoint, bypass, force, skip or administrative authority; those belong to human operators outside MCP.`

// Per-request _meta keys of the 2026-07-28 revision.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// Config configures New.
type Config struct {
	Store *taskgraph.Store
	// Version is reported in serverInfo.
	Version string
	// Surface is the effective least-authority surface (tools, resources,
	// extensions) after the profile and flags.
	Surface manifest.Surface
	// Skills are the loaded public skills; served when Surface.SkillsExtension.
	Skills *skills.Set
	// ExtraLimits are transport limits added to the manifest's limits.
	ExtraLimits map[string]int64
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// CacheTTLMs is the ttlMs sent on cacheable results (discover, lists,
	// reads); the surface is fixed for the life of the process.
	CacheTTLMs int
	// OnToolCall, if set, is called once per tool call with the tool name and
	// its outcome (ok, invalid, not_found, conflict, stale_claim, forbidden,
	// protocol_error, internal_error, deadline, cancelled), for metrics.
	OnToolCall func(tool, outcome string)
	// Register, if set, is called with the SDK server before it serves, to
	// add further features (for example skills).
	Register func(*mcp.Server) error
}

// Server is the MCP face of the task store.
type Server struct {
	store    *taskgraph.Store
	cfg      Config
	log      *slog.Logger
	mcp      *mcp.Server
	manifest manifest.Manifest
	// toolNames are the tools the surface offers, sorted.
	toolNames []string
	// roleSurfaces are the surface and manifest of each set of roles, by
	// roleSetKey (see principal_server.go).
	roleSurfaces map[string]roleSurface
}

// New builds the MCP server: the tools the surface allows, the manifest
// resource, the extensions, and the middleware that keeps the surface to
// exactly what is advertised.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("mcpadapter: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "devel"
	}
	man, err := manifest.Build(cfg.Surface, cfg.ExtraLimits)
	if err != nil {
		return nil, fmt.Errorf("build capability manifest: %w", err)
	}
	s := &Server{store: cfg.Store, cfg: cfg, log: cfg.Logger, manifest: man}
	if err := s.buildRoleSurfaces(); err != nil {
		return nil, err
	}

	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	if cfg.Surface.Resources {
		caps.Resources = &mcp.ResourceCapabilities{}
	}
	if cfg.Surface.TasksExtension {
		caps.AddExtension(manifest.TasksExtension, nil)
	}
	if cfg.Surface.SkillsExtension {
		if cfg.Skills == nil {
			return nil, errors.New("mcpadapter: the surface serves skills but Config.Skills is nil")
		}
		caps.AddExtension(manifest.SkillsExtension, skills.CapabilityValue(cfg.Skills))
	}
	ttl := cfg.CacheTTLMs
	instructions := Instructions
	if cfg.Surface.SkillsExtension && cfg.Skills.Len() > 0 {
		instructions += "\nSkills (read-only instructions for working tasks here) are listed by skills/list and readable as resources: " + strings.Join(cfg.Skills.URIs(), ", ") + ". They grant no authority."
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Capabilities: caps,
		Logger:       sdkLogger(cfg.Logger),
		SetCacheable: func(ctx context.Context, _ mcp.Request, c *mcp.Cacheable) {
			if c.TTLMs == 0 {
				c.TTLMs = ttl
			}
			c.CacheScope = "public"
			if _, ok := principalOf(ctx); ok {
				// What a principal sees depends on its roles.
				c.CacheScope = "private"
			}
		},
	})
	for _, d := range toolDefs() {
		if !cfg.Surface.Allows(d.name) {
			continue
		}
		s.toolNames = append(s.toolNames, d.name)
		s.mcp.AddTool(&mcp.Tool{
			Name: d.name, Title: d.title, Description: d.desc,
			InputSchema: inputSchema(d.fields), OutputSchema: d.outputSchema(), Annotations: d.annotations,
		}, s.handler(d))
	}
	if cfg.Surface.Resources {
		s.addManifestResource()
	}
	if cfg.Surface.UIExtension {
		if err := s.addUIApp(); err != nil {
			return nil, err
		}
	}
	if cfg.Surface.TasksExtension {
		if err := s.addTasksExtension(); err != nil {
			return nil, err
		}
	}
	if cfg.Surface.SkillsExtension {
		if err := skills.Register(s.mcp, cfg.Skills, skills.RegisterOptions{TTL: time.Duration(cfg.CacheTTLMs) * time.Millisecond}); err != nil {
			return nil, fmt.Errorf("register skills: %w", err)
		}
	}
	if cfg.Register != nil {
		if err := cfg.Register(s.mcp); err != nil {
			return nil, err
		}
	}
	// Outermost first: recover from panics, refuse unserved methods, hide the
	// tasks extension from legacy sessions, then the tasks extension itself.
	slices.Sort(s.toolNames)
	s.mcp.AddReceivingMiddleware(s.recoverMiddleware, s.unservedMiddleware, s.unknownToolMiddleware, s.principalMiddleware, s.legacyInitializeMiddleware, s.uiMiddleware, s.tasksMiddleware)
	return s, nil
}

// MCP returns the SDK server, for transports.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Manifest returns the capability manifest this server serves.
func (s *Server) Manifest() manifest.Manifest { return s.manifest }

func (s *Server) observeTool(tool, outcome string) {
	if s.cfg.OnToolCall != nil {
		s.cfg.OnToolCall(tool, outcome)
	}
}

func (s *Server) addManifestResource() {
	body := s.manifest.Bytes()
	s.mcp.AddResource(&mcp.Resource{
		URI:         manifest.ManifestURI,
		Name:        "capability-manifest",
		Title:       "Capability manifest",
		Description: "The server's effective least-authority surface (tools, resources, extensions, limits) with its sha256 digest; every tool receipt names this digest.",
		MIMEType:    "application/json",
		Size:        int64(len(body)),
		Meta:        mcp.Meta{"sha256": s.manifest.SHA256()},
	}, func(ctx context.Context, _ *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		m := s.manifestFor(ctx)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: manifest.ManifestURI, MIMEType: "application/json", Text: string(m.Bytes()),
			Meta: mcp.Meta{"sha256": m.SHA256()},
		}}}, nil
	})
}

// unservedMethods are methods the SDK would answer but this server does not
// serve or advertise; they get -32601 in both eras.
var unservedMethods = map[string]bool{
	"prompts/list":           true,
	"prompts/get":            true,
	"completion/complete":    true,
	"logging/setLevel":       true,
	"resources/subscribe":    true,
	"resources/unsubscribe":  true,
	"subscriptions/listen":   true,
	"sampling/createMessage": true,
	"elicitation/create":     true,
	"roots/list":             true,
}

// resourceMethods are served exactly when resources are. The server has no
// resource templates, but clients that see the resources capability list
// templates too, so resources/templates/list answers an empty list rather
// than -32601.
var resourceMethods = map[string]bool{"resources/list": true, "resources/read": true, "resources/templates/list": true}

// recoverMiddleware turns a panic in any handler into -32603, so one bad
// request cannot take the server down.
func (s *Server) recoverMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("handler panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error; the server logged the details and keeps serving"}
			}
		}()
		res, err = next(ctx, method, req)
		if err == nil && isNilResult(res) && !isNotification(method) {
			// The SDK dereferences results of modern requests; never hand it a nil.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: empty result"}
		}
		return res, err
	}
}

func isNotification(method string) bool { return len(method) > 14 && method[:14] == "notifications/" }

func isNilResult(r mcp.Result) bool {
	if r == nil {
		return true
	}
	v := reflect.ValueOf(r)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func (s *Server) unservedMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if unservedMethods[method] || (!s.cfg.Surface.Resources && resourceMethods[method]) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: %q", method)}
		}
		return next(ctx, method, req)
	}
}

// unknownToolMiddleware gives the SDK's -32602 for a tool this server does
// not offer the names of the tools it does (in the message, for models, and
// in data.availableTools, for programs); the SDK (v1.8.0) names only the
// unknown one, as "unknown tool %q". If the SDK changes that text, the
// error passes through unchanged and TestArgumentErrorsNameTheirFieldAndUnknownToolsListTheTools
// fails, so we learn of it.
func (s *Server) unknownToolMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		var je *jsonrpc.Error
		if method != "tools/call" || !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(je.Message, "unknown tool") {
			return res, err
		}
		name := ""
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil {
			name = p.Name
		}
		return nil, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("unknown tool %s; this server offers: %s", clipQuote(name), strings.Join(s.toolNames, ", ")),
			Data:    errorData(map[string]any{"tool": name, "availableTools": s.toolNames}),
		}
	}
}

// legacyInitializeMiddleware removes the tasks extension from initialize
// results: the extension exists only in the 2026-07-28 era, so legacy
// sessions must not see it advertised.
func (s *Server) legacyInitializeMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "initialize" || err != nil {
			return res, err
		}
		ir, ok := res.(*mcp.InitializeResult)
		if !ok || ir.Capabilities == nil || ir.Capabilities.Extensions == nil {
			return res, err
		}
		cp := *ir
		caps := *ir.Capabilities
		caps.Extensions = maps.Clone(caps.Extensions)
		delete(caps.Extensions, manifest.TasksExtension)
		if len(caps.Extensions) == 0 {
			caps.Extensions = nil
		}
		cp.Capabilities = &caps
		return &cp, nil
	}
}

// requestMeta returns the raw per-request _meta of req, or nil.
func requestMeta(req mcp.Request) map[string]any {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p.GetMeta()
}

// modernRequest reports whether req itself carries the 2026-07-28 protocol
// version in its _meta (never inferred from earlier requests).
func modernRequest(req mcp.Request) bool {
	v, _ := requestMeta(req)[metaProtocolVersion].(string)
	return v == manifest.ModernVersion
}

// declaresExtension reports whether req's own _meta client capabilities
// declare the extension.
func declaresExtension(req mcp.Request, ext string) bool {
	if !modernRequest(req) {
		return false
	}
	caps, ok := requestMeta(req)[metaClientCapabilities].(map[string]any)
	if !ok {
		return false
	}
	exts, ok := caps["extensions"].(map[string]any)
	if !ok {
		return false
	}
	_, ok = exts[ext]
	return ok
}

// errorData marshals v for a jsonrpc.Error's Data.
func errorData(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
