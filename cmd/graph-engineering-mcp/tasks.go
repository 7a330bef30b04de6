package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

func tasksCommand() *cli.Command {
	return &cli.Command{
		Name:  "tasks",
		Usage: "list and inspect tasks",
		Description: `Read-only views of tasks, safe while a server runs on the same database.
Expired leases that the server has not processed yet show as
"claimed (lease expired)" in the list.`,
		Subcommands: []*cli.Command{tasksListCommand(), tasksShowCommand()},
		Action:      groupAction,
	}
}

func tasksListCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "list tasks as a table, oldest first",
		UsageText: "graph-engineering-mcp tasks list [--workflow W] [--state S] [--limit N] [--json] [--database PATH]",
		Description: `Prints one line per task: ID, WORKFLOW, NODE, STATE, OWNER, GEN (claims
granted so far), ATTEMPTS (used/allowed) and AGE.

AGE is the time since the task last changed (its updated_at: created,
claimed, heartbeat, finished...), by the server's clock, so a claimed task
whose AGE exceeds its lease has stopped heartbeating. It reads 3s, 5m, 2h, 4d.

--state is one of blocked, pending, claimed, completed, failed, cancelled.
At most --limit tasks are listed (default 100, at most 10000); a note on
stderr says when the list was cut.

Examples:
   graph-engineering-mcp tasks list
   graph-engineering-mcp tasks list --workflow release-42 --state failed
   graph-engineering-mcp tasks list --state claimed --json`,
		Flags: []cli.Flag{
			databaseFlag(),
			&cli.StringFlag{Name: "workflow", Aliases: []string{"w"}, Usage: "only tasks of workflow `W`"},
			&cli.StringFlag{Name: "state", Aliases: []string{"s"}, Usage: "only tasks in state `S` (" + stateNames() + ")"},
			&cli.IntFlag{Name: "limit", Aliases: []string{"n"}, Value: 100, Usage: fmt.Sprintf("list at most `N` tasks (1 to %d)", taskgraph.MaxTasksPerWorkflow)},
			jsonFlag(),
		},
		Action: leafAction(nil, tasksListAction),
	}
}

// stateNames lists the task states in lifecycle order, comma separated.
func stateNames() string {
	names := make([]string, len(taskgraph.States))
	for i, st := range taskgraph.States {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// listJSON is the --json output of tasks list.
type listJSON struct {
	Now       time.Time  `json:"now"`
	Limit     int        `json:"limit"`
	Truncated bool       `json:"truncated"`
	Tasks     []taskJSON `json:"tasks"`
}

func tasksListAction(c *cli.Context, _ []string) error {
	f := taskgraph.ListFilter{WorkflowID: c.String("workflow"), State: taskgraph.State(c.String("state")), Limit: c.Int("limit")}
	if f.State != "" && !f.State.Valid() {
		return usagef("invalid --state %q: must be one of %s", f.State, stateNames())
	}
	if f.Limit < 1 || f.Limit > taskgraph.MaxTasksPerWorkflow {
		return usagef("invalid --limit %d: must be between 1 and %d", f.Limit, taskgraph.MaxTasksPerWorkflow)
	}
	return withReadOnlyStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		tasks, err := s.ListTasks(ctx, f)
		if err != nil {
			return usageIfInvalid(err)
		}
		now := s.Clock().Now()
		truncated := len(tasks) == f.Limit
		if c.Bool("json") {
			out := listJSON{Now: now, Limit: f.Limit, Truncated: truncated, Tasks: make([]taskJSON, len(tasks))}
			for i, t := range tasks {
				out.Tasks[i] = newTaskJSON(t)
			}
			return writeJSON(c.App.Writer, out)
		}
		if len(tasks) == 0 {
			_, err := fmt.Fprintln(c.App.Writer, "no tasks match")
			return err
		}
		if err := writeTaskTable(c.App.Writer, tasks, now); err != nil {
			return err
		}
		if truncated {
			fmt.Fprintf(c.App.ErrWriter, "showing the first %d tasks; raise --limit (at most %d) or narrow with --workflow or --state\n", f.Limit, taskgraph.MaxTasksPerWorkflow)
		}
		return nil
	})
}

