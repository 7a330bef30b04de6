package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/mcpclient"
)

// node is one node of the workflow's DAG.
type node struct {
	ID        string
	DependsOn []string
	// Requires are the capabilities a worker must advertise to claim it.
	Requires []string
}

// diamond is the workflow submit creates: a fans out to b and c, which join
// in d. d requires the capability echo, which the example worker
// advertises by default (its handler echoes): capability routing gives d
// only to a worker that says it can do it.
var diamond = []node{
	{ID: "a"},
	{ID: "b", DependsOn: []string{"a"}},
	{ID: "c", DependsOn: []string{"a"}},
	{ID: "d", DependsOn: []string{"b", "c"}, Requires: []string{"echo"}},
}

// Options configures Submit.
type Options struct {
	// Workflow is the workflow id to create the nodes in.
	Workflow string
	// SleepMs, when positive, is every node's payload.sleep_ms.
	SleepMs int64
	// FailNode names a node whose payload asks the worker to fail it.
	FailNode string
	// FailRetryable makes that failure retryable.
	FailRetryable bool
	// MaxAttempts is every node's max_attempts.
	MaxAttempts int
	// UseTasks follows the nodes with tasks/get (the Tasks extension, whose
	// task handles graph_task_create then returns, one call per node)
	// instead of polling graph_task_inspect (after creating the whole
	// graph in one graph_task_create with nodes).
	UseTasks bool
	// Listen, with UseTasks, waits on notifications (subscriptions/listen)
	// instead of polling tasks/get; where it cannot open a stream (an
	// older server) Submit polls. Nil: poll.
	Listen listenFunc
	// Poll is the polling interval; 0 means the server's pollIntervalMs
	// (tasks/get) or 1s (graph_task_inspect).
	Poll time.Duration
	// FollowTimeout, when positive, stops following this long after every
	// node is created (the workflow keeps running); connecting and creating
	// are not counted.
	FollowTimeout time.Duration
	// Progress receives one line per creation and state change; nil
	// discards them.
	Progress io.Writer
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// NodeReport is a node's state as followed, and at the end its outcome.
type NodeReport struct {
	NodeID string `json:"node_id"`
	TaskID string `json:"task_id"`
	// State is completed, failed or cancelled at the end; while following it
	// is the Tasks status (working) or the graph state (blocked, pending,
	// claimed).
	State string `json:"state"`
	// Status is the server's human-readable status message.
	Status string `json:"status_message"`
	// Result is the worker's result of a completed node.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the worker's error of a failed node.
	Error string `json:"error,omitempty"`
}

func (r NodeReport) terminal() bool {
	return r.State == "completed" || r.State == "failed" || r.State == "cancelled"
}

// Report is the outcome of a workflow.
type Report struct {
	WorkflowID string `json:"workflow_id"`
	// Via is "subscriptions/listen", "tasks/get" or "graph_task_inspect".
	Via   string       `json:"followed_with"`
	Nodes []NodeReport `json:"nodes"`
	// OK is true when every node completed.
	OK bool `json:"ok"`
}

// follower reads a node's current state.
type follower interface {
	poll(ctx context.Context, r *NodeReport) error
}

// Submit creates the diamond workflow and follows it until every node has
// finished, printing progress. It returns the final report; an error means
// it could not create or follow the workflow (the nodes keep running on the
// server).
func Submit(ctx context.Context, cs *mcp.ClientSession, o Options) (*Report, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	rep := &Report{WorkflowID: o.Workflow, Via: mcpclient.ToolInspect}
	var f follower = inspectFollower{cs}
	poll := o.Poll
	if o.UseTasks {
		rep.Via = methodTasksGet
		f = tasksFollower{cs}
	}
	fmt.Fprintf(progress, "workflow %s: creating %d nodes, following them with %s\n", o.Workflow, len(diamond), rep.Via)
	if !o.UseTasks {
		// The whole graph in one graph_task_create (nodes): all of it is
		// created, or none, and a re-run finds the same tasks.
		nodes, err := createGraph(ctx, cs, o)
		if err != nil {
			return nil, err
		}
		for i, r := range nodes {
			fmt.Fprintf(progress, "created %s%s: task %s, %s\n", r.NodeID, after(diamond[i]), r.TaskID, r.State)
		}
		rep.Nodes = nodes
	}
	// With the Tasks extension each node is created by a call of its own,
	// which answers with that node's task handle.
	for _, n := range diamond[len(rep.Nodes):] {
		r, hint, err := create(ctx, cs, o, n)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("stopped while creating node %s; the %d nodes created before it remain and will run (run submit again with --workflow %s to finish creating and follow them): %w",
					n.ID, len(rep.Nodes), o.Workflow, context.Cause(ctx))
			}
			return nil, err
		}
		if poll == 0 && hint > 0 {
			poll = hint
		}
		fmt.Fprintf(progress, "created %s%s: task %s, %s: %s\n", n.ID, after(n), r.TaskID, r.State, r.Status)
		rep.Nodes = append(rep.Nodes, r)
	}
	if poll == 0 {
		poll = time.Second
	}
	if o.FollowTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.FollowTimeout, fmt.Errorf("--timeout %v elapsed", o.FollowTimeout))
		defer cancel()
	}
	if o.UseTasks && o.Listen != nil {
		done, err := listenUntilSettled(ctx, o.Listen, rep, progress, log)
		if done {
			rep.Via = methodListen
			rep.OK = true
			for _, r := range rep.Nodes {
				rep.OK = rep.OK && r.State == "completed"
			}
			return rep, nil
		}
		if ctx.Err() != nil {
			return nil, stopped(ctx, rep)
		}
		log.Info("cannot wait on notifications; polling tasks/get instead", "err", err)
	}
	log.Debug("following", "via", rep.Via, "poll", poll)
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	// Every node is read at least once after creation: a task handle for a
	// node that had already finished (a re-run) carries no result.
	settled := make([]bool, len(rep.Nodes))
	for {
		open := 0
		for i := range rep.Nodes {
			r := &rep.Nodes[i]
			if settled[i] {
				continue
			}
			before := *r
			if err := f.poll(ctx, r); err != nil {
				if ctx.Err() != nil {
					return nil, stopped(ctx, rep)
				}
				return nil, fmt.Errorf("follow node %s (task %s): %w", r.NodeID, r.TaskID, err)
			}
			if r.State != before.State || r.Status != before.Status {
				fmt.Fprintf(progress, "%s: %s: %s\n", r.NodeID, r.State, r.Status)
			}
			if settled[i] = r.terminal(); !settled[i] {
				open++
			}
		}
		if open == 0 {
			break
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return nil, stopped(ctx, rep)
		}
	}
	rep.OK = true
	for _, r := range rep.Nodes {
		rep.OK = rep.OK && r.State == "completed"
	}
	return rep, nil
}

