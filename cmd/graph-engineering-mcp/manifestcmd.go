package main

import (
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/httpfront"
)

// serverLimits are the transport limits the server adds to the manifest:
// the stdio line bound, and the POST body bound when it serves HTTP.
func serverLimits(http bool) map[string]int64 {
	l := map[string]int64{"maxStdioLineBytes": mcpadapter.MaxStdioLineBytes}
	if http {
		l["maxHttpBodyBytes"] = httpfront.DefaultMaxBodyBytes
	}
	return l
}

func init() {
	registerCommands(func() []*cli.Command {
		return []*cli.Command{{
			Name:  "manifest",
			Usage: "print the capability manifest a server with these flags would serve",
			UsageText: `graph-engineering-mcp manifest [--profile FILE] [--disable-tasks-extension] [--skills DIR] [--http ADDR]

Prints exactly the bytes of the resource graph-engineering://capabilities/manifest,
whose sha256 every tool receipt names. Example:
   graph-engineering-mcp manifest --profile ./workers.json | jq .sha256`,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "profile", Usage: "JSON profile `FILE`", EnvVars: []string{"GRAPH_ENGINEERING_PROFILE"}},
				&cli.BoolFlag{Name: "disable-tasks-extension", Usage: "as for serve", EnvVars: []string{"GRAPH_ENGINEERING_DISABLE_TASKS_EXTENSION"}},
				&cli.StringFlag{Name: "skills", Usage: "skills `DIR`, as for serve", EnvVars: []string{"GRAPH_ENGINEERING_SKILLS"}},
				&cli.StringFlag{Name: "http", Usage: "as for serve: print the manifest of the HTTP server at `ADDR` (it adds maxHttpBodyBytes to the limits)", EnvVars: []string{"GRAPH_ENGINEERING_HTTP"}},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() > 0 {
					return usagef("manifest takes no arguments (got %q)", c.Args().First())
				}
				surface, _, err := surfaceFromFlags(c, newLogger(c.App.ErrWriter, slog.LevelWarn))
				if err != nil {
					return err
				}
				m, err := manifest.Build(surface, serverLimits(c.String("http") != ""))
				if err != nil {
					return err
				}
				_, err = c.App.Writer.Write(append(m.Bytes(), '\n'))
				return err
			},
		}}
	})
}