// table aligns tab-separated cells into columns and trims the padding that
// text/tabwriter leaves at the end of lines whose last cells are empty.
type table struct {
	w   io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	return t
}

// Write implements io.Writer: cells are separated by tabs, rows end in newlines.
func (t *table) Write(p []byte) (int, error) { return t.tw.Write(p) }

// Flush writes the aligned table.
func (t *table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(t.buf.String(), "\n") {
		nl := strings.HasSuffix(line, "\n")
		out.WriteString(strings.TrimRight(line, " \n"))
		if nl {
			out.WriteByte('\n')
		}
	}
	t.buf.Reset()
	_, err := t.w.Write(out.Bytes())
	return err
}

// writeTaskTable prints tasks as an aligned table.
func writeTaskTable(w io.Writer, tasks []taskgraph.Task, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tWORKFLOW\tNODE\tSTATE\tOWNER\tGEN\tATTEMPTS\tAGE")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\n", t.TaskID, t.WorkflowID, t.NodeID, stateLabel(t, now),
			dash(t.Owner), t.Generation, t.Attempts, t.MaxAttempts, humanDuration(now.Sub(t.UpdatedAt)))
	}
	return tw.Flush()
}

// stateLabel is the task's state, flagging a claim whose lease has lapsed
// but which no server has processed yet.
func stateLabel(t taskgraph.Task, now time.Time) string {
	if leaseLapsed(t, now) {
		return string(t.State) + " (lease expired)"
	}
	if t.AwaitingApproval {
		return string(t.State) + " (awaiting approval)"
	}
	return string(t.State)
}

func leaseLapsed(t taskgraph.Task, now time.Time) bool {
	return t.State == taskgraph.StateClaimed && !now.Before(t.LeaseExpiresAt)
}

// dash shows an empty string as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// humanDuration renders d in its largest whole unit: 3s, 5m, 2h, 4d.
// Negative durations (a clock behind the stored time) read 0s.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// relative renders t against now: "5m ago" or "in 30s".
func relative(t, now time.Time) string {
	if t.After(now) {
		return "in " + humanDuration(t.Sub(now))
	}
	return humanDuration(now.Sub(t)) + " ago"
}

// timestamp formats t for people: UTC, to the second.
func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func tasksShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show one task: every field, its lease and its history",
		UsageText: "graph-engineering-mcp tasks show TASK_ID [--json] [--database PATH]",
		Description: `Prints every field of the task, its lease (holder, generation, expiry and
whether it is live at the server's current time) and its event history (seq
in the workflow's chain, time, kind, owner, generation, detail). Claim tokens
are never stored in readable form and never shown.

Reading a task whose lease has lapsed first records the expiry (back to
pending, or failed on its last attempt), exactly as a server would.

Exits 1 when no task has that id.

Example:
   graph-engineering-mcp tasks show 01JNC3Z6Q9T7M3V4S8X2B5K0RD`,
		Flags:  []cli.Flag{databaseFlag(), jsonFlag()},
		Action: leafAction([]string{"TASK_ID"}, tasksShowAction),
	}
}