// maxListens bounds the streams listenUntilSettled opens: a stream the
// server ends (it fell behind, or the server restarted) is opened again,
// and the new one starts with every task's current state.
const maxListens = 5

// listenUntilSettled follows every node of rep over subscriptions/listen
// until each has finished (true), or gives up with why: the server refused
// the stream, ctx ended, or streams kept ending.
func listenUntilSettled(ctx context.Context, listen listenFunc, rep *Report, progress io.Writer, log *slog.Logger) (bool, error) {
	ids := make([]string, len(rep.Nodes))
	for i, r := range rep.Nodes {
		ids[i] = r.TaskID
	}
	settled := func() bool {
		for _, r := range rep.Nodes {
			if !r.terminal() {
				return false
			}
		}
		return true
	}
	var err error
	for range maxListens {
		lctx, cancel := context.WithCancel(ctx)
		err = listen(lctx, ids, func(t taskResult) {
			for i := range rep.Nodes {
				r := &rep.Nodes[i]
				if r.TaskID != t.TaskID {
					continue
				}
				before := *r
				t.apply(r)
				if r.State != before.State || r.Status != before.Status {
					fmt.Fprintf(progress, "%s: %s: %s\n", r.NodeID, r.State, r.Status)
				}
			}
			if settled() {
				cancel() // every node finished: close the stream
			}
		})
		cancel()
		if settled() {
			return true, nil
		}
		if errors.Is(err, errListenRefused) || ctx.Err() != nil {
			return false, err
		}
		log.Info("the listen stream ended; listening again (the new stream starts with every task's current state)", "err", err)
	}
	return false, err
}

// stopped explains giving up on following: the nodes are unaffected.
func stopped(ctx context.Context, rep *Report) error {
	open := 0
	for _, r := range rep.Nodes {
		if !r.terminal() {
			open++
		}
	}
	return fmt.Errorf("stopped following with %d of %d nodes unfinished (they keep running; watch them with: graph-engineering-mcp workflow watch %s): %w",
		open, len(rep.Nodes), rep.WorkflowID, context.Cause(ctx))
}

// payloadFor is a node's payload: its name, and what the flags ask the
// worker to simulate.
func payloadFor(o Options, n node) map[string]any {
	p := map[string]any{"node": n.ID}
	if o.SleepMs > 0 {
		p["sleep_ms"] = o.SleepMs
	}
	if n.ID == o.FailNode {
		p["fail"] = fmt.Sprintf("node %s failed on purpose (submit --fail %s)", n.ID, n.ID)
		if o.FailRetryable {
			p["fail_retryable"] = true
		}
	}
	return p
}

// after is the " after b,c" of a progress line about n ("" without
// dependencies).
func after(n node) string {
	if len(n.DependsOn) == 0 {
		return ""
	}
	return " after " + strings.Join(n.DependsOn, ",")
}

// nodeArgs are n's arguments of graph_task_create (without workflow_id).
func nodeArgs(o Options, n node) map[string]any {
	args := map[string]any{"node_id": n.ID, "payload": payloadFor(o, n), "max_attempts": o.MaxAttempts}
	if len(n.DependsOn) > 0 {
		args["depends_on"] = n.DependsOn
	}
	if len(n.Requires) > 0 {
		args["requires"] = n.Requires
	}
	return args
}

