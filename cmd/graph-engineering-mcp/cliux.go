package main

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"
)

// This file makes the command line read like the Go tools a user already
// knows (go, kubectl, gh):
//
//   - "help", "help COMMAND [SUBCOMMAND]" and "COMMAND help [SUBCOMMAND]"
//     print exactly what --help prints, at every level;
//   - a mistyped command or flag is a usage error (exit 2) with a
//     "did you mean" suggestion;
//   - serve's flags belong to serve: the bare command still takes them (it
//     serves stdio, like serve), but one given before another command is a
//     usage error instead of being silently ignored, and the top-level help
//     lists only the global flags;
//   - every help text is wrapped to helpWidth columns.

// helpWidth is the widest line any help text prints.
const helpWidth = 100

// globalFlags are the flags the top level shows in its help and accepts
// before a command name. Every other top-level flag is one of serve's.
var globalFlags = []string{"database"}

// repeatedFlag matches the " [ --name VALUE ]" urfave/cli appends to a
// repeatable flag's names in help; the usage text says it repeats.
var repeatedFlag = regexp.MustCompile(` \[ -[^\]\t]* \]`)

func init() {
	cli.HelpPrinter = func(w io.Writer, templ string, data any) {
		var buf bytes.Buffer
		cli.HelpPrinterCustom(&buf, templ, data, nil)
		_, _ = io.WriteString(w, wrapHelp(buf.String(), helpWidth))
	}
	stringify := cli.FlagStringer
	cli.FlagStringer = func(f cli.Flag) string {
		return repeatedFlag.ReplaceAllString(stringify(f), "")
	}
}

// polishApp adds the help commands, the suggestions and the scoping of
// serve's flags to app; newApp calls it once the commands are in place.
func polishApp(app *cli.App) {
	for _, f := range app.Flags {
		if !slices.Contains(globalFlags, f.Names()[0]) {
			hideFlag(f)
		}
	}
	bare := app.Action
	app.Action = func(c *cli.Context) error {
		if c.Args().Present() {
			return unknownCommand(c.Args().First(), "", app.Commands)
		}
		return bare(c)
	}
	app.Commands = append(app.Commands, helpCommand(nil))
	// urfave/cli adds --help to the top level only when it adds its own
	// help command.
	app.Flags = append(app.Flags, cli.HelpFlag)
	for _, c := range app.Commands {
		polishGroups(c, []string{c.Name})
	}
}

// polishGroups gives every command a hidden help subcommand in place of
// urfave/cli's (whose "COMMAND help X" exits 3, an undocumented code), and
// every command that groups subcommands a "did you mean" for a mistyped one.
func polishGroups(c *cli.Command, path []string) {
	c.HideHelpCommand = true
	h := helpCommand(path)
	h.Hidden = true
	defer func() { c.Subcommands = append(c.Subcommands, h) }()
	if len(c.Subcommands) == 0 {
		return
	}
	if c.UsageText == "" {
		// urfave/cli would print "NAME [command options]", though a group
		// takes a command, not options.
		c.UsageText = strings.Join(append([]string{appName}, path...), " ") + " COMMAND [ARGUMENTS...] [OPTIONS]"
	}
	for _, sc := range c.Subcommands {
		polishGroups(sc, append(slices.Clip(path), sc.Name))
	}
	group := c.Action
	if group == nil {
		group = groupAction
	}
	c.Action = func(ctx *cli.Context) error {
		if ctx.Args().Present() {
			return unknownCommand(ctx.Args().First(), strings.Join(path, " "), c.Subcommands)
		}
		return group(ctx)
	}
}

