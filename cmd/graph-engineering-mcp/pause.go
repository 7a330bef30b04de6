package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// maxDrainWait bounds admin pause --drain.
const maxDrainWait = 24 * time.Hour

func pauseFlags(drain bool) []cli.Flag {
	fs := append(adminFlags(), &cli.BoolFlag{Name: "all", Usage: "pause (or resume) all claiming on the database instead of one workflow"})
	if drain {
		fs = append(fs,
			&cli.BoolFlag{Name: "drain", Usage: "after pausing, wait until no task is claimed there (every live lease ended)"},
			&cli.DurationFlag{Name: "drain-timeout", Value: 30 * time.Minute, Usage: "give up waiting for the drain after this long (`DURATION`, at most 24h); the pause stays"})
	}
	return fs
}

func adminPauseCommand() *cli.Command {
	return &cli.Command{
		Name:      "pause",
		Usage:     "stop claims in a workflow, or all claiming on the database (--all); live leases run on",
		UsageText: "graph-engineering-mcp admin pause (WORKFLOW_ID | --all) --reason TEXT [--drain [--drain-timeout DURATION]] [--yes] [--operator NAME] [--json] [--database PATH]",
		Description: `From the moment this returns, no claim is granted in the workflow (or,
with --all, anywhere on the database), by any server on the database:
claim-next passes over it and answers with a hint naming the pause, and a
claim by id is refused. Leases already granted run on: their heartbeats,
completions and failures are accepted. Pausing what is paused replaces the
reason. Recorded in the audit chain with the operator and the reason.
With --drain it then waits until no task is claimed there, for a deploy.
/readyz says when all claiming is paused.

Example:
   graph-engineering-mcp admin pause --all --reason "deploy 7.3" --drain --yes
   graph-engineering-mcp admin resume --all --reason "deploy 7.3 done" --yes`,
		Flags:  pauseFlags(true),
		Action: pauseAction(adminPauseAction),
	}
}

func adminResumeCommand() *cli.Command {
	return &cli.Command{
		Name:      "resume",
		Usage:     "end the pause of a workflow, or of all claiming (--all)",
		UsageText: "graph-engineering-mcp admin resume (WORKFLOW_ID | --all) --reason TEXT [--yes] [--operator NAME] [--json] [--database PATH]",
		Description: `Ends the pause: its tasks are claimable again at once, and parked
claim-next calls on every server wake. A workflow's own pause outlives the
pause of all claiming. Resuming what is not paused changes nothing (exit 0).
Recorded in the audit chain with the operator and the reason.

Example:
   graph-engineering-mcp admin resume release-42 --reason "INC-7 fixed" --yes`,
		Flags:  pauseFlags(false),
		Action: pauseAction(adminResumeAction),
	}
}

// pauseAction parses the scope of pause and resume: one WORKFLOW_ID, or
// --all and no argument.
func pauseAction(fn func(c *cli.Context, workflowID string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		got, help, err := interspersedArgs(c)
		if err != nil {
			return err
		}
		if help {
			return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
		}
		switch {
		case c.Bool("all") && len(got) == 0:
			return fn(c, "")
		case !c.Bool("all") && len(got) == 1:
			return fn(c, got[0])
		}
		return usagef("%s takes either one WORKFLOW_ID or --all (got %d argument(s): %q, --all %v); see --help", commandPath(c), len(got), got, c.Bool("all"))
	}
}

// pauseJSON is the --json output of admin pause and resume.
type pauseJSON struct {
	Operation  string `json:"operation"`
	Operator   string `json:"operator"`
	Reason     string `json:"reason"`
	WorkflowID string `json:"workflow_id"` // "" for all claiming
	Changed    bool   `json:"changed"`
	Claimed    *int   `json:"claimed,omitempty"` // after --drain: tasks still claimed (0 when drained)
}

func scopeText(workflowID string) string {
	if workflowID == "" {
		return "all claiming on the database"
	}
	return "workflow " + workflowID
}

// claimedIn counts the claimed tasks of workflowID ("" for all).
func claimedIn(ctx context.Context, s *taskgraph.Store, workflowID string) (int, error) {
	if workflowID == "" {
		counts, err := s.CountByState(ctx)
		return counts[taskgraph.StateClaimed], err
	}
	v, err := s.Workflow(ctx, workflowID)
	return v.Counts[taskgraph.StateClaimed], err
}

