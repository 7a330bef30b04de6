package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/httpfront"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/skills"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

// serveFlags are the flags of serve, also accepted by the bare command.
func serveFlags() []cli.Flag {
	return append([]cli.Flag{
		databaseFlag(),
		&cli.StringFlag{Name: "profile", Usage: "JSON profile `FILE` that narrows the served surface (allowed_tools, resources, tasks_extension, skills)", EnvVars: []string{"GRAPH_ENGINEERING_PROFILE"}},
		&cli.BoolFlag{Name: "disable-tasks-extension", Usage: "do not offer the io.modelcontextprotocol/tasks extension (core-only clients)", EnvVars: []string{"GRAPH_ENGINEERING_DISABLE_TASKS_EXTENSION"}},
		&cli.StringFlag{Name: "skills", Usage: "serve the skills in `DIR` (one folder with a SKILL.md per skill) as resources; refused skills are logged and skipped", EnvVars: []string{"GRAPH_ENGINEERING_SKILLS"}},
		&cli.StringFlag{Name: "sync", Value: "full", Usage: "SQLite synchronous `MODE`: full (an acknowledged write survives power loss) or normal (survives a crash of this process)", EnvVars: []string{"GRAPH_ENGINEERING_SYNC"}},
		&cli.StringFlag{Name: "audit-anchor", Usage: "append the database-wide audit head (time, event count, hash) and the heads of the workflows changed to `FILE` every few seconds and at shutdown, for audit verify --anchor FILE", EnvVars: []string{"GRAPH_ENGINEERING_AUDIT_ANCHOR"}},
		&cli.IntFlag{Name: "max-lease-losses", Value: taskgraph.DefaultMaxLeaseLosses, Usage: fmt.Sprintf("fail a task as poison once its lease was lost `N` times (its workers stopped heartbeating) while it had attempts left, instead of claiming it again; reclaims from the second loss on wait the task's retry backoff (1..%d; give every replica the same)", taskgraph.MaxMaxLeaseLosses), EnvVars: []string{"GRAPH_ENGINEERING_MAX_LEASE_LOSSES"}},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log `LEVEL` on stderr: debug, info, warn or error", EnvVars: []string{"GRAPH_ENGINEERING_LOG_LEVEL"}},
	}, append(pgPoolFlags(), httpFlags()...)...)
}

// maxLeaseLosses reads --max-lease-losses; out of bounds is a usage error.
func maxLeaseLosses(c *cli.Context) (int, error) {
	n := c.Int("max-lease-losses")
	if n < 1 || n > taskgraph.MaxMaxLeaseLosses {
		return 0, usagef("--max-lease-losses must be between 1 and %d (got %d)", taskgraph.MaxMaxLeaseLosses, n)
	}
	return n, nil
}

// surfaceFromFlags computes the served surface from the profile, the
// switches and the skills folder; serve and manifest share it, so they agree
// byte for byte on the manifest.
func surfaceFromFlags(c *cli.Context, logger *slog.Logger) (manifest.Surface, *skills.Set, error) {
	opts := manifest.Options{DisableTasksExtension: c.Bool("disable-tasks-extension")}
	if path := c.String("profile"); path != "" {
		p, err := manifest.LoadProfile(path)
		if err != nil {
			return manifest.Surface{}, nil, usagef("--profile: %v", err) // err names the path
		}
		opts.Profile = &p
	}
	var set *skills.Set
	if dir := c.String("skills"); dir != "" {
		var err error
		if set, _, err = skills.Load(dir, logger); err != nil {
			return manifest.Surface{}, nil, usagef("--skills %s: %v", dir, err)
		}
		opts.SkillsLoaded, opts.SkillURIs = true, set.URIs()
	}
	s := manifest.NewSurface(opts)
	if !s.SkillsExtension {
		set = nil
	}
	return s, set, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, usagef("--log-level must be debug, info, warn or error (got %q)", s)
	}
	return l, nil
}

func serveAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("unexpected argument %q; see --help", c.Args().First())
	}
	level, err := parseLevel(c.String("log-level"))
	if err != nil {
		return err
	}
	sync := tgsqlite.SyncMode(strings.ToLower(c.String("sync")))
	if sync != tgsqlite.SyncFull && sync != tgsqlite.SyncNormal {
		return usagef("--sync must be full or normal (got %q)", c.String("sync"))
	}
	logger := newLogger(c.App.ErrWriter, level)
	logger.Debug("garbage collector", "gc_percent", tuneGC())
	surface, set, err := surfaceFromFlags(c, logger)
	if err != nil {
		return err
	}
	path, err := serveDatabasePath(c)
	if err != nil {
		return err
	}
	if c.String("http") != "" {
		if c.String("principal") != "" {
			return usagef("--principal applies to stdio; over --http each request's token names its principal")
		}
		return serveHTTP(c, logger, surface, set, path, sync)
	}
	var local principal.Caller
	if name := c.String("principal"); name != "" || c.String("auth-file") != "" {
		if name == "" || c.String("auth-file") == "" {
			return usagef("on stdio, --principal NAME and --auth-file FILE go together")
		}
		ps, err := principal.LoadAuthFile(c.String("auth-file"))
		if err != nil {
			return usagef("--auth-file: %v", err)
		}
		if local, err = principal.NewAuthenticator(ps).Caller(name); err != nil {
			return usagef("--principal: %v", err)
		}
	}
	logIfNewDatabase(logger, path)
	losses, err := maxLeaseLosses(c)
	if err != nil {
		return err
	}
	store, err := openServeStore(c, path, taskgraph.Options{Logger: logger, Sweep: true, MaxLeaseLosses: losses}, tgsqlite.Options{Sync: sync})
	if err != nil {
		return err
	}
	srv, err := mcpadapter.New(mcpadapter.Config{
		Store: store, Version: buildVersion(), Surface: surface, Skills: set, Logger: logger,
		ExtraLimits: serverLimits(false),
		CacheTTLMs:  60_000,
		Local:       local,
	})
	if err != nil {
		store.Close()
		return err
	}
	stopAnchor, err := startAnchor(c.Context, store, c.String("audit-anchor"), logger)
	if err != nil {
		store.Close()
		return err
	}
	logger.Info("serving MCP on stdio", "database", redactDatabase(path), "version", buildVersion(), "manifest", srv.Manifest().SHA256(), "tools", strings.Join(surface.Tools, ","))
	// A client that closes its end of stdout makes writes fail with EPIPE
	// (a gone client, handled as end of input) instead of killing the
	// process with SIGPIPE before the database is closed.
	signal.Ignore(syscall.SIGPIPE)
	// On SIGINT or SIGTERM parked claim-next calls answer claimed: false at
	// once rather than hold the shutdown for its whole bound.
	stopDrain := context.AfterFunc(c.Context, store.Drain)
	defer stopDrain()
	serveErr := srv.ServeStdio(c.Context, c.App.Reader, c.App.Writer)
	anchorErr := stopAnchor()
	closeErr := errors.Join(anchorErr, store.Close())
	if errors.Is(serveErr, mcpadapter.ErrStdoutClosed) {
		logger.Info("the client closed stdout (broken pipe): stopped serving as at end of input")
		serveErr = nil
	}
	if serveErr != nil {
		return fmt.Errorf("serve stdio: %w", serveErr)
	}
	if closeErr != nil {
		return fmt.Errorf("close database: %w", closeErr)
	}
	logger.Info("stdin closed; database closed cleanly")
	return nil
}

func init() {
	registerCommands(func() []*cli.Command {
		return []*cli.Command{{
			Name:  "serve",
			Usage: "serve MCP over stdio, or over Streamable HTTP with --http",
			UsageText: `graph-engineering-mcp serve [--database PATH] [--profile FILE] [--disable-tasks-extension] [--principal NAME --auth-file FILE]
graph-engineering-mcp serve --http ADDR [--auth-token-file FILE | --auth-file FILE] [--allow-origin ORIGIN]... [limits]

Example (a local MCP client starts this command and talks JSON-RPC on its stdin/stdout):
   graph-engineering-mcp serve --database ./tasks.db

Example (MCP at http://127.0.0.1:7330/mcp, /healthz, /readyz and /metrics beside it):
   graph-engineering-mcp serve --database ./tasks.db --http 127.0.0.1:7330

A non-loopback address is refused unless a token is set:
   GRAPH_ENGINEERING_AUTH_TOKEN_FILE=/run/secrets/mcp-token graph-engineering-mcp serve --http 0.0.0.0:7330`,
			Flags:  serveFlags(),
			Action: serveAction,
		}}
	})
}