// taskJSON is a task in --json output. It has no claim token: the store
// never returns one from a read.
type taskJSON struct {
	TaskID         string          `json:"task_id"`
	WorkflowID     string          `json:"workflow_id"`
	NodeID         string          `json:"node_id"`
	State          string          `json:"state"`
	StatusMessage  string          `json:"status_message"`
	Owner          string          `json:"owner,omitempty"`
	Generation     int64           `json:"generation"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at,omitempty"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"max_attempts"`
	LeaseLosses    int             `json:"lease_losses"`
	DependsOn      []string        `json:"depends_on"`
	Payload        json.RawMessage `json:"payload"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	// CreatedBy is the principal whose request created the task; absent
	// when none was authenticated (stdio, operator commands).
	CreatedBy string `json:"created_by,omitempty"`
	// Requires are the capabilities a claimant must advertise; absent when
	// none.
	Requires []string `json:"requires,omitempty"`
	// ConcurrencyKey is the task's concurrency key; absent when none.
	ConcurrencyKey string `json:"concurrency_key,omitempty"`
	// DueAt is when a pending task becomes claimable; absent when it is
	// claimable now.
	DueAt *time.Time `json:"due_at,omitempty"`
	// Report is the current (or last) attempt's report by its worker, and
	// TotalUsage the usage of every attempt; absent when none.
	Report     *taskgraph.Report `json:"report,omitempty"`
	TotalUsage *taskgraph.Usage  `json:"total_usage,omitempty"`
	// Kind is "gate" for an approval gate; absent for an ordinary task.
	// AwaitingApproval is set while the gate awaits a decision (admin
	// approve|reject); GateTimeoutMS and OnTimeout are its timeout.
	Kind             string `json:"kind,omitempty"`
	AwaitingApproval bool   `json:"awaiting_approval,omitempty"`
	GateTimeoutMS    int64  `json:"gate_timeout_ms,omitempty"`
	OnTimeout        string `json:"on_timeout,omitempty"`
}

func newTaskJSON(t taskgraph.Task) taskJSON {
	out := taskJSON{
		TaskID: t.TaskID, WorkflowID: t.WorkflowID, NodeID: t.NodeID, State: string(t.State), StatusMessage: t.StatusMessage,
		Owner: t.Owner, Generation: t.Generation, Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, LeaseLosses: t.LeaseLosses,
		DependsOn: t.DependsOn, Payload: t.Payload, Result: t.Result, Error: t.Error, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
		CreatedBy: t.CreatedBy, Requires: t.Requires, Report: t.Report, ConcurrencyKey: t.ConcurrencyKey,
	}
	if !t.TotalUsage.IsZero() {
		u := t.TotalUsage
		out.TotalUsage = &u
	}
	if !t.DueAt.IsZero() {
		due := t.DueAt
		out.DueAt = &due
	}
	if out.DependsOn == nil {
		out.DependsOn = []string{}
	}
	if t.Kind == taskgraph.KindGate {
		out.Kind, out.AwaitingApproval = t.Kind, t.AwaitingApproval
		out.GateTimeoutMS, out.OnTimeout = t.GateTimeout.Milliseconds(), t.OnTimeout
	}
	if !t.LeaseExpiresAt.IsZero() {
		exp := t.LeaseExpiresAt
		out.LeaseExpiresAt = &exp
	}
	return out
}

// leaseJSON describes a task's lease at a moment.
type leaseJSON struct {
	// Status is "live" (claimed, not expired), "expired" (claimed, lapsed,
	// not processed yet) or "none" (not claimed).
	Status     string     `json:"status"`
	Owner      string     `json:"owner,omitempty"`
	Generation int64      `json:"generation"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
}

func leaseOf(t taskgraph.Task, now time.Time) leaseJSON {
	l := leaseJSON{Status: "none", Generation: t.Generation}
	if t.State != taskgraph.StateClaimed {
		return l
	}
	l.Owner = t.Owner
	exp := t.LeaseExpiresAt
	l.ExpiresAt = &exp
	l.Status = "live"
	if leaseLapsed(t, now) {
		l.Status = "expired"
	}
	return l
}

// eventJSON is a history event in --json output.
type eventJSON struct {
	EventID    int64           `json:"event_id"`
	Seq        int64           `json:"seq"`
	At         time.Time       `json:"at"`
	Kind       string          `json:"kind"`
	Owner      string          `json:"owner,omitempty"`
	Generation int64           `json:"generation"`
	Detail     json.RawMessage `json:"detail"`
	Hash       string          `json:"hash"`
	// Actor is who caused the event (hash format 2; absent on older
	// events): its kind, name and, over HTTP with principals, principal.
	Actor *actorJSON `json:"actor,omitempty"`
}

// actorJSON is an event's actor in --json output.
type actorJSON struct {
	Kind      string `json:"kind"`
	Name      string `json:"name,omitempty"`
	Principal string `json:"principal,omitempty"`
}