func adminPauseAction(c *cli.Context, wf string) error {
	op, err := operatorOf(c, "pause")
	if err != nil {
		return err
	}
	drainFor := c.Duration("drain-timeout")
	if c.Bool("drain") && (drainFor <= 0 || drainFor > maxDrainWait) {
		return usagef("--drain-timeout must be between 1ms and %s (got %s)", maxDrainWait, drainFor)
	}
	return withOperatorStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		claimed, err := claimedIn(ctx, s, wf)
		if err != nil {
			return usageIfInvalid(err)
		}
		prompt := fmt.Sprintf(`About to pause %s.
  effect:   no new claim is granted there until resumed; %d live lease(s) run on
  operator: %s
  reason:   %s
`, scopeText(wf), claimed, op.Name, op.Reason)
		if err := confirm(c, prompt, "Pause"); err != nil {
			return err
		}
		replaced, err := s.PauseClaims(ctx, wf, op)
		if err != nil {
			return usageIfInvalid(err)
		}
		out := pauseJSON{Operation: "pause", Operator: op.Name, Reason: op.Reason, WorkflowID: wf, Changed: !replaced}
		if !c.Bool("json") {
			verb := "paused"
			if replaced {
				verb = "was paused already; replaced the reason of"
			}
			fmt.Fprintf(c.App.Writer, "%s %s: no new claims; recorded in the history: operator %s, reason %q\n", verb, scopeText(wf), op.Name, op.Reason)
		}
		if c.Bool("drain") {
			left, err := drain(c, s, wf, drainFor)
			out.Claimed = &left
			if err != nil {
				if c.Bool("json") {
					_ = writeJSON(c.App.Writer, out)
				}
				return err
			}
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, out)
		}
		return nil
	})
}

// drain waits, polling with backoff, until no task of workflowID ("" for
// all) is claimed, or for at most limit; it reports the claimed count on
// stderr when it changes.
func drain(c *cli.Context, s *taskgraph.Store, wf string, limit time.Duration) (int, error) {
	ctx := c.Context
	deadline := time.Now().Add(limit)
	wait, last := 100*time.Millisecond, -1
	for {
		n, err := claimedIn(ctx, s, wf)
		if err != nil {
			return -1, err
		}
		if n != last {
			fmt.Fprintf(c.App.ErrWriter, "draining %s: %d task(s) still claimed\n", scopeText(wf), n)
			last = n
		}
		if n == 0 {
			if !c.Bool("json") {
				fmt.Fprintf(c.App.Writer, "drained %s: no task is claimed\n", scopeText(wf))
			}
			return 0, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("%s is paused but not drained after %s: %d task(s) still claimed; the pause stays (resume with admin resume)", scopeText(wf), limit, n)
		}
		t := time.NewTimer(min(wait, time.Until(deadline)+time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return n, fmt.Errorf("interrupted while draining; %s stays paused: %w", scopeText(wf), ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func adminResumeAction(c *cli.Context, wf string) error {
	op, err := operatorOf(c, "resume")
	if err != nil {
		return err
	}
	return withOperatorStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		ps, err := s.Pauses(ctx, wf)
		if err != nil {
			return usageIfInvalid(err)
		}
		var held *taskgraph.Pause
		for i := range ps {
			if ps[i].WorkflowID == wf {
				held = &ps[i]
			}
		}
		out := pauseJSON{Operation: "resume", Operator: op.Name, Reason: op.Reason, WorkflowID: wf}
		if held == nil {
			if c.Bool("json") {
				return writeJSON(c.App.Writer, out)
			}
			_, err := fmt.Fprintf(c.App.Writer, "%s is not paused; nothing changed\n", scopeText(wf))
			return err
		}
		prompt := fmt.Sprintf(`About to resume %s.
  paused:   %s
  operator: %s
  reason:   %s
`, scopeText(wf), held, op.Name, op.Reason)
		if err := confirm(c, prompt, "Resume"); err != nil {
			return err
		}
		_, ok, err := s.ResumeClaims(ctx, wf, op)
		if err != nil {
			return usageIfInvalid(err)
		}
		out.Changed = ok
		if c.Bool("json") {
			return writeJSON(c.App.Writer, out)
		}
		if !ok {
			_, err := fmt.Fprintf(c.App.Writer, "%s was resumed meanwhile; nothing changed\n", scopeText(wf))
			return err
		}
		_, err = fmt.Fprintf(c.App.Writer, "resumed %s: its tasks are claimable again\nrecorded in the history: operator %s, reason %q\n", scopeText(wf), op.Name, op.Reason)
		return err
	})
}