// httpFlags are the flags of the Streamable HTTP transport (serve --http).
func httpFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "http", Usage: "serve MCP over Streamable HTTP at http://`ADDR`/mcp instead of stdio; ADDR is HOST:PORT, HOST defaults to 127.0.0.1 and PORT to 7330 (e.g. 127.0.0.1:7330 or :7330); a non-loopback HOST needs an auth token (default: stdio)", EnvVars: []string{"GRAPH_ENGINEERING_HTTP"}},
		&cli.StringFlag{Name: "auth-token", Usage: "with --http: bearer `TOKEN` (at least 16 visible ASCII characters) every request except /healthz and /readyz must send as Authorization: Bearer TOKEN; prefer the environment variable or --auth-token-file, since arguments are visible to other local users", EnvVars: []string{"GRAPH_ENGINEERING_AUTH_TOKEN"}, DefaultText: "none: no authentication, loopback only"},
		&cli.StringFlag{Name: "auth-token-file", Usage: "with --http: read the bearer token from `FILE` (surrounding whitespace is ignored)", EnvVars: []string{"GRAPH_ENGINEERING_AUTH_TOKEN_FILE"}},
		&cli.StringFlag{Name: "principal", Usage: "on stdio: serve as the principal `NAME` of --auth-file, with only its roles and scopes (default: the local user, every role)", EnvVars: []string{"GRAPH_ENGINEERING_PRINCIPAL"}},
		&cli.StringFlag{Name: "auth-file", Usage: "with --http: authenticate named principals with roles (submit, work, observe) and scopes from the JSON `FILE` (see MCP.md, and auth add); SIGHUP reloads it; instead of an auth token", EnvVars: []string{"GRAPH_ENGINEERING_AUTH_FILE"}},
		&cli.StringSliceFlag{Name: "allow-origin", Usage: "with --http: also accept requests from this browser `ORIGIN` (scheme://host[:port]; repeatable, or comma-separated in the environment variable); requests with any other cross-origin Origin header get 403 (default: same-origin only)", EnvVars: []string{"GRAPH_ENGINEERING_ALLOW_ORIGIN"}},
		&cli.IntFlag{Name: "max-concurrent", Value: httpfront.DefaultMaxConcurrent, Usage: "with --http: serve at most `N` short MCP requests at once (claims waiting for work with wait_ms are not counted); more wait up to --admission-wait, then get 503 with Retry-After; heartbeat, complete, fail and cancel wait ahead of them, up to --call-timeout", EnvVars: []string{"GRAPH_ENGINEERING_MAX_CONCURRENT"}},
		&cli.DurationFlag{Name: "admission-wait", Value: httpfront.DefaultAdmissionWait, Usage: "with --http: `DURATION` a short request waits for one of the --max-concurrent slots before it gets 503 (0s: refuse at once; at most --call-timeout); holder writes (heartbeat, complete, fail, cancel) are never refused for a slot", EnvVars: []string{"GRAPH_ENGINEERING_ADMISSION_WAIT"}},
		&cli.IntFlag{Name: "max-connections", Value: httpfront.DefaultMaxConnections, Usage: "with --http: keep at most `N` TCP connections open; at the cap a new connection closes the oldest one that never carried an authorized request, else it waits (each costs a file descriptor: keep N below the open-files limit)", EnvVars: []string{"GRAPH_ENGINEERING_MAX_CONNECTIONS"}},
		&cli.DurationFlag{Name: "call-timeout", Value: httpfront.DefaultCallTimeout, Usage: "with --http: `DURATION` an MCP call may take; must exceed the longest claim wait (30s)", EnvVars: []string{"GRAPH_ENGINEERING_CALL_TIMEOUT"}},
		&cli.DurationFlag{Name: "session-idle-timeout", Value: httpfront.DefaultSessionIdleTimeout, Usage: "with --http: end a legacy (initialize) session after `DURATION` without a request", EnvVars: []string{"GRAPH_ENGINEERING_SESSION_IDLE_TIMEOUT"}},
		&cli.BoolFlag{Name: "disable-ui", Usage: "with --http: do not serve the read-only live workflow view at /ui/ (see ui link)", EnvVars: []string{"GRAPH_ENGINEERING_DISABLE_UI"}},
		&cli.IntFlag{Name: "max-sessions", Value: httpfront.DefaultMaxSessions, Usage: "with --http: keep at most `N` legacy (initialize) sessions; at the cap initialize closes the oldest session that never got past initialize, else the longest idle one, and gets 503 only when every session has a request in progress", EnvVars: []string{"GRAPH_ENGINEERING_MAX_SESSIONS"}},
	}
}

