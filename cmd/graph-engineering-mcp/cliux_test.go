package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
)

// cmdline runs args (without the program name) in-process with empty stdin.
func cmdline(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{appName}, args...), strings.NewReader(""), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// commandPaths lists every command path of the real CLI, parents first,
// without the help commands.
func commandPaths() [][]string {
	var out [][]string
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Name == "help" {
				continue
			}
			p := append(append([]string(nil), prefix...), c.Name)
			out = append(out, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(strings.NewReader(""), io.Discard, io.Discard).Commands)
	return out
}

// placeholderValue matches a flag shown with urfave/cli's anonymous
// placeholder instead of a name such as MODE or PATH.
var placeholderValue = regexp.MustCompile(`(?m)-[a-z-]+ value\b`)

// TestHelpAtEveryLevel pins that "help PATH", "PARENT help NAME" and
// "PATH --help" print the same text with exit 0 for every command, and that
// every help text fits in helpWidth columns and names its placeholders.
func TestHelpAtEveryLevel(t *testing.T) {
	check := func(what string, r result, want string) {
		t.Helper()
		if r.code != exitOK || r.stdout != want {
			t.Errorf("%s: exit %d, stdout differs from --help (%d vs %d bytes)\nstderr: %s", what, r.code, len(r.stdout), len(want), r.stderr)
		}
	}
	top := cmdline(t, "--help").want(t, exitOK).stdout
	check("help", cmdline(t, "help"), top)
	check("-h", cmdline(t, "-h"), top)
	// --help is global: before a command it is not mistaken for a serve flag.
	if r := cmdline(t, "--help", "tasks").want(t, exitOK); !strings.Contains(r.stdout, appName+" tasks - ") {
		t.Errorf("--help tasks:\n%s", r.stdout)
	}
	texts := map[string]string{"": top}
	paths := commandPaths()
	if len(paths) < 20 {
		t.Fatalf("only %d command paths: %v", len(paths), paths)
	}
	for _, p := range paths {
		name := strings.Join(p, " ")
		ref := cmdline(t, append(p, "--help")...).want(t, exitOK).stdout
		if !strings.Contains(ref, appName+" "+name) {
			t.Errorf("%s --help does not name the command:\n%s", name, ref)
		}
		texts[name] = ref
		check("help "+name, cmdline(t, append([]string{"help"}, p...)...), ref)
		check(name+" help", cmdline(t, append(append([]string(nil), p...), "help")...), ref)
		if len(p) > 1 {
			parent := p[:len(p)-1]
			check(strings.Join(parent, " ")+" help "+p[len(p)-1], cmdline(t, append(append(append([]string(nil), parent...), "help"), p[len(p)-1])...), ref)
			check(strings.Join(parent, " ")+" help", cmdline(t, append(append([]string(nil), parent...), "help")...), texts[strings.Join(parent, " ")])
		}
	}
	for name, text := range texts {
		for i, line := range strings.Split(text, "\n") {
			if n := utf8.RuneCountInString(line); n > helpWidth {
				t.Errorf("help of %q, line %d has %d columns (at most %d):\n%s", name, i+1, n, helpWidth, line)
			}
		}
		// urfave/cli's default usage line of a group (issue 29 item 15).
		if strings.Contains(text, "[command options]") {
			t.Errorf("help of %q shows urfave/cli's \"[command options]\"; give it a usage line:\n%s", name, text)
		}
		if m := placeholderValue.FindString(text); m != "" {
			t.Errorf("help of %q shows the anonymous placeholder %q; name it with backquotes in the usage", name, m)
		}
	}
	// Serve's flags are serve's: the top level lists only the global ones.
	_, global, _ := strings.Cut(top, "GLOBAL OPTIONS:")
	for _, f := range []string{"--http", "--sync", "--log-level", "--profile", "--max-sessions"} {
		if strings.Contains(global, f) {
			t.Errorf("the top-level help lists serve's flag %s as global:\n%s", f, top)
		}
	}
	for name, want := range map[string][]string{
		"":      {"--database PATH", "help COMMAND", "Exit codes: 0 ok, 1 failure, 2 bad usage"},
		"serve": {"--sync MODE", "--log-level LEVEL", "--http ADDR"},
		"bench": {"--mode MODE", "--sync MODE"},
	} {
		for _, w := range want {
			if !strings.Contains(texts[name], w) {
				t.Errorf("help of %q lacks %q:\n%s", name, w, texts[name])
			}
		}
	}
}

