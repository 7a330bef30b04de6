package mcpadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/watch"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/skills"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// ServerName is the name the server reports in serverInfo.
const ServerName = "graph-engineering"

// Instructions are sent to clients in the initialize and server/discover results.
const Instructions = `graph-engineering coordinates work as durable task graphs (workflows of tasks with dependencies). Use only the advertised graph_task_* tools.
Claims are exclusive and fenced: graph_task_claim returns an owner, a generation and a secret claim_token. Pass the task_id with that owner, generation and claim_token on every graph_task_heartbeat, graph_task_complete, graph_task_fail and graph_task_cancel, and heartbeat before lease_expires_at. A write from a superseded generation or an expired lease is rejected: stop work on that task.
This server grants no human approval, checkpoint, bypass, force, skip or administrative authority; those belong to human operators outside MCP.`

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
	// Local is whom calls that arrive over stdio or another framed transport
	// (ServeStdio, ServeTransport) act for: serve --principal narrows stdio
	// to one principal's roles and scopes. The zero Caller is every role.
	// Requests over HTTP act for the principal the HTTP front authenticated
	// (Inbound).
	Local principal.Caller
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// CacheTTLMs is the ttlMs sent on cacheable results (discover, lists,
	// reads); the surface is fixed for the life of the process.
	CacheTTLMs int
	// OnToolCall, if set, is called once per tool call with the tool name and
	// its outcome (ok, invalid, not_found, conflict, stale_claim, forbidden,
	// unavailable, protocol_error, internal_error, deadline, cancelled), for
	// metrics.
	OnToolCall func(tool, outcome string)
	// Listen tunes subscriptions/listen (tests); the zero value is the
	// defaults.
	Listen ListenOptions
	// Register, if set, is called with the SDK server before it serves, to
	// add further features.
	Register func(*mcp.Server) error
}

// Server is the MCP face of the task store: the SDK server with the tool
// surface registered, the middleware that keeps it to exactly what is
// advertised, and the stdio transport.
type Server struct {
	store *taskgraph.Store
	cfg   Config
	log   *slog.Logger
	mcp   *mcp.Server
	tools *tools.Surface

	inboundMu sync.Mutex
	inbound   map[string]*Inbound // by key, see Admit

	listen *listenHub // subscriptions/listen (listen.go)

	// direct serves 2026-07-28 tools/call without the SDK (direct.go).
	direct direct
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
	surface, err := tools.New(tools.Config{Store: cfg.Store, Surface: cfg.Surface, ExtraLimits: cfg.ExtraLimits, Logger: cfg.Logger, OnToolCall: cfg.OnToolCall})
	if err != nil {
		return nil, err
	}
	s := &Server{store: cfg.Store, cfg: cfg, log: cfg.Logger, tools: surface, inbound: map[string]*Inbound{}}
	s.listen = &listenHub{s: s, opts: cfg.Listen}
	if s.listen.opts.Buffer <= 0 {
		s.listen.opts.Buffer = ListenBuffer
	}
	if s.listen.opts.Poll <= 0 {
		s.listen.opts.Poll = ListenPoll
	}
	s.listen.listeners = watch.New(MaxListeners, s.listen.opts.Poll, cfg.Store.Changed, s.listen.scan)

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
	s.direct.impl = &mcp.Implementation{Name: ServerName, Version: cfg.Version}
	s.mcp = mcp.NewServer(s.direct.impl, &mcp.ServerOptions{
		Instructions: instructions,
		Capabilities: caps,
		Logger:       wire.SDKLogger(cfg.Logger),
		SetCacheable: func(ctx context.Context, _ mcp.Request, c *mcp.Cacheable) {
			if c.TTLMs == 0 {
				c.TTLMs = ttl
			}
			c.CacheScope = "public"
			if callerOf(ctx).Principal != nil {
				// What a principal sees depends on its roles.
				c.CacheScope = "private"
			}
		},
	})
	for _, t := range surface.Tools() {
		name := t.Name
		if err := precompileSchemas(t); err != nil {
			return nil, err
		}
		s.mcp.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args json.RawMessage
			if req.Params != nil {
				args = req.Params.Arguments
			}
			return s.tools.Call(ctx, callerOf(ctx), name, args)
		})
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
	// Outermost first: recover from panics, find whom and when the request
	// is for, refuse unserved methods, name the tools offered to an unknown
	// one, narrow what a principal sees, hide the tasks extension from
	// legacy sessions, advertise the MCP App, then the tasks extension.
	middleware := []mcp.Middleware{s.recoverMiddleware, s.inboundMiddleware, s.unservedMiddleware, s.unknownToolMiddleware,
		s.principalMiddleware, s.legacyInitializeMiddleware, s.uiMiddleware, s.tasksMiddleware}
	s.mcp.AddReceivingMiddleware(middleware...)
	s.initDirect(middleware, cfg.Register == nil)
	return s, nil
}