// helpCommand is "help [COMMAND...]" under the command at path (nil: the
// top level). It prints what "PATH COMMAND... --help" prints.
func helpCommand(path []string) *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show help for a command (the same as --help)",
		UsageText: strings.Join(append(append([]string{appName}, path...), "help [COMMAND [SUBCOMMAND]]"), " "),
		Action: func(c *cli.Context) error {
			cmds, where := c.App.Commands, path
			for _, name := range path {
				cmds = findCommand(cmds, name).Subcommands
			}
			for _, name := range c.Args().Slice() {
				sc := findCommand(cmds, name)
				if sc == nil {
					return unknownCommand(name, strings.Join(where, " "), cmds)
				}
				where, cmds = append(slices.Clip(where), name), sc.Subcommands
			}
			app := newApp(c.App.Reader, c.App.Writer, c.App.ErrWriter)
			return app.RunContext(c.Context, append(append([]string{appName}, where...), "--help"))
		},
	}
}

// appName is the program name help texts and suggestions use.
const appName = "graph-engineering-mcp"

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// unknownCommand is the usage error for a word that names no command under
// parent ("" is the top level), with a suggestion when one is close.
func unknownCommand(word, parent string, cmds []*cli.Command) error {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	where, helpCmd := "", appName+" help"
	if parent != "" {
		where, helpCmd = " for "+parent, appName+" help "+parent
	}
	if len(names) == 0 {
		return usagef("%s has no subcommands (got %q); see %s", parent, word, helpCmd)
	}
	msg := fmt.Sprintf("unknown command %q%s", word, where)
	if s := closest(word, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return usagef("%s (the commands are: %s; see %s)", msg, strings.Join(names, ", "), helpCmd)
}

// commandAt follows args (without the program name) down the command tree
// as urfave/cli would and returns the command path it names and the flags of
// its last command (the top level's when path is empty). Flag values are
// skipped; the first word that names no command ends the walk.
func commandAt(app *cli.App, args []string) (path []string, flags []cli.Flag) {
	cmds, flags := app.Commands, app.Flags
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if f := findFlag(flags, name); f != nil && takesValue(f) && !hasValue {
				i++
			}
			continue
		}
		sc := findCommand(cmds, a)
		if sc == nil {
			break
		}
		path, cmds, flags = append(path, sc.Name), sc.Subcommands, sc.Flags
	}
	return path, flags
}

func takesValue(f cli.Flag) bool {
	tv, ok := f.(interface{ TakesValue() bool })
	return !ok || tv.TakesValue()
}

// checkGlobalFlags refuses a top-level flag that the command after it does
// not take: serve's flags go after "serve" (urfave/cli would pass them to
// the top level and the command would never see them), and --database only
// before a command that opens a database.
func checkGlobalFlags(app *cli.App, args []string) error {
	var before []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			cmd := findCommand(app.Commands, a)
			if cmd == nil {
				return nil // the bare command's business: an unknown command
			}
			for _, name := range before {
				if !slices.Contains(globalFlags, name) {
					return usagef("--%s is a flag of serve and goes after the command name (%s serve --%s ...); before %q only --%s is accepted",
						name, appName, name, a, strings.Join(globalFlags, ", --"))
				}
				if !treeHasFlag(cmd, name) {
					return usagef("%s %s does not take --%s; leave it out", appName, a, name)
				}
			}
			return nil
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := findFlag(app.Flags, name)
		if f == nil || f == cli.HelpFlag {
			continue // --help, --version, or a mistake urfave/cli reports
		}
		before = append(before, f.Names()[0])
		if takesValue(f) && !hasValue {
			i++
		}
	}
	return nil
}

func treeHasFlag(c *cli.Command, name string) bool {
	if findFlag(c.Flags, name) != nil {
		return true
	}
	for _, sc := range c.Subcommands {
		if treeHasFlag(sc, name) {
			return true
		}
	}
	return false
}