// httpConfig is the validated HTTP configuration of serve.
type httpConfig struct {
	addr string
	// authFile is --auth-file, "" without one.
	authFile string
	opts     httpfront.Options
}

// httpConfigFromFlags validates the HTTP flags; every mistake is a usage
// error (exit code 2). Errors never contain the token.
func httpConfigFromFlags(c *cli.Context) (httpConfig, error) {
	addr, err := listenAddr(c.String("http"))
	if err != nil {
		return httpConfig{}, err
	}
	token := c.String("auth-token")
	if file := c.String("auth-token-file"); file != "" {
		if token != "" {
			return httpConfig{}, usagef("set the auth token once: --auth-token (GRAPH_ENGINEERING_AUTH_TOKEN) and --auth-token-file (GRAPH_ENGINEERING_AUTH_TOKEN_FILE) are both set")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return httpConfig{}, usagef("--auth-token-file: %v", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return httpConfig{}, usagef("--auth-token-file %s is empty", file)
		}
	}
	if token != "" {
		if err := httpfront.ValidateAuthToken(token); err != nil {
			return httpConfig{}, usagef("auth token: %v", err)
		}
	}
	authFile := c.String("auth-file")
	var principals *principal.Authenticator
	if authFile != "" {
		if token != "" {
			return httpConfig{}, usagef("set one of --auth-file (GRAPH_ENGINEERING_AUTH_FILE) and an auth token (--auth-token, --auth-token-file or their environment variables), not both")
		}
		ps, err := principal.LoadAuthFile(authFile)
		if err != nil {
			return httpConfig{}, usagef("--auth-file: %v", err)
		}
		principals = principal.NewAuthenticator(ps)
	}
	if token == "" && principals == nil && !httpfront.IsLoopbackAddr(addr) {
		return httpConfig{}, usagef("refusing to serve HTTP on %s without an auth token: a non-loopback address exposes the task graph to the network; set GRAPH_ENGINEERING_AUTH_TOKEN or --auth-token-file, or bind a loopback address such as %s", addr, httpfront.DefaultHTTPAddr)
	}
	var origins []string
	for _, o := range c.StringSlice("allow-origin") {
		for _, part := range strings.Split(o, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			n, err := httpfront.NormalizeOrigin(part)
			if err != nil {
				return httpConfig{}, usagef("--allow-origin: %v", err)
			}
			origins = append(origins, n)
		}
	}
	positive := func(name string) (int, error) {
		n := c.Int(name)
		if n < 1 {
			return 0, usagef("--%s must be at least 1 (got %d)", name, n)
		}
		return n, nil
	}
	cfg := httpConfig{addr: addr, authFile: authFile, opts: httpfront.Options{AuthToken: token, Principals: principals, AllowedOrigins: origins, DisableUI: c.Bool("disable-ui")}}
	if cfg.opts.MaxConcurrent, err = positive("max-concurrent"); err != nil {
		return httpConfig{}, err
	}
	if cfg.opts.MaxConnections, err = positive("max-connections"); err != nil {
		return httpConfig{}, err
	}
	if cfg.opts.MaxSessions, err = positive("max-sessions"); err != nil {
		return httpConfig{}, err
	}
	if cfg.opts.CallTimeout = c.Duration("call-timeout"); cfg.opts.CallTimeout <= taskgraph.MaxClaimWait {
		return httpConfig{}, usagef("--call-timeout must exceed the longest claim wait of %s (got %s)", taskgraph.MaxClaimWait, cfg.opts.CallTimeout)
	}
	switch cfg.opts.AdmissionWait = c.Duration("admission-wait"); {
	case cfg.opts.AdmissionWait < 0 || cfg.opts.AdmissionWait > cfg.opts.CallTimeout:
		return httpConfig{}, usagef("--admission-wait must be between 0s and --call-timeout %s (got %s)", cfg.opts.CallTimeout, cfg.opts.AdmissionWait)
	case cfg.opts.AdmissionWait == 0:
		cfg.opts.AdmissionWait = -1 // refuse at once; httpfront.Options takes 0 for the default
	}
	if cfg.opts.SessionIdleTimeout = c.Duration("session-idle-timeout"); cfg.opts.SessionIdleTimeout <= 0 {
		return httpConfig{}, usagef("--session-idle-timeout must be positive (got %s)", cfg.opts.SessionIdleTimeout)
	}
	return cfg, nil
}

// listenAddr resolves --http ADDR to HOST:PORT, defaulting HOST to
// 127.0.0.1 and PORT to 7330. "localhost" becomes 127.0.0.1, so the server
// never binds whatever else the name resolves to.
func listenAddr(s string) (string, error) {
	defHost, defPort, _ := net.SplitHostPort(httpfront.DefaultHTTPAddr)
	s = strings.TrimSpace(s)
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a bare host name or IP (IPv6 with or without brackets).
		bare := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if ip := net.ParseIP(bare); ip != nil || !strings.ContainsAny(s, ":[]") {
			host, port = bare, defPort
		} else {
			return "", usagef("--http %q: want HOST:PORT, for example %s", s, httpfront.DefaultHTTPAddr)
		}
	}
	if host == "" {
		host = defHost
	}
	if strings.EqualFold(host, "localhost") {
		host = defHost
	}
	if port == "" {
		port = defPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", usagef("--http %q: port must be a number from 0 to 65535", s)
	}
	return net.JoinHostPort(host, port), nil
}