func actorOf(e taskgraph.Event) *actorJSON {
	if e.Actor.Kind == "" {
		return nil
	}
	return &actorJSON{Kind: e.Actor.Kind, Name: e.Actor.Name, Principal: e.Actor.Principal}
}

// describeActor is an event's actor in text output: kind:name, with
// "(principal P)" when a principal caused it, "-" for an older event.
func describeActor(e taskgraph.Event) string {
	a := actorOf(e)
	if a == nil {
		return "-"
	}
	out := a.Kind
	if a.Name != "" {
		out += ":" + a.Name
	}
	if a.Principal != "" {
		out += " (principal " + a.Principal + ")"
	}
	return out
}

// showJSON is the --json output of tasks show.
type showJSON struct {
	Now    time.Time   `json:"now"`
	Task   taskJSON    `json:"task"`
	Lease  leaseJSON   `json:"lease"`
	Events []eventJSON `json:"events"`
}

func tasksShowAction(c *cli.Context, args []string) error {
	id := args[0]
	return withReadOnlyStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		t, err := s.Task(ctx, id)
		if err != nil {
			return err
		}
		now := s.Clock().Now()
		events, err := s.TaskEvents(ctx, id)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			out := showJSON{Now: now, Task: newTaskJSON(t), Lease: leaseOf(t, now), Events: make([]eventJSON, len(events))}
			for i, e := range events {
				out.Events[i] = eventJSON{EventID: e.EventID, Seq: e.Seq, At: e.At, Kind: e.Kind, Owner: e.Owner,
					Generation: e.Generation, Detail: e.Detail, Hash: e.Hash, Actor: actorOf(e)}
			}
			return writeJSON(c.App.Writer, out)
		}
		return writeTaskDetail(c.App.Writer, t, events, now)
	})
}