// TestTyposSuggestTheNearestName pins the "did you mean" on mistyped
// commands and flags, at every level, and that each is a usage error.
func TestTyposSuggestTheNearestName(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tsks", "list"}, `unknown command "tsks"; did you mean "tasks"?`},
		{[]string{"help", "wrkflow"}, `unknown command "wrkflow"; did you mean "workflow"?`},
		{[]string{"tasks", "lst"}, `unknown command "lst" for tasks; did you mean "list"?`},
		{[]string{"help", "tasks", "shw"}, `unknown command "shw" for tasks; did you mean "show"?`},
		{[]string{"skills", "chek"}, `unknown command "chek" for skills; did you mean "check"?`},
		{[]string{"admin", "reque", "X"}, `did you mean "requeue"?`},
		{[]string{"serve", "--htp", "x"}, "unknown flag --htp for graph-engineering-mcp serve; did you mean --http?"},
		{[]string{"--htp", "x"}, "did you mean --http?"},
		{[]string{"bench", "--mdoe", "http"}, "did you mean --mode?"},
		// Flags after the arguments are parsed by the command itself.
		{[]string{"admin", "requeue", "X", "--reasn", "y"}, "unknown flag --reasn for graph-engineering-mcp admin requeue; did you mean --reason?"},
		{[]string{"tasks", "list", "--sate", "failed"}, "did you mean --state?"},
	} {
		r := cmdline(t, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, exitUsage, tc.want)
		}
	}
	// A command without subcommands: "COMMAND help X" is a usage error too.
	if r := cmdline(t, "serve", "help", "foo").want(t, exitUsage); !strings.Contains(r.stderr, `serve has no subcommands (got "foo")`) {
		t.Errorf("serve help foo: %s", r.stderr)
	}
	// Nothing close: no suggestion, still a usage error naming the commands.
	r := cmdline(t, "frobnicate").want(t, exitUsage)
	if strings.Contains(r.stderr, "did you mean") || !strings.Contains(r.stderr, "the commands are: admin") {
		t.Errorf("frobnicate: %s", r.stderr)
	}
}

// TestServeFlagsAreNotGlobal pins that a serve flag before another command
// is a usage error instead of being silently ignored, that the global
// --database still works before a command, that the bare command still
// takes serve's flags, and that serve's environment variables do not count
// as flags given before a command.
func TestServeFlagsAreNotGlobal(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	for _, args := range [][]string{
		{"--http", ":9999", "tasks", "list"},
		{"--sync=normal", "tasks", "list"},
		{"--log-level", "debug", "serve"},
		{"--disable-tasks-extension", "manifest"},
	} {
		r := e.cliCtx(e.ctx, "", append(args, "--database", e.path)...).want(t, exitUsage)
		flag := strings.SplitN(strings.TrimLeft(args[0], "-"), "=", 2)[0]
		if !strings.Contains(r.stderr, "--"+flag+" is a flag of serve and goes after the command name") {
			t.Errorf("%q: %s", args, r.stderr)
		}
	}
	if r := e.cliCtx(e.ctx, "", "--database", e.path, "version").want(t, exitUsage); !strings.Contains(r.stderr, "does not take --database") {
		t.Errorf("--database before version: %s", r.stderr)
	}
	if r := e.cliCtx(e.ctx, "", "--database", e.path, "tasks", "list", "--json").want(t, exitOK); !strings.Contains(r.stdout, "fetch") {
		t.Errorf("--database before tasks list did not read the database:\n%s", r.stdout)
	}
	// The bare command serves stdio with serve's flags (stdin is empty: it
	// returns at once).
	e.cliCtx(e.ctx, "", "--database", e.path, "--sync", "normal", "--log-level", "warn").want(t, exitOK)
	t.Setenv("GRAPH_ENGINEERING_SYNC", "normal")
	t.Setenv("GRAPH_ENGINEERING_LOG_LEVEL", "debug")
	e.cli("", "tasks", "list").want(t, exitOK)
}

// TestEveryCommandRefusesAnUnknownFlag pins the documented exit code 2 for
// an unknown flag on every command, with the command named in the message.
func TestEveryCommandRefusesAnUnknownFlag(t *testing.T) {
	for _, p := range append(commandPaths(), nil, []string{"help"}) {
		r := cmdline(t, append(append([]string(nil), p...), "--no-such-flag")...)
		where := strings.TrimSpace(appName + " " + strings.Join(p, " "))
		if r.code != exitUsage || !strings.Contains(r.stderr, "unknown flag --no-such-flag for "+where) {
			t.Errorf("%q --no-such-flag: exit %d, want %d naming %q\nstderr: %s", p, r.code, exitUsage, where, r.stderr)
		}
	}
}
