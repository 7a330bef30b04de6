// Command worker is an example graph-engineering worker on the go-sdk MCP
// client. It loops: claim the next ready task (waiting up to --wait-ms), run
// a handler while heartbeating every third of the lease, then complete or
// fail the task; a completion also claims the next ready task in the same
// call (claim_next), so the claim with a wait is needed only when none was
// ready. A heartbeat refused as a stale claim stops the work at once and the
// task is never written to again.
//
// The default handler runs no commands: it echoes the payload as
// {"echo": payload, "worker": owner}, after payload.sleep_ms milliseconds,
// or fails with payload.fail (retryably with payload.fail_retryable).
//
// SIGINT or SIGTERM stops claiming; the task in hand may finish within
// --grace, after which its claim is released (graph_task_cancel with
// release: true) so another worker can take it without the attempt being
// counted. The worker then exits 0. A second signal exits at once.
//
// A claimed task's dependencies come with the claim: the handler sees each
// upstream node's result (Task.Upstream), and the default handler adds them
// to its result.
//
// --capabilities (or the environment variable GRAPH_WORKER_CAPABILITIES when
// the flag is absent) lists the tags the worker advertises on every claim,
// comma-separated; default "echo", what the default handler does. The
// server gives it only tasks whose requires are among them; "" advertises
// none (only tasks that require nothing).
//
// Usage:
//
//	worker [flags] [-- server command...]
//	worker --owner w1 --server-cmd "graph-engineering-mcp serve --database tasks.db"
//	worker --owner w1 --url http://127.0.0.1:7330/mcp --token "$TOKEN"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
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

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run parses args, connects and works tasks until a signal or --max-tasks;
// it returns the exit code.
func run(args []string, stderr io.Writer) int {
	stderr = mcpclient.LockedWriter(stderr)
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	owner := fs.String("owner", "", "owner name on every claim, unique per worker; must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$ (default <hostname>-<pid>)")
	workflow := fs.String("workflow", "", "claim only tasks of this workflow (default any workflow)")
	leaseMs := fs.Int("lease-ms", 30000, "lease duration in milliseconds (1000..900000); heartbeats go every third of it")
	waitMs := fs.Int("wait-ms", 5000, "how long one claim waits for a ready task, in milliseconds (0..30000); also bounds how long an idle worker takes to stop")
	maxTasks := fs.Int("max-tasks", 0, "exit after working this many tasks (0 = run until SIGINT/SIGTERM)")
	grace := fs.Duration("grace", 10*time.Second, "on SIGINT/SIGTERM, how long the task in hand may keep running before its claim is released for another worker")
	logLevel := fs.String("log-level", "info", "log level on stderr: debug, info, warn or error")
	capsDefault, ok := os.LookupEnv(CapabilitiesEnv)
	if !ok {
		capsDefault = "echo"
	}
	capsFlag := fs.String("capabilities", capsDefault, "comma-separated capability tags advertised on every claim (each ^[a-z][a-z0-9_.-]{0,63}$, at most 64): only tasks whose requires are among them are given to this worker; \"\" for none (default from "+CapabilitiesEnv+", else echo)")
	conn := mcpclient.AddFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: worker [flags] [-- server command...]\n\nClaims, heartbeats and completes graph-engineering tasks. Flags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usage := func(err error) int {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return exitUsage
	}
	if *owner == "" {
		*owner = defaultOwner()
	}
	if err := checkOwner(*owner); err != nil {
		return usage(err)
	}
	if *leaseMs < 1000 || *leaseMs > 900000 {
		return usage(fmt.Errorf("--lease-ms must be between 1000 and 900000 (got %d)", *leaseMs))
	}
	if *waitMs < 0 || *waitMs > 30000 {
		return usage(fmt.Errorf("--wait-ms must be between 0 and 30000 (got %d)", *waitMs))
	}
	if *maxTasks < 0 {
		return usage(fmt.Errorf("--max-tasks must be 0 or more (got %d)", *maxTasks))
	}
	if *grace < 0 {
		return usage(fmt.Errorf("--grace must not be negative (got %v)", *grace))
	}
	caps, err := parseCapabilities(*capsFlag)
	if err != nil {
		return usage(err)
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
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("owner", *owner)

	stop, requestStop := context.WithCancel(context.Background())
	defer requestStop()
	finished := make(chan struct{})
	defer close(finished)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			log.Info("signal: claiming no more tasks; the task in hand may finish within the grace period", "signal", s.String(), "grace", *grace)
			requestStop()
		case <-finished:
			return
		}
		select {
		case s := <-sigs:
			log.Warn("second signal: exiting now; a task in hand stays claimed until its lease expires, then another worker takes it", "signal", s.String())
			os.Exit(exitFailure)
		case <-finished:
		}
	}()

	client := mcp.NewClient(&mcp.Implementation{Name: "graph-engineering-example-worker", Version: "1.0.0"}, nil)
	cs, err := mcpclient.Connect(stop, client, endpoint, endpoint.Transport(), 30*time.Second)
	if err != nil {
		if stop.Err() != nil {
			log.Info("stopped before connecting")
			return exitOK
		}
		log.Error("cannot start", "err", err)
		return exitFailure
	}
	log.Info("connected", "server", endpoint.String(), "protocol", cs.InitializeResult().ProtocolVersion)
	runErr := Run(stop, cs, Config{
		Owner: *owner, Workflow: *workflow, Capabilities: caps, Lease: time.Duration(*leaseMs) * time.Millisecond,
		Wait: time.Duration(*waitMs) * time.Millisecond, MaxTasks: *maxTasks, Grace: *grace, Logger: log,
	})
	if err := cs.Close(); err != nil && runErr == nil {
		log.Warn("closing the connection", "err", err)
	}
	if runErr != nil {
		log.Error("worker failed", "err", runErr)
		return exitFailure
	}
	return exitOK
}
