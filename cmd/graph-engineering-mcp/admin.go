package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// errNotConfirmed is returned when the operator does not confirm a change.
var errNotConfirmed = errors.New("aborted, nothing changed")

func yesFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask for confirmation"}
}

func adminFlags() []cli.Flag {
	return []cli.Flag{
		databaseFlag(),
		&cli.StringFlag{Name: "reason", Aliases: []string{"r"}, Usage: "why you are doing this, recorded in the history (`TEXT`); required"},
		&cli.StringFlag{Name: "operator", Usage: "who is acting, recorded in the history (`NAME`; default: your login name)"},
		yesFlag(),
		jsonFlag(),
	}
}

func adminCommand() *cli.Command {
	return &cli.Command{
		Name:  "admin",
		Usage: "operator interventions: requeue, skip, abort a workflow, pause and resume claiming, limit a concurrency key, approve or reject a gate",
		Description: `Changes that only a human may make; the model tools cannot. Each one asks for
confirmation on stdin unless --yes is given (only y or yes proceeds; anything
else exits 1 and changes nothing), requires --reason, and is recorded in the
task's history with the reason and the operator (--operator, default your
login name). Safe while a server runs on the same database: the change is one
short transaction, and the store re-checks the task's state when it writes,
so a change made between the prompt and the answer is never overwritten
blindly.`,
		Subcommands: []*cli.Command{adminRequeueCommand(), adminSkipCommand(), adminAbortCommand(), adminPauseCommand(), adminResumeCommand(), adminLimitCommand(),
			adminGateCommand(true), adminGateCommand(false)},
		Action: groupAction,
	}
}

func adminRequeueCommand() *cli.Command {
	return &cli.Command{
		Name:  "requeue",
		Usage: "put a failed, cancelled, claimed or pending task back to pending with fresh attempts; or every failed task of a workflow",
		UsageText: `graph-engineering-mcp admin requeue TASK_ID --reason TEXT [--yes] [--operator NAME] [--json] [--database PATH]
   graph-engineering-mcp admin requeue --workflow WORKFLOW_ID --failed [--dry-run] [--reason TEXT] [--yes] [--operator NAME] [--json] [--database PATH]`,
		Description: `Puts the task back to pending (or blocked, if a dependency has not
completed), resets its attempts to 0 and fences out any holder: the holder's
next heartbeat or completion is rejected. Dependents that were cancelled
because this task failed or was cancelled are revived.

A completed task cannot be requeued (its dependents may already have used
its result), nor a blocked one (it has not run; act on its dependencies).

With --workflow and --failed instead of TASK_ID it requeues every failed
task of the workflow (a dead-letter replay), each as above and each recorded
in its history with the operator and reason, in transactions of at most 100
tasks. A task the rules above refuse is left failed and listed with the
reason. --dry-run lists what it would do (task id, node, failure cause,
outcome) and writes nothing; it needs no --reason and asks nothing.

Examples:
   graph-engineering-mcp admin requeue 01JNC3Z6Q9T7M3V4S8X2B5K0RD --reason "flaky runner, fixed"
   graph-engineering-mcp admin requeue --workflow release-42 --failed --dry-run
   graph-engineering-mcp admin requeue --workflow release-42 --failed --reason "provider outage over" --yes`,
		Flags: append(adminFlags(),
			&cli.StringFlag{Name: "workflow", Aliases: []string{"w"}, Usage: "with --failed: requeue the failed tasks of this workflow (`WORKFLOW_ID`) instead of one task"},
			&cli.BoolFlag{Name: "failed", Usage: "with --workflow: requeue every failed task of the workflow"},
			&cli.BoolFlag{Name: "dry-run", Usage: "with --workflow --failed: list what would be requeued or refused, and write nothing"},
		),
		Action: adminRequeueAction,
	}
}

