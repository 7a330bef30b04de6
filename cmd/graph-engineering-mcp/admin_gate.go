package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// adminGateCommand is admin approve (approve true) or admin reject: an
// operator's decision on an approval gate. Unlike the other admin
// commands the reason is optional: a yes needs no justification, though
// it is recorded when given.
func adminGateCommand(approve bool) *cli.Command {
	verb, effect := "reject", `Fails the gate with the decision (who, and the reason) as its error and
cancels its unfinished dependents, as a failure does.`
	usage := "reject a gate awaiting approval: it fails and its dependents are cancelled"
	if approve {
		verb, effect = "approve", `Completes the gate with the decision (who, and the reason) as its result:
its dependents become ready, and read the decision as their upstream's result.`
		usage = "approve a gate awaiting approval: it completes and its dependents may run"
	}
	return &cli.Command{
		Name:      verb,
		Usage:     usage,
		UsageText: "graph-engineering-mcp admin " + verb + " TASK_ID [--reason TEXT] [--yes] [--operator NAME] [--json] [--database PATH]",
		Description: effect + `

Only a task of kind "gate" whose dependencies all completed (state blocked,
awaiting approval) can be decided, and only once: a second decision, by
anyone, is refused naming who decided. The decision is recorded in the
gate's history with the operator and the reason. A principal with the
approve role decides over HTTP instead (POST /gates/TASK_ID/` + verb + `);
no model tool can.

Example:
   graph-engineering-mcp admin ` + verb + ` 01JNC3Z6Q9T7M3V4S8X2B5K0RD --reason "release notes reviewed" --yes`,
		Flags: []cli.Flag{
			databaseFlag(),
			&cli.StringFlag{Name: "reason", Aliases: []string{"r"}, Usage: "why, recorded in the history (`TEXT`); optional"},
			&cli.StringFlag{Name: "operator", Usage: "who is deciding, recorded in the history (`NAME`; default: your login name)"},
			yesFlag(),
			jsonFlag(),
		},
		Action: leafAction([]string{"TASK_ID"}, adminGateAction(approve, verb)),
	}
}

// gateResultJSON is the --json output of admin approve and reject.
type gateResultJSON struct {
	Operation string   `json:"operation"`
	Operator  string   `json:"operator"`
	Reason    string   `json:"reason,omitempty"`
	Task      taskJSON `json:"task"`
}

func adminGateAction(approve bool, verb string) func(c *cli.Context, args []string) error {
	return func(c *cli.Context, args []string) error {
		id := args[0]
		name := strings.TrimSpace(c.String("operator"))
		if c.IsSet("operator") && name == "" {
			return usagef("--operator must not be empty; leave it out to use your login name")
		}
		if name == "" {
			name = operatorName()
		}
		reason := strings.TrimSpace(c.String("reason"))
		return withOperatorStore(c, func(ctx context.Context, s *taskgraph.Store) error {
			t, err := s.Task(ctx, id)
			if err != nil {
				return err
			}
			prompt := fmt.Sprintf(`About to %s gate %s (node %s of workflow %s).
  state:    %s
  status:   %s
  operator: %s
  reason:   %s
`, verb, t.TaskID, t.NodeID, t.WorkflowID, stateLabel(t, s.Clock().Now()), truncate(oneLine(t.StatusMessage), 100), name, dash(reason))
			if err := confirm(c, prompt, strings.ToUpper(verb[:1])+verb[1:]+" this gate"); err != nil {
				return err
			}
			after, err := s.DecideGate(ctx, id, taskgraph.GateDecision{Approve: approve, By: name, Via: taskgraph.DecidedByOperator, Reason: reason})
			if err != nil {
				return usageIfInvalid(err)
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, gateResultJSON{Operation: verb, Operator: name, Reason: reason, Task: newTaskJSON(after)})
			}
			past := "rejected"
			if approve {
				past = "approved"
			}
			_, err = fmt.Fprintf(c.App.Writer, "%s gate %s (node %s of workflow %s): %s\nstatus: %s\nrecorded in the history: operator %s, reason %q\n",
				past, after.TaskID, after.NodeID, after.WorkflowID, after.State, oneLine(after.StatusMessage), name, reason)
			return err
		})
	}
}
