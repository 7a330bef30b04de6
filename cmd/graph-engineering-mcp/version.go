package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func init() {
	registerCommands(func() []*cli.Command {
		return []*cli.Command{{
			Name:      "version",
			Usage:     "print the version",
			UsageText: "graph-engineering-mcp version",
			Action: func(c *cli.Context) error {
				_, err := fmt.Fprintf(c.App.Writer, "graph-engineering-mcp %s\n", buildVersion())
				return err
			},
		}}
	})
}
