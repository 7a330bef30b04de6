package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

func workflowCommand() *cli.Command {
	return &cli.Command{
		Name:        "workflow",
		Usage:       "show a workflow's DAG or watch it run",
		Description: `Read-only views of one workflow, safe while a server runs on the same database.`,
		Subcommands: []*cli.Command{workflowShowCommand(), workflowWatchCommand()},
		Action:      groupAction,
	}
}

func asciiFlag() *cli.BoolFlag {
	return &cli.BoolFlag{Name: "ascii", Usage: "draw with ASCII only (for terminals or logs without Unicode)"}
}

func workflowShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show a workflow's DAG with the state of each node",
		UsageText: "graph-engineering-mcp workflow show WORKFLOW_ID [--format text|json|dot] [--json] [--ascii] [--database PATH]",
		Description: `--format text (the default) draws the DAG as an indented tree, dependencies
above their dependents, starting from the nodes without dependencies, in
creation order. Each line has a state mark, the node, its state, owner, task
id and a note (the error of a failed task, why a task is cancelled or
blocked, when a lease expires). A node with several dependencies is drawn in
full under the first of them and as a one-line reference ("↑ shown above")
under the others, so the output stays linear in the size of the graph.
Below depth 24 the indentation stops growing and the note gives the depth.
Counts by state and a legend follow the tree.

   ✓ completed   ✗ failed   ⊘ cancelled   ▶ claimed   ○ pending   … blocked

--ascii uses + x / > o . and |-- instead.

--format dot prints Graphviz input: one box per node labelled with the node id
and its state (and holder), filled by state, edges from each dependency to
its dependent. Render it with: dot -Tsvg -o workflow.svg

--format json (or --json) prints the whole view: tasks, edges and counts.

Examples:
   graph-engineering-mcp workflow show release-42
   graph-engineering-mcp workflow show release-42 --format dot | dot -Tsvg -o release-42.svg
   graph-engineering-mcp workflow show release-42 --json`,
		Flags: []cli.Flag{
			databaseFlag(),
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "text", Usage: "output `FORMAT`: text, json or dot"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON (same as --format json)"},
			asciiFlag(),
		},
		Action: leafAction([]string{"WORKFLOW_ID"}, workflowShowAction),
	}
}

func workflowShowAction(c *cli.Context, args []string) error {
	format := c.String("format")
	switch format {
	case "text", "json", "dot":
	default:
		return usagef("invalid --format %q: must be text, json or dot", format)
	}
	if c.Bool("json") {
		if c.IsSet("format") && format != "json" {
			return usagef("--json conflicts with --format %s; give one of them", format)
		}
		format = "json"
	}
	return withReadOnlyStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		v, err := s.Workflow(ctx, args[0])
		if err != nil {
			return usageIfInvalid(err)
		}
		now := s.Clock().Now()
		switch format {
		case "json":
			return writeJSON(c.App.Writer, newWorkflowJSON(v))
		case "dot":
			return writeDOT(c.App.Writer, v, now)
		default:
			return writeTree(c.App.Writer, v, now, styleFor(c.Bool("ascii")))
		}
	})
}

