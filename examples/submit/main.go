// Command submit is an example graph-engineering client on the go-sdk MCP
// client. It creates a diamond workflow (a → b, a → c, {b, c} → d) and
// follows it until every node has finished, then prints each node's final
// state and result. It exits 0 when all four completed, 1 when any failed or
// was cancelled (or it could not follow them), 2 on bad usage. A downstream
// node's worker gets its upstream nodes' results with the claim: with the
// example worker, d's result carries b's and c's, which carry a's.
//
// With the Tasks extension (io.modelcontextprotocol/tasks) declared and
// offered, graph_task_create returns a task handle and submit follows it with
// tasks/get; with --no-tasks, or when the server does not offer the
// extension, it polls graph_task_inspect.
//
// Usage:
//
//	submit [flags] [-- server command...]
//	submit --server-cmd "graph-engineering-mcp serve --database tasks.db"
//	submit --fail b --url http://127.0.0.1:7330/mcp --token "$TOKEN"
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/mcpclient"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// idPattern is the server's identifier rule (MCP.md §3).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, submits and follows the workflow, and returns the exit
// code. Progress and the final table go to stdout, logs to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	stderr = mcpclient.LockedWriter(stderr)
	fs := flag.NewFlagSet("submit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workflow := fs.String("workflow", "", `workflow id to create (default "diamond-<UTC timestamp>"); re-running with the same id and flags follows the existing workflow`)
	sleepMs := fs.Int64("sleep-ms", 0, "payload.sleep_ms of every node: how long the example worker pretends to work, in milliseconds")
	failNode := fs.String("fail", "", "node (a, b, c or d) whose payload asks the worker to fail it; its dependents are then cancelled")
	failRetryable := fs.Bool("fail-retryable", false, "make the --fail failure retryable, so the node is retried up to --max-attempts times")
	maxAttempts := fs.Int("max-attempts", 3, "max_attempts of every node (1..100)")
	noTasks := fs.Bool("no-tasks", false, "do not use the Tasks extension: follow the nodes by polling graph_task_inspect")
	noListen := fs.Bool("no-listen", false, "with the Tasks extension over --url: poll tasks/get instead of waiting on notifications (subscriptions/listen)")
	poll := fs.Duration("poll", 0, "polling interval (default the server's pollIntervalMs for tasks/get, 1s for graph_task_inspect)")
	timeout := fs.Duration("timeout", 0, "give up following after this long once every node is created (0 = no limit); the workflow keeps running")
	asJSON := fs.Bool("json", false, "print the final report as one JSON object on stdout, and progress on stderr")
	logLevel := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")
	conn := mcpclient.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: submit [flags] [-- server command...]\n\nCreates a diamond workflow (a → b, a → c, {b,c} → d) and follows it to the end. Flags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usage := func(err error) int {
		fmt.Fprintf(stderr, "submit: %v\n", err)
		return exitUsage
	}
	if *workflow == "" {
		*workflow = "diamond-" + time.Now().UTC().Format("20060102T150405.000Z")
	}
	if !idPattern.MatchString(*workflow) {
		return usage(fmt.Errorf("--workflow must match %s (got %q)", idPattern, *workflow))
	}
	if *sleepMs < 0 || *sleepMs > time.Hour.Milliseconds() {
		return usage(fmt.Errorf("--sleep-ms must be between 0 and %d (got %d)", time.Hour.Milliseconds(), *sleepMs))
	}
	if *failNode != "" && !slices.ContainsFunc(diamond, func(n node) bool { return n.ID == *failNode }) {
		return usage(fmt.Errorf("--fail must name a node of the diamond: a, b, c or d (got %q)", *failNode))
	}
	if *failRetryable && *failNode == "" {
		return usage(errors.New("--fail-retryable needs --fail NODE"))
	}
	if *maxAttempts < 1 || *maxAttempts > 100 {
		return usage(fmt.Errorf("--max-attempts must be between 1 and 100 (got %d)", *maxAttempts))
	}
	if *poll < 0 || *timeout < 0 {
		return usage(errors.New("--poll and --timeout must not be negative"))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usage(fmt.Errorf("--log-level must be debug, info, warn or error (got %q)", *logLevel))
	}
	endpoint, err := conn.Endpoint(fs.Args())
	if err != nil {
		return usage(err)
	}
	endpoint.ServerStderr = stderr
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	progress := stdout
	if *asJSON {
		progress = stderr
	}

	// Declaring the extension is what makes graph_task_create return a task
	// handle; the transport then records raw results to read it (capture.go).
	opts := &mcp.ClientOptions{}
	transport := endpoint.Transport()
	if !*noTasks {
		opts.Capabilities = tasksCapabilities()
		transport = recordingTransport{inner: transport}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "graph-engineering-example-submit", Version: "1.0.0"}, opts)
	if !*noTasks {
		if err := registerTasksGet(client); err != nil {
			log.Error("cannot start", "err", err)
			return exitFailure
		}
	}
	cs, err := mcpclient.Connect(ctx, client, endpoint, transport, 30*time.Second)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitFailure
	}
	defer func() {
		if err := cs.Close(); err != nil {
			log.Warn("closing the connection", "err", err)
		}
	}()
	useTasks := !*noTasks
	if useTasks && !offersTasks(cs) {
		log.Info("the server does not offer the Tasks extension; polling graph_task_inspect instead", "server", endpoint.String())
		useTasks = false
	}
	// Over HTTP the submitter waits on notifications (subscriptions/listen);
	// over stdio the SDK owns the pipe, which cannot carry them, so it polls.
	var listener listenFunc
	if useTasks && !*noListen && endpoint.URL != "" {
		listener = httpListener(endpoint)
	}
	rep, err := Submit(ctx, cs, Options{
		Workflow: *workflow, SleepMs: *sleepMs, FailNode: *failNode, FailRetryable: *failRetryable,
		MaxAttempts: *maxAttempts, UseTasks: useTasks, Poll: *poll, FollowTimeout: *timeout, Progress: progress, Logger: log,
		Listen: listener,
	})
	if err != nil {
		log.Error("submit failed", "workflow", *workflow, "err", err)
		return exitFailure
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(rep); err != nil {
			log.Error("write the report", "err", err)
			return exitFailure
		}
	} else {
		printReport(stdout, rep)
	}
	if !rep.OK {
		return exitFailure
	}
	return exitOK
}

// offersTasks reports whether the server advertised the Tasks extension
// (only 2026-07-28 sessions can: the extension does not exist in the legacy
// handshake).
func offersTasks(cs *mcp.ClientSession) bool {
	ir := cs.InitializeResult()
	if ir == nil || ir.Capabilities == nil {
		return false
	}
	_, ok := ir.Capabilities.Extensions[mcpclient.TasksExtension]
	return ok
}