// adminRequeueAction runs admin requeue in its two forms: TASK_ID, or
// --workflow with --failed.
func adminRequeueAction(c *cli.Context) error {
	got, help, err := interspersedArgs(c)
	if err != nil {
		return err
	}
	if help {
		return cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name)
	}
	bulk := c.IsSet("workflow") || c.Bool("failed") || c.Bool("dry-run")
	if !bulk {
		if len(got) != 1 {
			return usagef("%s takes TASK_ID, or --workflow WORKFLOW_ID --failed (got %d arguments: %q); see --help", commandPath(c), len(got), got)
		}
		return adminTaskAction(requeueOp)(c, got)
	}
	switch {
	case len(got) > 0:
		return usagef("%s takes either TASK_ID or --workflow WORKFLOW_ID --failed, not both (got %q); see --help", commandPath(c), got)
	case !c.IsSet("workflow") || strings.TrimSpace(c.String("workflow")) == "":
		return usagef("--failed and --dry-run need --workflow WORKFLOW_ID: the workflow whose failed tasks to requeue")
	case !c.Bool("failed"):
		return usagef("--workflow needs --failed: only a workflow's failed tasks can be requeued at once (requeue other tasks by TASK_ID)")
	}
	return adminRequeueFailed(c, c.String("workflow"))
}

// requeueFailedJSON is the --json output of admin requeue --workflow --failed.
type requeueFailedJSON struct {
	Operation  string             `json:"operation"`
	WorkflowID string             `json:"workflow_id"`
	DryRun     bool               `json:"dry_run"`
	Operator   string             `json:"operator"`
	Reason     string             `json:"reason"`
	Requeued   int                `json:"requeued"`
	Refused    int                `json:"refused"`
	Tasks      []requeuedTaskJSON `json:"tasks"`
}