// withFlagSuggestion rewrites the "flag provided but not defined" usage
// error of the command args name into one that names the command and
// suggests the closest flag it does take.
func withFlagSuggestion(app *cli.App, args []string, err error) error {
	const undefined = "flag provided but not defined: "
	msg := err.Error()
	i := strings.Index(msg, undefined)
	if i < 0 {
		return err
	}
	word := strings.TrimLeft(strings.Fields(msg[i+len(undefined):] + " ")[0], "-")
	path, flags := commandAt(app, args)
	var names []string
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) > 1 {
				names = append(names, n)
			}
		}
	}
	names = append(names, "help")
	where := appName
	if len(path) > 0 {
		where += " " + strings.Join(path, " ")
	}
	out := fmt.Sprintf("unknown flag --%s for %s", word, where)
	if s := closest(word, names); s != "" {
		out += fmt.Sprintf("; did you mean --%s?", s)
	}
	return usagef("%s (see %s --help)", out, where)
}

// closest returns the candidate nearest to word, "" when none is close.
// It scores names as urfave/cli's App.Suggest does (Jaro-Winkler from
// xrash/smetrics, with urfave/cli's boost threshold and prefix size), but
// suggests only a candidate scoring at least minSimilarity: App.Suggest
// names the best candidate however far it is, and prints its own template
// into the help text, where these suggestions belong in a usage error that
// names the command.
func closest(word string, candidates []string) string {
	best, bestScore := "", 0.0
	for _, c := range candidates {
		if s := smetrics.JaroWinkler(word, c, 0.7, 4); s > bestScore {
			best, bestScore = c, s
		}
	}
	if bestScore < minSimilarity {
		return ""
	}
	return best
}

// minSimilarity is the Jaro-Winkler similarity from which a name counts
// as close: one or two slips in a short name ("sate" for "state", 0.87)
// pass, an unrelated word ("frobnicate" for "bench", 0.63) does not.
const minSimilarity = 0.8

// hideFlag hides f from the help it is listed in; it keeps working. Every
// urfave/cli v2 flag type has a Hidden field; reflection keeps this true for
// flag types added to serve later.
func hideFlag(f cli.Flag) {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return
	}
	if h := v.Elem().FieldByName("Hidden"); h.IsValid() && h.CanSet() && h.Kind() == reflect.Bool {
		h.SetBool(true)
	}
}

// wrapHelp wraps every line of text longer than width columns at spaces.
// A continuation line is indented to where the line's text column starts:
// after the first gap of two or more spaces (the flag or command column), or
// else four columns deeper than the line itself.
func wrapHelp(text string, width int) string {
	var out strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		nl := strings.HasSuffix(line, "\n")
		line = strings.TrimSuffix(line, "\n")
		indent := hangingIndent(line, width)
		for utf8.RuneCountInString(line) > width {
			cut := breakAt(line, width, indent)
			out.WriteString(strings.TrimRight(line[:cut], " "))
			out.WriteString("\n")
			line = strings.Repeat(" ", indent) + strings.TrimLeft(line[cut:], " ")
		}
		out.WriteString(line)
		if nl {
			out.WriteString("\n")
		}
	}
	return out.String()
}

// hangingIndent is the column continuation lines of line start at.
func hangingIndent(line string, width int) int {
	lead := len(line) - len(strings.TrimLeft(line, " "))
	rest := line[lead:]
	if gap := strings.Index(rest, "  "); gap > 0 {
		col := lead + gap + len(rest[gap:]) - len(strings.TrimLeft(rest[gap:], " "))
		if col < width/2 {
			return utf8.RuneCountInString(line[:col])
		}
	}
	return lead + 4
}

// breakAt returns the byte offset to break line at: the last space within
// width columns that leaves text on both sides, else width columns exactly.
func breakAt(line string, width, indent int) int {
	cols, lastSpace, limit := 0, -1, len(line)
	for i, r := range line {
		if cols == width {
			limit = i
			break
		}
		if r == ' ' && cols > indent {
			lastSpace = i
		}
		cols++
	}
	if lastSpace > 0 {
		return lastSpace
	}
	return limit
}