// createGraph creates the whole diamond in one graph_task_create with
// nodes and returns each node's first report, in the order of diamond.
func createGraph(ctx context.Context, cs *mcp.ClientSession, o Options) ([]NodeReport, error) {
	nodes := make([]any, len(diamond))
	for i, n := range diamond {
		nodes[i] = nodeArgs(o, n)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: mcpclient.ToolCreate, Arguments: map[string]any{"workflow_id": o.Workflow, "nodes": nodes}})
	if err != nil {
		return nil, fmt.Errorf("create the workflow's %d nodes (all or none; run submit again with --workflow %s to retry): %w", len(diamond), o.Workflow, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("create the workflow: the server refused it, and created none of its nodes: %s (a workflow id that already holds different nodes needs a new --workflow)", mcpclient.TextOf(res.Content))
	}
	var out struct {
		Nodes []struct {
			NodeID string `json:"node_id"`
			TaskID string `json:"task_id"`
			State  string `json:"state"`
		} `json:"nodes"`
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil || len(out.Nodes) != len(diamond) {
		return nil, fmt.Errorf("create the workflow: the answer does not list its %d nodes (%v); is this a graph-engineering server that takes nodes?", len(diamond), err)
	}
	reps := make([]NodeReport, len(out.Nodes))
	for i, n := range out.Nodes {
		reps[i] = NodeReport{NodeID: n.NodeID, TaskID: n.TaskID, State: n.State}
	}
	return reps, nil
}

// create creates one node and returns its first report and, for a task
// handle, the server's suggested poll interval.
func create(ctx context.Context, cs *mcp.ClientSession, o Options, n node) (NodeReport, time.Duration, error) {
	args := nodeArgs(o, n)
	args["workflow_id"] = o.Workflow
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cctx, raw := withRawResult(cctx)
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: mcpclient.ToolCreate, Arguments: args})
	if err != nil {
		return NodeReport{}, 0, fmt.Errorf("create node %s: %w", n.ID, err)
	}
	if res.IsError {
		return NodeReport{}, 0, fmt.Errorf("create node %s: the server refused it: %s (a workflow id that already holds different nodes needs a new --workflow)", n.ID, mcpclient.TextOf(res.Content))
	}
	// A task handle (Tasks extension declared and offered) is recorded raw;
	// an ordinary result carries the task in its structured content.
	if b := raw.Bytes(); b != nil {
		var h taskResult
		if err := json.Unmarshal(b, &h); err != nil {
			return NodeReport{}, 0, fmt.Errorf("create node %s: decode the result: %w", n.ID, err)
		}
		if h.ResultType == "task" {
			if h.TaskID == "" {
				return NodeReport{}, 0, fmt.Errorf("create node %s: a task handle without taskId", n.ID)
			}
			r := NodeReport{NodeID: n.ID, TaskID: h.TaskID}
			h.apply(&r)
			return r, time.Duration(h.PollIntervalMs) * time.Millisecond, nil
		}
	}
	var out mcpclient.Result
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil || out.Task == nil {
		return NodeReport{}, 0, fmt.Errorf("create node %s: neither a task handle nor a task in the result; is this a graph-engineering server?", n.ID)
	}
	r := NodeReport{NodeID: n.ID, TaskID: out.Task.TaskID}
	applyTask(*out.Task, &r)
	return r, 0, nil
}

// callTimeout bounds each request.
const callTimeout = 30 * time.Second

// inspectFollower polls graph_task_inspect: the core tools only.
type inspectFollower struct{ cs *mcp.ClientSession }

func (f inspectFollower) poll(ctx context.Context, r *NodeReport) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var out mcpclient.Result
	if err := mcpclient.CallTool(cctx, f.cs, mcpclient.ToolInspect, map[string]any{"task_id": r.TaskID}, &out); err != nil {
		return err
	}
	if out.Task == nil {
		return errors.New("graph_task_inspect returned no task")
	}
	applyTask(*out.Task, r)
	return nil
}

// applyTask copies a graph task's state into a report.
func applyTask(t mcpclient.Task, r *NodeReport) {
	r.State, r.Status, r.Result = t.State, t.StatusMessage, nil
	if t.State == "completed" {
		r.Result = t.Result
	}
	if t.State == "failed" && t.Error != nil {
		r.Error = *t.Error
	}
}

// printReport writes the final table.
func printReport(w io.Writer, rep *Report) {
	done := 0
	for _, r := range rep.Nodes {
		if r.State == "completed" {
			done++
		}
	}
	fmt.Fprintf(w, "workflow %s finished: %d of %d nodes completed\n", rep.WorkflowID, done, len(rep.Nodes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rep.Nodes {
		var detail string
		switch r.State {
		case "completed":
			detail = "result " + string(r.Result)
		case "failed":
			detail = "error: " + r.Error
		default:
			detail = r.Status
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.NodeID, r.TaskID, r.State, detail)
	}
	tw.Flush()
}