// workflowJSON is the --json output of workflow show.
type workflowJSON struct {
	WorkflowID string         `json:"workflow_id"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
	Finished   bool           `json:"finished"`
	Total      int            `json:"total"`
	Counts     map[string]int `json:"counts"`
	Tasks      []taskJSON     `json:"tasks"`
	Edges      []edgeJSON     `json:"edges"`
	// Usage is what every attempt of every task reported.
	Usage taskgraph.Usage `json:"usage"`
}

// edgeJSON says that Task cannot start before Dependency completes (node ids).
type edgeJSON struct {
	Dependency string `json:"dependency"`
	Task       string `json:"task"`
}

func newWorkflowJSON(v taskgraph.WorkflowView) workflowJSON {
	out := workflowJSON{WorkflowID: v.WorkflowID, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, Finished: v.Finished(),
		Total: len(v.Tasks), Counts: stateCountsJSON(v.Counts), Tasks: make([]taskJSON, len(v.Tasks)), Edges: make([]edgeJSON, len(v.Edges)),
		Usage: v.Usage}
	for i, t := range v.Tasks {
		out.Tasks[i] = newTaskJSON(t)
	}
	for i, e := range v.Edges {
		out.Edges[i] = edgeJSON{Dependency: e.Dependency, Task: e.Task}
	}
	return out
}

// treeStyle is the set of glyphs the text views draw with.
type treeStyle struct {
	tee, last, pipe, blank string
	ref                    string
	marks                  map[taskgraph.State]string
	barFull, barEmpty      string
	sep, more              string
}

var unicodeStyle = treeStyle{
	tee: "├── ", last: "└── ", pipe: "│   ", blank: "    ", ref: "↑ shown above",
	marks: map[taskgraph.State]string{
		taskgraph.StateCompleted: "✓", taskgraph.StateFailed: "✗", taskgraph.StateCancelled: "⊘",
		taskgraph.StateClaimed: "▶", taskgraph.StatePending: "○", taskgraph.StateBlocked: "…",
	},
	barFull: "█", barEmpty: "░", sep: " · ", more: "…",
}

var asciiStyle = treeStyle{
	tee: "|-- ", last: "`-- ", pipe: "|   ", blank: "    ", ref: "^ shown above",
	marks: map[taskgraph.State]string{
		taskgraph.StateCompleted: "+", taskgraph.StateFailed: "x", taskgraph.StateCancelled: "/",
		taskgraph.StateClaimed: ">", taskgraph.StatePending: "o", taskgraph.StateBlocked: ".",
	},
	barFull: "#", barEmpty: "-", sep: ", ", more: "...",
}

func styleFor(ascii bool) treeStyle {
	if ascii {
		return asciiStyle
	}
	return unicodeStyle
}

func (st treeStyle) mark(s taskgraph.State) string {
	if m, ok := st.marks[s]; ok {
		return m
	}
	return "?"
}

// legend lists the marks in lifecycle order of importance to a reader.
func (st treeStyle) legend() string {
	order := []taskgraph.State{taskgraph.StateCompleted, taskgraph.StateFailed, taskgraph.StateCancelled,
		taskgraph.StateClaimed, taskgraph.StatePending, taskgraph.StateBlocked}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = st.mark(s) + " " + string(s)
	}
	return strings.Join(parts, "   ")
}

// maxTreeIndent bounds the drawn depth: deeper nodes are drawn at this depth
// with their real depth in the note, so a long chain cannot make the output
// quadratic in its length.
const maxTreeIndent = 24

