package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/examples/internal/e2e"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// block is a fenced code block of README.md.
type block struct {
	lang  string
	lines []string
	line  int // where it starts in the file
}

// marker is the block's first line when it is a comment, e.g. "# tested".
func (b block) marker() string {
	if len(b.lines) > 0 && strings.HasPrefix(b.lines[0], "# ") {
		return strings.TrimPrefix(b.lines[0], "# ")
	}
	return ""
}

func readmeBlocks(t *testing.T) []block {
	t.Helper()
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```"), line: n}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("README.md: the block at line %d is not closed", cur.line)
	}
	return blocks
}

var buildLine = regexp.MustCompile(`^go build -o bin/ ((?:\./\S+ ?)+)$`)

// The README's commands, run as written: its build block (into a temporary
// bin/), then every block marked "# tested", in order, in one temporary
// directory, each with sh -e. A block fails on a non-zero exit or when its
// output lacks an "# expect:" text.
func TestREADMECommands(t *testing.T) {
	blocks := readmeBlocks(t)
	bin := t.TempDir()
	built := false
	work := t.TempDir()
	tested := 0
	for _, b := range blocks {
		if b.lang != "sh" {
			continue
		}
		switch m := b.marker(); {
		case strings.HasPrefix(m, "build"):
			if len(b.lines) != 3 || b.lines[2] != `export PATH="$PWD/bin:$PATH"` {
				t.Fatalf("README.md:%d: the build block must be the go build line and the PATH export: %q", b.line, b.lines)
			}
			sub := buildLine.FindStringSubmatch(b.lines[1])
			if sub == nil {
				t.Fatalf("README.md:%d: unexpected build line %q", b.line, b.lines[1])
			}
			// The same command with bin/ in a temporary directory.
			if err := e2e.GoBuild(bin, nil, strings.Fields(sub[1])...); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"graph-engineering-mcp", "worker", "submit"} {
				if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
					t.Fatalf("the README's build does not produce %s: %v", name, err)
				}
			}
			built = true
		case m == "tested":
			tested++
			if !built {
				t.Fatalf("README.md:%d: a tested block before the build block", b.line)
			}
			runBlock(t, b, bin, work)
		case m == "tested: needs serve --http":
			tested++
			t.Run("line"+strconv.Itoa(b.line), func(t *testing.T) {
				if l, err := net.Listen("tcp", "127.0.0.1:7330"); err != nil {
					t.Skipf("port 7330 is in use: %v", err)
				} else {
					l.Close()
				}
				runBlock(t, b, bin, work)
			})
		case m != "":
			t.Errorf("README.md:%d: unknown block marker %q", b.line, m)
		}
	}
	if tested < 5 {
		t.Fatalf("only %d tested blocks in README.md", tested)
	}
}

// runBlock runs a block with sh -e in work with bin first on PATH, in its own
// process group so that background jobs it leaves behind are killed.
func runBlock(t *testing.T, b block, bin, work string) {
	t.Helper()
	script := strings.Join(b.lines, "\n") + "\n"
	ctx, cancel := testwait.Bound(t, context.Background()) // a hang fails the test at its deadline
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-e", "-c", script)
	cmd.Dir = work
	cmd.Env = append(withoutEnv(os.Environ(), "GRAPH_ENGINEERING_"), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers, if any
	}
	if err != nil {
		t.Fatalf("README.md:%d: %v\n--- script\n%s--- output\n%s", b.line, err, script, out.String())
	}
	ok := true
	for _, l := range b.lines {
		if want, found := strings.CutPrefix(l, "# expect: "); found && !strings.Contains(out.String(), want) {
			t.Errorf("README.md:%d: the output lacks %q\n--- output\n%s", b.line, want, out.String())
			ok = false
		}
	}
	if ok {
		t.Logf("README.md:%d ok", b.line)
	}
}

func withoutEnv(env []string, prefix string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}

// Every flag of both programs is in the README, and the README names no
// flag they lack.
func TestREADMEDocumentsEveryFlag(t *testing.T) {
	bins := e2e.Build(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	flagRe := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	all := map[string]bool{}
	for _, prog := range []string{bins.Worker, bins.Submit} {
		out, _ := exec.Command(prog, "-h").CombinedOutput()
		names := flagRe.FindAllStringSubmatch(string(out), -1)
		if len(names) < 8 {
			t.Fatalf("%s -h lists %d flags:\n%s", prog, len(names), out)
		}
		for _, m := range names {
			all[m[1]] = true
			if !bytes.Contains(readme, []byte("`--"+m[1])) {
				t.Errorf("README.md does not document %s --%s", filepath.Base(prog), m[1])
			}
		}
	}
	// Flags the README gives the examples (in backticks) must exist.
	for _, m := range regexp.MustCompile("`--([a-z-]+)").FindAllStringSubmatch(string(readme), -1) {
		if !all[m[1]] && m[1] != "disable-tasks-extension" {
			t.Errorf("README.md names --%s, which neither example has", m[1])
		}
	}
}
