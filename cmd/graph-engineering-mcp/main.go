// Command graph-engineering-mcp is the graph-engineering task-graph
// coordination service: an MCP server (serve) plus the human operator
// commands that the model tools deliberately lack.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(stdin, stdout, stderr)
	rest := args[min(1, len(args)):] // without the program name
	err := checkGlobalFlags(app, rest)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	if err == nil {
		return exitOK
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "graph-engineering-mcp: %v\n", withFlagSuggestion(app, rest, err))
		return exitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(stderr, "graph-engineering-mcp: %s\n", msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintf(stderr, "graph-engineering-mcp: %v\n", err)
	return exitFailure
}

// usageError marks a mistake in how the command was called (exit code 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:  "graph-engineering-mcp",
		Usage: "durable task-graph coordination for AI worker agents, over the Model Context Protocol",
		UsageText: `graph-engineering-mcp [--database PATH] COMMAND [ARGUMENTS...] [OPTIONS]
graph-engineering-mcp [serve's options]       (serve MCP over stdio)`,
		Description: `Without a command it serves MCP over stdio, like "serve", and takes serve's
flags (see "graph-engineering-mcp help serve"). Before a command only the global
options below are accepted; every other flag goes after the command it belongs to.

Example:
   graph-engineering-mcp --database ./tasks.db

Run "graph-engineering-mcp help COMMAND" (or COMMAND --help) for a command's flags.
Exit codes: 0 ok, 1 failure, 2 bad usage.`,
		Version:         buildVersion(),
		Reader:          stdin,
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		// Errors are printed once, by run, with the right exit code.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return &usageError{msg: err.Error()}
		},
		Flags:    serveFlags(),
		Action:   serveAction,
		Commands: commands(),
	}
	polishApp(app)
	setUsageErrors(app.Commands)
	return app
}

// setUsageErrors makes flag mistakes in every subcommand exit with code 2.
func setUsageErrors(cmds []*cli.Command) {
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = func(_ *cli.Context, err error, _ bool) error { return &usageError{msg: err.Error()} }
		}
		setUsageErrors(c.Subcommands)
	}
}

// commands lists the subcommands; each lives in its own file.
func commands() []*cli.Command {
	var cmds []*cli.Command
	for _, f := range commandFactories {
		cmds = append(cmds, f()...)
	}
	return cmds
}

// commandFactories is filled by each subcommand file's init, keeping this
// file free of edits when a command is added.
var commandFactories []func() []*cli.Command

func registerCommands(f func() []*cli.Command) { commandFactories = append(commandFactories, f) }
