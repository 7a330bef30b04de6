package main

import (
	"github.com/urfave/cli/v2"
)

// serveFlags are the flags of serve, also accepted by the bare command.
func serveFlags() []cli.Flag {
	return []cli.Flag{databaseFlag()}
}

func serveAction(c *cli.Context) error {
	return usagef("serve is not implemented yet")
}

func init() {
	registerCommands(func() []*cli.Command {
		return []*cli.Command{{
			Name:   "serve",
			Usage:  "serve MCP over stdio (or Streamable HTTP with --http)",
			Flags:  serveFlags(),
			Action: serveAction,
		}}
	})
}