// writeTree draws the workflow as an indented tree; see workflow show's help.
func writeTree(w io.Writer, v taskgraph.WorkflowView, now time.Time, st treeStyle) error {
	byNode := make(map[string]taskgraph.Task, len(v.Tasks))
	for _, t := range v.Tasks {
		byNode[t.NodeID] = t
	}
	children := make(map[string][]string, len(v.Tasks))
	for _, e := range v.Edges {
		children[e.Dependency] = append(children[e.Dependency], e.Task)
	}
	fmt.Fprintf(w, "workflow %s: %d tasks, created %s, updated %s (%s)%s\n\n", v.WorkflowID, len(v.Tasks),
		timestamp(v.CreatedAt), timestamp(v.UpdatedAt), relative(v.UpdatedAt, now), submittedBy(v.Tasks))
	tw := newTable(w)
	fmt.Fprintln(tw, "NODE\tSTATE\tOWNER\tTASK\tNOTE")
	shown := make(map[string]bool, len(v.Tasks))
	var draw func(node, prefix, branch string, depth int)
	draw = func(node, prefix, branch string, depth int) {
		t := byNode[node]
		line := prefix + branch + st.mark(t.State) + " " + node
		if shown[node] {
			fmt.Fprintf(tw, "%s\t%s\t\t\t%s\n", line, t.State, st.ref)
			return
		}
		shown[node] = true
		note := taskNote(t, now)
		if depth > maxTreeIndent {
			note = strings.TrimSpace(fmt.Sprintf("(depth %d) %s", depth, note))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", line, stateLabel(t, now), dash(t.Owner), t.TaskID, note)
		kids := children[node]
		childPrefix := prefix
		if depth > 0 && depth <= maxTreeIndent {
			if branch == st.last {
				childPrefix += st.blank
			} else {
				childPrefix += st.pipe
			}
		}
		for i, k := range kids {
			b := st.tee
			if i == len(kids)-1 {
				b = st.last
			}
			if depth >= maxTreeIndent {
				// Stop indenting: keep the prefix and branch of this level.
				draw(k, prefix, branch, depth+1)
				continue
			}
			draw(k, childPrefix, b, depth+1)
		}
	}
	for _, t := range v.Tasks {
		if len(t.DependsOn) == 0 {
			draw(t.NodeID, "", "", 0)
		}
	}
	// Every node of a DAG descends from a root; this guards against a
	// dependency the view did not report.
	for _, t := range v.Tasks {
		if !shown[t.NodeID] {
			draw(t.NodeID, "", "", 0)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\nlegend: %s\n", countsLine(v.Counts, len(v.Tasks), st), st.legend())
	return err
}

// countsLine is every state's count, zeros included: "2/6 completed · 1 failed · ...".
func countsLine(c map[taskgraph.State]int, total int, st treeStyle) string {
	parts := []string{fmt.Sprintf("%d/%d completed", c[taskgraph.StateCompleted], total)}
	for _, s := range []taskgraph.State{taskgraph.StateFailed, taskgraph.StateCancelled, taskgraph.StateClaimed, taskgraph.StatePending, taskgraph.StateBlocked} {
		parts = append(parts, fmt.Sprintf("%d %s", c[s], s))
	}
	return strings.Join(parts, st.sep)
}

// taskNote is the short remark the tree shows beside a task.
func taskNote(t taskgraph.Task, now time.Time) string {
	const width = 72
	switch t.State {
	case taskgraph.StateClaimed:
		if leaseLapsed(t, now) {
			return fmt.Sprintf("lease expired %s", relative(t.LeaseExpiresAt, now))
		}
		return fmt.Sprintf("generation %d, lease expires %s", t.Generation, relative(t.LeaseExpiresAt, now))
	case taskgraph.StateCompleted:
		if string(t.Result) == "null" {
			return truncate(oneLine(t.StatusMessage), width)
		}
		return ""
	case taskgraph.StatePending:
		if !t.DueAt.IsZero() {
			return "waiting until " + timestamp(t.DueAt)
		}
		if t.Attempts == 0 && t.Generation == 0 { // never claimed: nothing to say (a released claim is)
			if len(t.Requires) > 0 {
				return "requires " + strings.Join(t.Requires, ", ")
			}
			if t.ConcurrencyKey != "" {
				return "key " + t.ConcurrencyKey
			}
			return ""
		}
	}
	return truncate(oneLine(t.StatusMessage), width)
}

// dotStyle is how a state is drawn in Graphviz: fill, border, line style.
var dotStyle = map[taskgraph.State][3]string{
	taskgraph.StateCompleted: {"#c8e6c9", "#2e7d32", "rounded,filled"},
	taskgraph.StateFailed:    {"#ffcdd2", "#c62828", "rounded,filled,bold"},
	taskgraph.StateCancelled: {"#eeeeee", "#757575", "rounded,filled,dashed"},
	taskgraph.StateClaimed:   {"#bbdefb", "#1565c0", "rounded,filled,bold"},
	taskgraph.StatePending:   {"#ffffff", "#424242", "rounded,filled"},
	taskgraph.StateBlocked:   {"#fff9c4", "#9e9d24", "rounded,filled"},
}

// dotQuote quotes s as a DOT string; a newline becomes DOT's \n line break.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}

// writeDOT prints the workflow as a Graphviz digraph.
func writeDOT(w io.Writer, v taskgraph.WorkflowView, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "// workflow %s: %s\n// render: dot -Tsvg -o %s.svg\n", v.WorkflowID, describeCounts(v.Counts), v.WorkflowID)
	fmt.Fprintf(&b, "digraph %s {\n", dotQuote("workflow "+v.WorkflowID))
	fmt.Fprintf(&b, "  graph [rankdir=TB, labelloc=t, fontname=\"Helvetica\", label=%s];\n",
		dotQuote(fmt.Sprintf("workflow %s — %d/%d completed", v.WorkflowID, v.Counts[taskgraph.StateCompleted], len(v.Tasks))))
	b.WriteString("  node [shape=box, fontname=\"Helvetica\"];\n")
	b.WriteString("  edge [color=\"#616161\"];\n")
	for _, t := range v.Tasks {
		label := t.NodeID + "\n" + stateLabel(t, now)
		if t.State == taskgraph.StateClaimed {
			label += "\n" + t.Owner
		}
		ds, ok := dotStyle[t.State]
		if !ok {
			ds = [3]string{"#ffffff", "#000000", "rounded,filled"}
		}
		fmt.Fprintf(&b, "  %s [label=%s, style=%s, fillcolor=%s, color=%s, tooltip=%s];\n",
			dotQuote(t.NodeID), dotQuote(label), dotQuote(ds[2]), dotQuote(ds[0]), dotQuote(ds[1]), dotQuote("task "+t.TaskID))
	}
	for _, e := range v.Edges {
		fmt.Fprintf(&b, "  %s -> %s;\n", dotQuote(e.Dependency), dotQuote(e.Task))
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func workflowWatchCommand() *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "follow a workflow until every task has finished",
		UsageText: "graph-engineering-mcp workflow watch WORKFLOW_ID [--interval D] [--json] [--ascii] [--database PATH]",
		Description: `Reads the workflow every --interval (default 1s, at least 10ms) and shows
progress: completed / total, claimed, failed, cancelled, pending and
blocked (the states every other command and the tools name), and which tasks
are claimed or failed.

On a terminal the view is redrawn in place (ANSI cursor movement). When
stdout is not a terminal (a pipe, a file, a CI log) one line is printed each
time the counts change; with --json, one JSON object per change.

Exits 0 once every task is completed, failed or cancelled, whatever the
outcome (use "workflow show --json" to inspect it). Interrupted (Ctrl-C,
SIGTERM) before that, it restores the terminal and exits 1, so a script
never mistakes an interrupted watch for a finished workflow.

Examples:
   graph-engineering-mcp workflow watch release-42
   graph-engineering-mcp workflow watch release-42 --interval 5s > progress.log`,
		Flags: []cli.Flag{
			databaseFlag(),
			&cli.DurationFlag{Name: "interval", Aliases: []string{"i"}, Value: time.Second, Usage: "refresh every `D` (e.g. 500ms, 2s)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per change"},
			asciiFlag(),
		},
		Action: leafAction([]string{"WORKFLOW_ID"}, workflowWatchAction),
	}
}

// minWatchInterval bounds --interval from below.
const minWatchInterval = 10 * time.Millisecond

func workflowWatchAction(c *cli.Context, args []string) error {
	interval := c.Duration("interval")
	if interval < minWatchInterval {
		return usagef("invalid --interval %s: must be at least %s", interval, minWatchInterval)
	}
	mode := watchLines
	switch {
	case c.Bool("json"):
		mode = watchJSON
	case isTerminal(c.App.Writer):
		mode = watchRedraw
	}
	return withReadOnlyStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		wv := &watchView{w: c.App.Writer, mode: mode, style: styleFor(c.Bool("ascii"))}
		return watchWorkflow(ctx, s, args[0], interval, wv)
	})
}

