package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:        "audit",
		Usage:       "check the tamper-evident event history",
		Description: `Every transition is recorded in a per-workflow hash chain of events.`,
		Subcommands: []*cli.Command{auditVerifyCommand()},
		Action:      groupAction,
	}
}

func auditVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "verify every workflow's event hash chain",
		UsageText: "graph-engineering-mcp audit verify [--json] [--database PATH]",
		Description: `Recomputes each workflow's hash chain from the stored events: every event's
hash from its content and the previous hash, sequence numbers without gaps,
and the chain head the workflow records. It reads one consistent snapshot,
so it is safe while a server writes.

Exits 0 and prints how many workflows and events verified when all is well;
exits 1 naming the first broken link (workflow, sequence number, event id and
what is wrong) when an event was edited, removed or inserted behind the
store's back.

Example:
   graph-engineering-mcp audit verify`,
		Flags:  []cli.Flag{databaseFlag(), jsonFlag()},
		Action: leafAction(nil, auditVerifyAction),
	}
}

// verifyJSON is the --json output of audit verify.
type verifyJSON struct {
	OK        bool        `json:"ok"`
	Workflows int         `json:"workflows"`
	Events    int64       `json:"events"`
	Broken    *brokenJSON `json:"broken,omitempty"`
}

// brokenJSON is the first link of the history that does not verify.
type brokenJSON struct {
	WorkflowID string `json:"workflow_id"`
	Seq        int64  `json:"seq"`
	EventID    int64  `json:"event_id"`
	Reason     string `json:"reason"`
}

func auditVerifyAction(c *cli.Context, _ []string) error {
	return withReadOnlyStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		rep, err := s.VerifyHistory(ctx)
		if err != nil && !errors.Is(err, taskgraph.ErrBrokenChain) {
			return fmt.Errorf("verify history: %w", err)
		}
		if rep.Broken == nil && err != nil {
			return fmt.Errorf("verify history: %w", err)
		}
		if c.Bool("json") {
			out := verifyJSON{OK: rep.Broken == nil, Workflows: rep.Workflows, Events: rep.Events}
			if b := rep.Broken; b != nil {
				out.Broken = &brokenJSON{WorkflowID: b.WorkflowID, Seq: b.Seq, EventID: b.EventID, Reason: b.Reason}
			}
			if err := writeJSON(c.App.Writer, out); err != nil {
				return err
			}
		}
		if b := rep.Broken; b != nil {
			where := fmt.Sprintf("workflow %s, event seq %d (event id %d)", b.WorkflowID, b.Seq, b.EventID)
			if b.Seq == 0 {
				where = fmt.Sprintf("workflow %s, chain head", b.WorkflowID)
			}
			return fmt.Errorf("%w: first broken link at %s: %s", taskgraph.ErrBrokenChain, where, b.Reason)
		}
		if c.Bool("json") {
			return nil
		}
		_, err = fmt.Fprintf(c.App.Writer, "history verified: %d workflow(s), %d event(s), every hash chain intact\n", rep.Workflows, rep.Events)
		return err
	})
}

func init() {
	registerCommands(func() []*cli.Command { return []*cli.Command{auditCommand()} })
}