func writeTaskDetail(w io.Writer, t taskgraph.Task, events []taskgraph.Event, now time.Time) error {
	tw := newTable(w)
	deps := "(none)"
	if len(t.DependsOn) > 0 {
		deps = strings.Join(t.DependsOn, ", ")
	}
	rows := [][2]string{
		{"task", t.TaskID},
		{"workflow", t.WorkflowID},
		{"node", t.NodeID},
		{"state", stateLabel(t, now)},
		{"status", oneLine(t.StatusMessage)},
		{"depends on", deps},
	}
	if len(t.Requires) > 0 {
		rows = append(rows, [2]string{"requires", strings.Join(t.Requires, ", ")})
	}
	if t.ConcurrencyKey != "" {
		rows = append(rows, [2]string{"key", t.ConcurrencyKey + " (admin limit " + t.ConcurrencyKey + " shows its limit)"})
	}
	if t.LeaseLosses > 0 {
		rows = append(rows, [2]string{"losses", fmt.Sprintf("%d lease(s) lapsed (a poison task fails at serve --max-lease-losses)", t.LeaseLosses)})
	}
	if !t.DueAt.IsZero() {
		rows = append(rows, [2]string{"waiting until", fmt.Sprintf("%s (%s)", timestamp(t.DueAt), relative(t.DueAt, now))})
	}
	if rep := t.Report; rep != nil {
		if p := describeProgress(rep); p != "" {
			rows = append(rows, [2]string{"progress", p})
		}
		if rep.StatusMessage != "" {
			rows = append(rows, [2]string{"worker says", oneLine(rep.StatusMessage)})
		}
		at := time.UnixMilli(rep.AtMS)
		rows = append(rows, [2]string{"reported", fmt.Sprintf("%s (%s) by generation %d", timestamp(at), relative(at, now), rep.Generation)})
	}
	if !t.TotalUsage.IsZero() {
		rows = append(rows, [2]string{"usage", describeUsage(t.TotalUsage) + " (every attempt)"})
	}
	rows = append(rows, [][2]string{
		{"attempts", fmt.Sprintf("%d of %d", t.Attempts, t.MaxAttempts)},
		{"owner", dash(t.Owner)},
		{"generation", fmt.Sprintf("%d (claims granted so far)", t.Generation)},
		{"lease", describeLease(t, now)},
		{"created", fmt.Sprintf("%s (%s)", timestamp(t.CreatedAt), relative(t.CreatedAt, now))},
		{"created by", dash(t.CreatedBy)},
		{"updated", fmt.Sprintf("%s (%s)", timestamp(t.UpdatedAt), relative(t.UpdatedAt, now))},
	}...)
	if t.Result == nil {
		rows = append(rows, [2]string{"result", "(none)"})
	}
	if t.Error == "" {
		rows = append(rows, [2]string{"error", "(none)"})
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeBlock(w, "payload", prettyJSON(t.Payload))
	if t.Result != nil {
		writeBlock(w, "result", prettyJSON(t.Result))
	}
	if t.Error != "" {
		writeBlock(w, "error", t.Error)
	}
	fmt.Fprintf(w, "\nhistory (%d events)\n", len(events))
	tw = newTable(w)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tOWNER\tGEN\tACTOR\tDETAIL")
	for _, e := range events {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", e.Seq, timestamp(e.At), e.Kind, dash(e.Owner), e.Generation, describeActor(e), e.Detail)
	}
	return tw.Flush()
}

// describeProgress is a report's progress: "3 of 10 (30%)", "7"; "" when
// it carried none.
func describeProgress(rep *taskgraph.Report) string {
	p := rep.Progress
	if p == nil {
		return ""
	}
	if p.Total == nil {
		return fmt.Sprintf("%v done", p.Done)
	}
	s := fmt.Sprintf("%v of %v", p.Done, *p.Total)
	if *p.Total > 0 {
		s += fmt.Sprintf(" (%d%%)", int(p.Done*100 / *p.Total))
	}
	return s
}

// describeUsage is usage as text: "1200 input and 300 output tokens, $0.0125".
func describeUsage(u taskgraph.Usage) string {
	return fmt.Sprintf("%d input and %d output tokens, $%s", u.InputTokens, u.OutputTokens, strconv.FormatFloat(u.CostUSD, 'f', -1, 64))
}

// describeLease says who holds the task and whether the lease is live at now.
func describeLease(t taskgraph.Task, now time.Time) string {
	switch {
	case t.State == taskgraph.StateClaimed && leaseLapsed(t, now):
		return fmt.Sprintf("EXPIRED: held by %s, generation %d, expired %s (%s); not yet processed by a server",
			t.Owner, t.Generation, timestamp(t.LeaseExpiresAt), relative(t.LeaseExpiresAt, now))
	case t.State == taskgraph.StateClaimed:
		return fmt.Sprintf("live: held by %s, generation %d, expires %s (%s)",
			t.Owner, t.Generation, timestamp(t.LeaseExpiresAt), relative(t.LeaseExpiresAt, now))
	case t.Generation == 0:
		return "none (never claimed)"
	case t.Owner != "":
		return fmt.Sprintf("none (last held by %s, generation %d)", t.Owner, t.Generation)
	default:
		return fmt.Sprintf("none (last granted generation %d)", t.Generation)
	}
}

// writeBlock prints a titled, indented block of text.
func writeBlock(w io.Writer, title, body string) {
	fmt.Fprintf(w, "%s:\n", title)
	for _, line := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
}

// prettyJSON indents raw JSON, or returns it as is if it does not parse.
func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// oneLine flattens text onto one line for a table cell.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// stateCountsJSON returns counts for every state, zero included.
func stateCountsJSON(c map[taskgraph.State]int) map[string]int {
	out := make(map[string]int, len(taskgraph.States))
	for _, st := range taskgraph.States {
		out[string(st)] = c[st]
	}
	return out
}

// describeCounts renders counts by state in lifecycle order, with the total:
// "6 (2 completed, 1 claimed, ...)". Zero counts are left out.
func describeCounts(c map[taskgraph.State]int) string {
	total := 0
	var parts []string
	for _, st := range taskgraph.States {
		total += c[st]
		if c[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[st], st))
		}
	}
	if total == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

func init() {
	registerCommands(func() []*cli.Command { return []*cli.Command{tasksCommand()} })
}
