package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/skills"
)

func init() {
	registerCommands(func() []*cli.Command {
		return []*cli.Command{{
			Name:      "skills",
			Usage:     "work with the skills folder served to worker agents",
			UsageText: "graph-engineering-mcp skills check DIR",
			Subcommands: []*cli.Command{{
				Name:      "check",
				Usage:     "validate a skills folder offline: per skill, served, private or refused with the reason, and the digests",
				UsageText: "graph-engineering-mcp skills check [--json] DIR",
				Description: `Loads DIR exactly as the server would at start and prints, for every
skill folder, whether it would be served, is private (never served), or is
refused and under which rule, with the sha256 digest and size of every file
an accepted skill serves. Nothing is served and nothing is written.

Exit status: 0 when every skill loads (private skills are fine), 1 when any
skill or entry is refused, 2 on a usage error. CI can gate on it.

Example:
   graph-engineering-mcp skills check ./examples/skills
   graph-engineering-mcp skills check --json ./examples/skills | jq '.entries[] | select(.status == "refused")'`,
				Flags:  []cli.Flag{jsonFlag()},
				Action: skillsCheckAction,
			}},
		}}
	})
}

func skillsCheckAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("skills check takes exactly one argument, the skills folder (got %d); example: graph-engineering-mcp skills check ./skills", c.NArg())
	}
	rep, err := skills.CheckReport(c.Args().First())
	if err != nil {
		return cli.Exit(fmt.Sprintf("skills check: %v", err), exitFailure)
	}
	if c.Bool("json") {
		err = writeJSON(c.App.Writer, rep)
	} else {
		err = writeSkillsReport(c.App.Writer, rep)
	}
	if err != nil {
		return err
	}
	if rep.Refused > 0 {
		return cli.Exit(fmt.Sprintf("skills check: %d refused", rep.Refused), exitFailure)
	}
	return nil
}

// writeSkillsReport prints the report as aligned text, one block per skill.
func writeSkillsReport(w io.Writer, rep *skills.Report) error {
	var b strings.Builder
	for _, e := range rep.Entries {
		switch e.Status {
		case skills.StatusRefused:
			fmt.Fprintf(&b, "refused  %s\n         %s: %s\n", e.Path, e.Rule, e.Detail)
		default:
			label := "served "
			if e.Status == skills.StatusPrivate {
				label = "private"
			}
			fmt.Fprintf(&b, "%s  %s\n", label, e.URI)
			for _, f := range e.Files {
				fmt.Fprintf(&b, "         %s %8d  %s\n", f.Digest, f.Size, f.URI)
			}
		}
	}
	fmt.Fprintf(&b, "%d served, %d private, %d refused in %s\n", rep.Served, rep.Private, rep.Refused, rep.Dir)
	_, err := io.WriteString(w, b.String())
	return err
}