// requeuedTaskJSON is one failed task of requeueFailedJSON: its new state,
// or why it was refused.
type requeuedTaskJSON struct {
	TaskID  string `json:"task_id"`
	NodeID  string `json:"node_id"`
	Cause   string `json:"cause"`
	State   string `json:"state,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// dryRunReason is the reason a dry run without --reason runs with: it is
// written nowhere.
const dryRunReason = "dry run"

// adminRequeueFailed requeues (or, with --dry-run, lists) the failed tasks
// of wf. Without --dry-run it shows the dry run's list and asks first.
func adminRequeueFailed(c *cli.Context, wf string) error {
	dry := c.Bool("dry-run")
	if dry && strings.TrimSpace(c.String("reason")) == "" {
		if err := c.Set("reason", dryRunReason); err != nil {
			return err
		}
	}
	op, err := operatorOf(c, "requeue the failed tasks")
	if err != nil {
		return err
	}
	return withOperatorStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		plan, err := s.RequeueFailed(ctx, wf, op, true)
		if err != nil {
			return usageIfInvalid(err)
		}
		if dry || len(plan.Tasks) == 0 {
			return printRequeueFailed(c, plan, op)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "About to requeue the %d failed task(s) of workflow %s (%d would be refused and stay failed):\n", len(plan.Tasks), wf, plan.Refused)
		writeRequeueTable(&b, plan)
		fmt.Fprintf(&b, "  effect:   each goes back to pending (blocked if a dependency has not completed), attempts reset to 0;\n            dependents cancelled because of it are revived\n  operator: %s\n  reason:   %s\n", op.Name, op.Reason)
		if err := confirm(c, b.String(), "Requeue these tasks"); err != nil {
			return err
		}
		rep, err := s.RequeueFailed(ctx, wf, op, false)
		if err != nil {
			return usageIfInvalid(err)
		}
		return printRequeueFailed(c, rep, op)
	})
}

// writeRequeueTable writes one line per task of rep: id, node, outcome,
// cause.
func writeRequeueTable(w io.Writer, rep taskgraph.RequeueReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range rep.Tasks {
		outcome := "-> " + string(t.State)
		if t.Refused != "" {
			outcome = "refused: " + truncate(oneLine(t.Refused), 100)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\tcause: %s\n", t.TaskID, t.NodeID, outcome, truncate(oneLine(t.Cause), 80))
	}
	tw.Flush()
}

// printRequeueFailed writes the outcome of a requeue of failed tasks (or
// its dry run).
func printRequeueFailed(c *cli.Context, rep taskgraph.RequeueReport, op taskgraph.Operator) error {
	if c.Bool("json") {
		out := requeueFailedJSON{Operation: "requeue-failed", WorkflowID: rep.WorkflowID, DryRun: rep.DryRun, Operator: op.Name, Reason: op.Reason,
			Requeued: rep.Requeued, Refused: rep.Refused, Tasks: []requeuedTaskJSON{}}
		if rep.DryRun && op.Reason == dryRunReason {
			out.Reason = ""
		}
		for _, t := range rep.Tasks {
			out.Tasks = append(out.Tasks, requeuedTaskJSON{TaskID: t.TaskID, NodeID: t.NodeID, Cause: t.Cause, State: string(t.State), Refused: t.Refused})
		}
		return writeJSON(c.App.Writer, out)
	}
	w := c.App.Writer
	if len(rep.Tasks) == 0 {
		_, err := fmt.Fprintf(w, "workflow %s has no failed tasks; nothing to requeue, nothing changed\n", rep.WorkflowID)
		return err
	}
	if rep.DryRun {
		fmt.Fprintf(w, "dry run, nothing written: would requeue %d failed task(s) of workflow %s and refuse %d\n", rep.Requeued, rep.WorkflowID, rep.Refused)
	} else {
		fmt.Fprintf(w, "requeued %d failed task(s) of workflow %s, refused %d\n", rep.Requeued, rep.WorkflowID, rep.Refused)
	}
	writeRequeueTable(w, rep)
	if !rep.DryRun {
		_, err := fmt.Fprintf(w, "recorded in each task's history: operator %s, reason %q\n", op.Name, op.Reason)
		return err
	}
	return nil
}

func adminSkipCommand() *cli.Command {
	return &cli.Command{
		Name:      "skip",
		Usage:     "mark a task completed (with a null result) so that its dependents can run",
		UsageText: "graph-engineering-mcp admin skip TASK_ID --reason TEXT [--yes] [--operator NAME] [--json] [--database PATH]",
		Description: `Marks the task completed with a null result and an operator note, fencing
out any holder. Its dependents proceed as if it had completed, including
those its failure or cancellation had cancelled.

Example:
   graph-engineering-mcp admin skip 01JNC3Z6Q9T7M3V4S8X2B5K0RD --reason "optional lint step, tool is down" --yes`,
		Flags:  adminFlags(),
		Action: leafAction([]string{"TASK_ID"}, adminTaskAction(skipOp)),
	}
}

// taskOp is an operator operation on one task.
type taskOp struct {
	verb   string   // "requeue"
	past   string   // "requeued"
	effect []string // what will happen, for the prompt
	run    func(ctx context.Context, s *taskgraph.Store, id string, op taskgraph.Operator) (taskgraph.Task, error)
}

var requeueOp = taskOp{
	verb: "requeue", past: "requeued",
	effect: []string{
		"back to pending (blocked if a dependency has not completed), attempts reset to 0",
		"any holder is fenced out: its next heartbeat or completion is rejected",
		"dependents cancelled because of this task are revived",
	},
	run: func(ctx context.Context, s *taskgraph.Store, id string, op taskgraph.Operator) (taskgraph.Task, error) {
		return s.Requeue(ctx, id, op)
	},
}

var skipOp = taskOp{
	verb: "skip", past: "skipped",
	effect: []string{
		"marked completed with a null result",
		"any holder is fenced out: its next heartbeat or completion is rejected",
		"its dependents may run, including those cancelled because of this task",
	},
	run: func(ctx context.Context, s *taskgraph.Store, id string, op taskgraph.Operator) (taskgraph.Task, error) {
		return s.Skip(ctx, id, op)
	},
}

// operatorOf reads --operator and --reason; a missing reason is a usage error.
func operatorOf(c *cli.Context, verb string) (taskgraph.Operator, error) {
	reason := strings.TrimSpace(c.String("reason"))
	if reason == "" {
		return taskgraph.Operator{}, usagef("--reason is required: say why you %s; it is recorded in the history", verb)
	}
	name := strings.TrimSpace(c.String("operator"))
	if c.IsSet("operator") && name == "" {
		return taskgraph.Operator{}, usagef("--operator must not be empty; leave it out to use your login name")
	}
	if name == "" {
		name = operatorName()
	}
	return taskgraph.Operator{Name: name, Reason: reason}, nil
}

// adminResultJSON is the --json output of admin requeue and skip.
type adminResultJSON struct {
	Operation string   `json:"operation"`
	Operator  string   `json:"operator"`
	Reason    string   `json:"reason"`
	From      string   `json:"from"`
	Task      taskJSON `json:"task"`
}

func adminTaskAction(o taskOp) func(c *cli.Context, args []string) error {
	return func(c *cli.Context, args []string) error {
		id := args[0]
		op, err := operatorOf(c, o.verb+" the task")
		if err != nil {
			return err
		}
		return withOperatorStore(c, func(ctx context.Context, s *taskgraph.Store) error {
			t, err := s.Task(ctx, id)
			if err != nil {
				return err
			}
			now := s.Clock().Now()
			prompt := fmt.Sprintf(`About to %s task %s (node %s of workflow %s).
  state:    %s
  status:   %s
  holder:   %s
  attempts: %d of %d
  effect:   %s
  operator: %s
  reason:   %s
`, o.verb, t.TaskID, t.NodeID, t.WorkflowID, stateLabel(t, now), truncate(oneLine(t.StatusMessage), 100), holderOf(t, now),
				t.Attempts, t.MaxAttempts, strings.Join(o.effect, "\n            "), op.Name, op.Reason)
			if err := confirm(c, prompt, strings.ToUpper(o.verb[:1])+o.verb[1:]+" this task"); err != nil {
				return err
			}
			after, err := o.run(ctx, s, id, op)
			if err != nil {
				return usageIfInvalid(err)
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, adminResultJSON{Operation: o.verb, Operator: op.Name, Reason: op.Reason, From: string(t.State), Task: newTaskJSON(after)})
			}
			_, err = fmt.Fprintf(c.App.Writer, "%s task %s (node %s of workflow %s): %s -> %s\nstatus: %s\nrecorded in the history: operator %s, reason %q\n",
				o.past, after.TaskID, after.NodeID, after.WorkflowID, t.State, after.State, oneLine(after.StatusMessage), op.Name, op.Reason)
			return err
		})
	}
}

// holderOf describes who holds a task, for a prompt.
func holderOf(t taskgraph.Task, now time.Time) string {
	if t.State != taskgraph.StateClaimed {
		return "none"
	}
	l := leaseOf(t, now)
	return fmt.Sprintf("%s, generation %d, lease %s (expires %s); it will be fenced out", t.Owner, t.Generation, l.Status, relative(t.LeaseExpiresAt, now))
}

func adminAbortCommand() *cli.Command {
	return &cli.Command{
		Name:      "abort-workflow",
		Usage:     "cancel every unfinished task of a workflow",
		UsageText: "graph-engineering-mcp admin abort-workflow WORKFLOW_ID --reason TEXT [--yes] [--operator NAME] [--json] [--database PATH]",
		Description: `Cancels every blocked, pending and claimed task of the workflow, fencing out
their holders, and records the reason on each. Finished tasks keep their
state. A workflow with nothing unfinished is left alone (exit 0, no prompt).

Example:
   graph-engineering-mcp admin abort-workflow release-42 --reason "release withdrawn"`,
		Flags:  adminFlags(),
		Action: leafAction([]string{"WORKFLOW_ID"}, adminAbortAction),
	}
}

// abortJSON is the --json output of admin abort-workflow.
type abortJSON struct {
	Operation  string `json:"operation"`
	Operator   string `json:"operator"`
	Reason     string `json:"reason"`
	WorkflowID string `json:"workflow_id"`
	Cancelled  int    `json:"cancelled"`
}

func adminAbortAction(c *cli.Context, args []string) error {
	wf := args[0]
	op, err := operatorOf(c, "abort the workflow")
	if err != nil {
		return err
	}
	return withOperatorStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		v, err := s.Workflow(ctx, wf)
		if err != nil {
			return usageIfInvalid(err)
		}
		unfinished := v.Counts[taskgraph.StateBlocked] + v.Counts[taskgraph.StatePending] + v.Counts[taskgraph.StateClaimed]
		if unfinished == 0 {
			if c.Bool("json") {
				return writeJSON(c.App.Writer, abortJSON{Operation: "abort-workflow", Operator: op.Name, Reason: op.Reason, WorkflowID: wf})
			}
			_, err := fmt.Fprintf(c.App.Writer, "workflow %s has finished (%s); nothing to abort, nothing changed\n", wf, describeCounts(v.Counts))
			return err
		}
		holders := map[string]int{}
		for _, t := range v.Tasks {
			if t.State == taskgraph.StateClaimed {
				holders[t.Owner]++
			}
		}
		hs := make([]string, 0, len(holders))
		for h, n := range holders {
			hs = append(hs, fmt.Sprintf("%s (%d)", h, n))
		}
		sort.Strings(hs)
		holderText := "none"
		if len(hs) > 0 {
			holderText = strings.Join(hs, ", ") + "; they will be fenced out"
		}
		prompt := fmt.Sprintf(`About to abort workflow %s.
  tasks:    %s
  effect:   cancel %d unfinished task(s): %d claimed, %d pending, %d blocked
  holders:  %s
  operator: %s
  reason:   %s
`, wf, describeCounts(v.Counts), unfinished, v.Counts[taskgraph.StateClaimed], v.Counts[taskgraph.StatePending],
			v.Counts[taskgraph.StateBlocked], holderText, op.Name, op.Reason)
		if err := confirm(c, prompt, "Abort this workflow"); err != nil {
			return err
		}
		n, err := s.AbortWorkflow(ctx, wf, op)
		if err != nil {
			return usageIfInvalid(err)
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, abortJSON{Operation: "abort-workflow", Operator: op.Name, Reason: op.Reason, WorkflowID: wf, Cancelled: n})
		}
		_, err = fmt.Fprintf(c.App.Writer, "aborted workflow %s: cancelled %d task(s)\nrecorded in the history: operator %s, reason %q\n", wf, n, op.Name, op.Reason)
		return err
	})
}

// confirm shows prompt on stderr and asks question; unless --yes was given,
// only an answer of y or yes (any case) on stdin proceeds. Anything else,
// including end of input, returns errNotConfirmed (exit 1). An interrupt
// (SIGINT, SIGTERM) while waiting for the answer returns at once.
func confirm(c *cli.Context, prompt, question string) error {
	if c.Bool("yes") {
		return nil
	}
	fmt.Fprintf(c.App.ErrWriter, "%s%s? [y/N] ", prompt, question)
	type reply struct {
		text string
		err  error
	}
	replies := make(chan reply, 1)
	go func() {
		// On an interrupt this goroutine stays blocked on stdin until the
		// process exits, which it is about to do.
		text, err := bufio.NewReader(c.App.Reader).ReadString('\n')
		replies <- reply{text, err}
	}()
	var r reply
	select {
	case r = <-replies:
	case <-c.Context.Done():
		fmt.Fprintln(c.App.ErrWriter)
		return fmt.Errorf("interrupted at the confirmation prompt, nothing changed: %w", c.Context.Err())
	}
	if r.err != nil && !errors.Is(r.err, io.EOF) {
		return fmt.Errorf("read confirmation from stdin: %w", r.err)
	}
	if r.err != nil || !isTerminal(c.App.Reader) {
		// Nothing echoed the answer's newline: end the prompt's line.
		fmt.Fprintln(c.App.ErrWriter)
	}
	switch strings.ToLower(strings.TrimSpace(r.text)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

func init() {
	registerCommands(func() []*cli.Command { return []*cli.Command{adminCommand()} })
}