// isTerminal reports whether rw (a reader or writer) is a character device
// and TERM is not "dumb". Without a terminal library this also counts
// /dev/null, where escape sequences do no harm.
func isTerminal(rw any) bool {
	f, ok := rw.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// watchWorkflow refreshes wv every interval until the workflow has finished
// (nil) or ctx is cancelled (an error saying how far it got).
func watchWorkflow(ctx context.Context, s *taskgraph.Store, workflowID string, interval time.Duration, wv *watchView) error {
	defer wv.close()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last taskgraph.WorkflowView
	for {
		v, err := s.Workflow(ctx, workflowID)
		switch {
		case err != nil && ctx.Err() != nil:
			return interrupted(workflowID, last)
		case errors.Is(err, taskgraph.ErrNotFound) && last.WorkflowID != "":
			return fmt.Errorf("workflow %s disappeared while being watched (pruned?): %w", workflowID, err)
		case err != nil:
			return usageIfInvalid(err)
		}
		last = v
		if err := wv.update(v, s.Clock().Now()); err != nil {
			return err
		}
		if v.Finished() {
			return nil
		}
		select {
		case <-ctx.Done():
			return interrupted(workflowID, last)
		case <-tick.C:
		}
	}
}

func interrupted(workflowID string, last taskgraph.WorkflowView) error {
	if last.WorkflowID == "" {
		return fmt.Errorf("watch of workflow %s interrupted before the first read", workflowID)
	}
	return fmt.Errorf("watch interrupted; workflow %s has not finished: %s", workflowID, summaryLine(last))
}

// watch output modes.
const (
	watchLines  = iota // one line per change
	watchRedraw        // redraw in place on a terminal
	watchJSON          // one JSON object per change
)

// watchView renders successive workflow views.
type watchView struct {
	w     io.Writer
	mode  int
	style treeStyle
	prev  string // the last output, to print only changes
	lines int    // lines of the frame on screen (watchRedraw)
}

// ANSI escape sequences used to redraw in place.
const (
	ansiHideCursor = "\x1b[?25l"
	ansiShowCursor = "\x1b[?25h"
	ansiNoWrap     = "\x1b[?7l" // long lines are cut, not wrapped, so the line count holds
	ansiWrap       = "\x1b[?7h"
	ansiClearDown  = "\x1b[J"
)

// progressJSON is one --json line of workflow watch.
type progressJSON struct {
	At         time.Time      `json:"at"`
	WorkflowID string         `json:"workflow_id"`
	Total      int            `json:"total"`
	Counts     map[string]int `json:"counts"`
	Finished   bool           `json:"finished"`
	// Usage is the workflow's usage; absent while nobody reported any.
	Usage *taskgraph.Usage `json:"usage,omitempty"`
}

func (wv *watchView) update(v taskgraph.WorkflowView, now time.Time) error {
	switch wv.mode {
	case watchJSON:
		p := progressJSON{WorkflowID: v.WorkflowID, Total: len(v.Tasks), Counts: stateCountsJSON(v.Counts), Finished: v.Finished()}
		if !v.Usage.IsZero() {
			u := v.Usage
			p.Usage = &u
		}
		key := fmt.Sprint(p.WorkflowID, p.Total, p.Counts, p.Finished, v.Usage)
		if key == wv.prev {
			return nil
		}
		wv.prev = key
		p.At = now
		return writeJSONLine(wv.w, p)
	case watchRedraw:
		frame := redrawFrame(v, now, wv.style)
		if frame == wv.prev {
			return nil
		}
		var b strings.Builder
		if wv.lines == 0 {
			b.WriteString(ansiHideCursor + ansiNoWrap)
		} else {
			fmt.Fprintf(&b, "\r\x1b[%dA", wv.lines)
		}
		b.WriteString(ansiClearDown)
		b.WriteString(frame)
		wv.prev, wv.lines = frame, strings.Count(frame, "\n")
		_, err := io.WriteString(wv.w, b.String())
		return err
	default:
		line := summaryLine(v)
		if line == wv.prev {
			return nil
		}
		wv.prev = line
		_, err := fmt.Fprintf(wv.w, "%s %s\n", timestamp(now), line)
		return err
	}
}

// close restores the terminal after a redrawing watch.
func (wv *watchView) close() {
	if wv.mode == watchRedraw && wv.lines > 0 {
		io.WriteString(wv.w, ansiWrap+ansiShowCursor)
	}
}

// summaryLine is the one-line progress of a workflow.
func summaryLine(v taskgraph.WorkflowView) string {
	c := v.Counts
	s := fmt.Sprintf("workflow %s: %d/%d completed, %d claimed, %d failed, %d cancelled, %d pending, %d blocked",
		v.WorkflowID, c[taskgraph.StateCompleted], len(v.Tasks), c[taskgraph.StateClaimed], c[taskgraph.StateFailed],
		c[taskgraph.StateCancelled], c[taskgraph.StatePending], c[taskgraph.StateBlocked])
	if v.Finished() {
		s += " (finished)"
	}
	return s
}

// maxFrameTasks bounds the claimed and failed tasks listed in a frame.
const maxFrameTasks = 10

// redrawFrame is the terminal view: a progress bar, the counts, and the
// claimed and failed tasks. Apart from flagging a lapsed lease it leaves out
// anything that changes with time alone, so it is redrawn only when the
// workflow changes.
func redrawFrame(v taskgraph.WorkflowView, now time.Time, st treeStyle) string {
	const barWidth = 30
	total, done := len(v.Tasks), v.Counts[taskgraph.StateCompleted]
	filled := 0
	pct := 100
	if total > 0 {
		filled = done * barWidth / total
		pct = done * 100 / total
	}
	var b strings.Builder
	fmt.Fprintf(&b, "workflow %s  %s%s  %d/%d completed (%d%%)\n", v.WorkflowID,
		strings.Repeat(st.barFull, filled), strings.Repeat(st.barEmpty, barWidth-filled), done, total, pct)
	c := v.Counts
	parts := []string{
		fmt.Sprintf("%d claimed", c[taskgraph.StateClaimed]), fmt.Sprintf("%d failed", c[taskgraph.StateFailed]),
		fmt.Sprintf("%d cancelled", c[taskgraph.StateCancelled]), fmt.Sprintf("%d pending", c[taskgraph.StatePending]),
		fmt.Sprintf("%d blocked", c[taskgraph.StateBlocked]),
	}
	fmt.Fprintf(&b, "%s\n", strings.Join(parts, st.sep))
	if !v.Usage.IsZero() {
		fmt.Fprintf(&b, "usage: %s\n", describeUsage(v.Usage))
	}
	list := func(state taskgraph.State, describe func(taskgraph.Task) string) {
		n := 0
		for _, t := range v.Tasks {
			if t.State != state {
				continue
			}
			if n == maxFrameTasks {
				fmt.Fprintf(&b, "  %s and %d more %s\n", st.more, c[state]-maxFrameTasks, state)
				return
			}
			fmt.Fprintf(&b, "  %s %s  %s\n", st.mark(state), t.NodeID, describe(t))
			n++
		}
	}
	list(taskgraph.StateClaimed, func(t taskgraph.Task) string {
		s := fmt.Sprintf("claimed by %s (generation %d)", t.Owner, t.Generation)
		if leaseLapsed(t, now) {
			s += ", lease expired"
		}
		if rep := t.Report; rep != nil && rep.Generation == t.Generation {
			if p := describeProgress(rep); p != "" {
				s += ": " + p
			}
			if rep.StatusMessage != "" {
				s += ": " + truncate(oneLine(rep.StatusMessage), 60)
			}
		}
		return s
	})
	list(taskgraph.StateFailed, func(t taskgraph.Task) string { return truncate(oneLine(t.StatusMessage), 72) })
	if v.Finished() {
		fmt.Fprintf(&b, "finished at %s\n", timestamp(now))
	}
	return b.String()
}

// writeJSONLine prints v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func init() {
	registerCommands(func() []*cli.Command { return []*cli.Command{workflowCommand()} })
}

// submittedBy names the principals whose requests created the workflow's
// tasks ("" when none was authenticated), for workflow show's header.
func submittedBy(tasks []taskgraph.Task) string {
	var names []string
	seen := map[string]bool{}
	for _, t := range tasks {
		if t.CreatedBy != "" && !seen[t.CreatedBy] {
			seen[t.CreatedBy] = true
			names = append(names, t.CreatedBy)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return ", submitted by principal " + strings.Join(names, ", ")
}