// serveHTTP serves MCP over Streamable HTTP until the context is cancelled
// (SIGINT or SIGTERM), then drains in-flight calls (at most 10 s), closes
// the database (checkpointing the WAL) and returns nil.
func serveHTTP(c *cli.Context, logger *slog.Logger, surface manifest.Surface, set *skills.Set, path string, sync tgsqlite.SyncMode) error {
	cfg, err := httpConfigFromFlags(c)
	if err != nil {
		return err
	}
	losses, err := maxLeaseLosses(c)
	if err != nil {
		return err
	}
	metrics := httpfront.NewMetrics(logger)
	logIfNewDatabase(logger, path)
	store, err := openServeStore(c, path, taskgraph.Options{Logger: logger, Sweep: true, OnBatch: metrics.ObserveBatch, MaxLeaseLosses: losses}, tgsqlite.Options{Sync: sync})
	if err != nil {
		return err
	}
	stopAnchor, err := startAnchor(c.Context, store, c.String("audit-anchor"), logger)
	if err != nil {
		store.Close()
		return err
	}
	closeStore := func(serveErr error) error {
		if cerr := errors.Join(stopAnchor(), store.Close()); cerr != nil {
			return errors.Join(serveErr, fmt.Errorf("close database: %w", cerr))
		}
		return serveErr
	}
	if err := metrics.RegisterStore(store); err != nil {
		return closeStore(err)
	}
	srv, err := mcpadapter.New(mcpadapter.Config{
		// Every stateless HTTP request is a short-lived SDK session; its
		// lifecycle messages go to debug, or they would drown the log.
		Store: store, Version: buildVersion(), Surface: surface, Skills: set, Logger: slog.New(mcpadapter.QuietSDKLogs(logger.Handler())),
		ExtraLimits: serverLimits(true),
		CacheTTLMs:  60_000,
		OnToolCall:  metrics.ObserveToolCall,
	})
	if err != nil {
		return closeStore(err)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return closeStore(fmt.Errorf("listen on %s: %w", cfg.addr, err))
	}
	cfg.opts.Metrics, cfg.opts.Logger = metrics, logger
	logger.Info("serving MCP over Streamable HTTP",
		"addr", ln.Addr().String(), "endpoint", "http://"+ln.Addr().String()+httpfront.MCPPath,
		"auth", authMode(cfg), "database", redactDatabase(path), "version", buildVersion(),
		"manifest", srv.Manifest().SHA256(), "tools", strings.Join(surface.Tools, ","))
	if !cfg.opts.DisableUI {
		logger.Info("serving the live workflow view", "url", "http://"+ln.Addr().String()+liveview.UIPath,
			"login", uiLoginHint(cfg, ln.Addr().String()))
	}
	if cfg.opts.Principals != nil {
		stop := reloadOnSIGHUP(logger, cfg.authFile, cfg.opts.Principals)
		defer stop()
	}
	serveErr := httpfront.Serve(c.Context, ln, srv, cfg.opts)
	if err := closeStore(serveErr); err != nil {
		return err
	}
	logger.Info("HTTP server stopped; database closed cleanly")
	return nil
}
