package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestMCPDocumentsEveryFlag keeps MCP.md's command-line section true: every
// command, flag and environment variable of the real CLI must be named there.
func TestMCPDocumentsEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../MCP.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	app := newApp(strings.NewReader(""), io.Discard, io.Discard)
	var walk func(path string, flags []cli.Flag, cmds []*cli.Command)
	walk = func(path string, flags []cli.Flag, cmds []*cli.Command) {
		for _, f := range flags {
			for _, name := range f.Names() {
				if name == "help" || name == "h" || name == "version" || name == "v" || len(name) == 1 || name == "db" {
					continue
				}
				if !strings.Contains(doc, "`--"+name) {
					t.Errorf("MCP.md does not document the flag --%s of %q", name, path)
				}
			}
			if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
				for _, e := range ev.GetEnvVars() {
					if !strings.Contains(doc, "`"+e+"`") {
						t.Errorf("MCP.md does not document the environment variable %s of %q", e, path)
					}
				}
			}
		}
		for _, c := range cmds {
			if c.Hidden {
				continue // "COMMAND help": documented once for all commands
			}
			p := strings.TrimSpace(path + " " + c.Name)
			if !strings.Contains(doc, p) {
				t.Errorf("MCP.md does not mention the command %q", p)
			}
			walk(p, c.Flags, c.Subcommands)
		}
	}
	walk("", app.Flags, app.Commands)
}