// MCP returns the SDK server, for transports.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Manifest returns the capability manifest this server serves.
func (s *Server) Manifest() manifest.Manifest { return s.tools.Manifest() }

// Store returns the task store the server serves.
func (s *Server) Store() *taskgraph.Store { return s.store }

// Logger returns the server's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// Version returns the version the server reports in serverInfo.
func (s *Server) Version() string { return s.cfg.Version }

// ArgumentError returns the tool error of a tools/call whose arguments the
// validator refuses, and false when they are valid or the tool is not
// offered (see tools.Surface.ArgumentError).
func (s *Server) ArgumentError(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, bool) {
	return s.tools.ArgumentError(ctx, tool, args)
}

func (s *Server) addManifestResource() {
	body := s.tools.Manifest().Bytes()
	s.mcp.AddResource(&mcp.Resource{
		URI:         manifest.ManifestURI,
		Name:        "capability-manifest",
		Title:       "Capability manifest",
		Description: "The server's effective least-authority surface (tools, resources, extensions, limits) with its sha256 digest; every tool receipt names this digest.",
		MIMEType:    "application/json",
		Size:        int64(len(body)),
		Meta:        mcp.Meta{"sha256": s.tools.Manifest().SHA256()},
	}, func(ctx context.Context, _ *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		_, m := s.tools.For(callerOf(ctx).Principal)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: manifest.ManifestURI, MIMEType: "application/json", Text: string(m.Bytes()),
			Meta: mcp.Meta{"sha256": m.SHA256()},
		}}}, nil
	})
}

// addTasksExtension registers the Tasks extension's methods; which requests
// may call them is tasksMiddleware's.
func (s *Server) addTasksExtension() error {
	for _, err := range []error{
		mcp.AddReceivingCustomMethod(s.mcp, tools.MethodTasksGet, func(ctx context.Context, _ *mcp.ServerSession, p *tools.TaskIDParams) (*tools.TaskResult, error) {
			if p == nil {
				p = &tools.TaskIDParams{}
			}
			return s.tools.TaskGet(ctx, callerOf(ctx), p.TaskID)
		}),
		mcp.AddReceivingCustomMethod(s.mcp, tools.MethodTasksUpdate, func(ctx context.Context, _ *mcp.ServerSession, p *tools.UpdateParams) (*tools.AckResult, error) {
			return s.tools.TaskUpdate(ctx, callerOf(ctx), p)
		}),
		mcp.AddReceivingCustomMethod(s.mcp, tools.MethodTasksCancel, func(ctx context.Context, _ *mcp.ServerSession, p *tools.TaskIDParams) (*tools.AckResult, error) {
			if p == nil {
				p = &tools.TaskIDParams{}
			}
			return s.tools.TaskCancel(ctx, callerOf(ctx), p.TaskID)
		}),
	} {
		if err != nil {
			return fmt.Errorf("register tasks extension: %w", err)
		}
	}
	return nil
}

// QuietSDKLogs wraps h so that the SDK's per-request and client-mistake
// messages are logged at Debug instead of Info or Error (see package wire);
// everything else passes through unchanged.
func QuietSDKLogs(h slog.Handler) slog.Handler { return wire.QuietSDKLogs(h) }

// precompileSchemas replaces t's input and output schemas (maps) by their
// JSON text, the same bytes encoding/json writes for the maps (keys
// sorted; HTML characters are escaped, or not, by whoever embeds them, as
// for the maps). The SDK marshals a tool's input schema on every
// 2026-07-28 tools/call (it looks for x-mcp-header annotations) and every
// schema on each tools/list: marshalling a map of maps sorts and reflects
// each time, while JSON text is only copied.
func precompileSchemas(t *mcp.Tool) error {
	for _, schema := range []*any{&t.InputSchema, &t.OutputSchema} {
		if *schema == nil {
			continue
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(*schema); err != nil {
			return fmt.Errorf("tool %s: schema: %w", t.Name, err)
		}
		*schema = json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n"))
	}
	return nil
}
