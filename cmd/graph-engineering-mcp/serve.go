package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/skills"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// serveFlags are the flags of serve, also accepted by the bare command.
func serveFlags() []cli.Flag {
	return []cli.Flag{
		databaseFlag(),
		&cli.StringFlag{Name: "profile", Usage: "JSON profile `FILE` that narrows the served surface (allowed_tools, resources, tasks_extension, skills)", EnvVars: []string{"GRAPH_ENGINEERING_PROFILE"}},
		&cli.BoolFlag{Name: "disable-tasks-extension", Usage: "do not offer the io.modelcontextprotocol/tasks extension (core-only clients)", EnvVars: []string{"GRAPH_ENGINEERING_DISABLE_TASKS_EXTENSION"}},
		&cli.StringFlag{Name: "skills", Usage: "serve the skills in `DIR` (one folder with a SKILL.md per skill) as resources; refused skills are logged and skipped", EnvVars: []string{"GRAPH_ENGINEERING_SKILLS"}},
		&cli.StringFlag{Name: "sync", Value: "full", Usage: "SQLite synchronous mode: full (an acknowledged write survives power loss) or normal (survives a crash of this process)", EnvVars: []string{"GRAPH_ENGINEERING_SYNC"}},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log level on stderr: debug, info, warn or error", EnvVars: []string{"GRAPH_ENGINEERING_LOG_LEVEL"}},
	}
}

// surfaceFromFlags computes the served surface from the profile, the
// switches and the skills folder; serve and manifest share it, so they agree
// byte for byte on the manifest.
func surfaceFromFlags(c *cli.Context, logger *slog.Logger) (manifest.Surface, *skills.Set, error) {
	opts := manifest.Options{DisableTasksExtension: c.Bool("disable-tasks-extension")}
	if path := c.String("profile"); path != "" {
		p, err := manifest.LoadProfile(path)
		if err != nil {
			return manifest.Surface{}, nil, usagef("--profile %s: %v", path, err)
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
	sync := taskgraph.SyncMode(strings.ToLower(c.String("sync")))
	if sync != taskgraph.SyncFull && sync != taskgraph.SyncNormal {
		return usagef("--sync must be full or normal (got %q)", c.String("sync"))
	}
	logger := newLogger(c.App.ErrWriter, level)
	surface, set, err := surfaceFromFlags(c, logger)
	if err != nil {
		return err
	}
	path, err := databasePath(c)
	if err != nil {
		return err
	}
	store, err := taskgraph.Open(c.Context, path, taskgraph.Options{Sync: sync, Logger: logger, Sweep: true})
	if err != nil {
		return err
	}
	srv, err := mcpadapter.New(mcpadapter.Config{
		Store: store, Version: buildVersion(), Surface: surface, Skills: set, Logger: logger,
		ExtraLimits: serverLimits(),
		CacheTTLMs:  60_000,
	})
	if err != nil {
		store.Close()
		return err
	}
	logger.Info("serving MCP on stdio", "database", path, "version", buildVersion(), "manifest", srv.Manifest().SHA256(), "tools", strings.Join(surface.Tools, ","))
	serveErr := srv.ServeStdio(c.Context, c.App.Reader, c.App.Writer)
	closeErr := store.Close()
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
			Usage: "serve MCP over stdio",
			UsageText: `graph-engineering-mcp serve [--database PATH] [--profile FILE] [--disable-tasks-extension]

Example (a local MCP client starts this command and talks JSON-RPC on its stdin/stdout):
   graph-engineering-mcp serve --database ./tasks.db`,
			Flags:  serveFlags(),
			Action: serveAction,
		}}
	})
}
