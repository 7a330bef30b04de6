package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// readmeBlock is a fenced block of README.md with the name of the
// <!-- readme: NAME --> marker before it.
type readmeBlock struct {
	name, lang, body string
}

var readmeMarker = regexp.MustCompile("(?m)^<!-- readme: ([a-z0-9-]+) -->\\n```([a-z]*)\\n((?s).*?)```")

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var out []readmeBlock
	for _, m := range readmeMarker.FindAllStringSubmatch(text, -1) {
		out = append(out, readmeBlock{name: m[1], lang: m[2], body: m[3]})
	}
	// Every command block must be marked, so none escapes this test.
	if n := strings.Count(text, "```sh") + strings.Count(text, "```json"); n != len(out) {
		t.Fatalf("README.md has %d sh/json blocks but %d are marked <!-- readme: NAME -->; mark every command block and teach TestREADME to run it", n, len(out))
	}
	return out
}

// TestREADME runs every command the README shows, in order, against a real
// server: the built binaries stand in for "go run ./cmd/…" and
// "go run ./examples/…", the state folder is a temporary one, and the port is
// a free one. scripts/test, shown as the test command, is what .ci/run runs.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's commands (a server, the examples)")
	}
	t.Parallel()
	bin := builtBinary(t)
	root, _ := filepath.Abs("../..")
	tmp := t.TempDir()
	binDir := filepath.Join(tmp, "bin")
	work := filepath.Join(tmp, "work")
	for _, d := range []string{binDir, work, filepath.Join(tmp, "state"), filepath.Join(tmp, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "graph-engineering-mcp")); err != nil {
		t.Fatal(err)
	}
	for _, ex := range []string{"submit", "worker"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "example-"+ex), "../../examples/"+ex).CombinedOutput(); err != nil {
			t.Fatalf("build examples/%s: %v\n%s", ex, err, out)
		}
	}
	port := freePort(t)
	env := []string{"PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH"), "XDG_STATE_HOME=" + filepath.Join(tmp, "state"),
		"HOME=" + filepath.Join(tmp, "home"), "GOCACHE=" + goEnv(t, "GOCACHE"), "GOMODCACHE=" + goEnv(t, "GOMODCACHE"), "GOPATH=" + goEnv(t, "GOPATH"), "GOFLAGS=" + os.Getenv("GOFLAGS")}
	rewrite := func(s string) string {
		s = strings.ReplaceAll(s, "127.0.0.1:7330", "127.0.0.1:"+port)
		s = strings.ReplaceAll(s, "go run ./cmd/graph-engineering-mcp", "graph-engineering-mcp")
		s = strings.ReplaceAll(s, "go run ./examples/", "example-")
		return s
	}
	shIn := func(dir, name, script, stdin string) string {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		cmd.Stdin = strings.NewReader(stdin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("README block %q failed: %v\n--- script\n%s\n--- output\n%s", name, err, script, out.String())
			}
		case <-testwait.Context(t).Done():
			cmd.Process.Kill()
			t.Fatalf("README block %q did not finish\n%s", name, out.String())
		}
		return out.String()
	}
	sh := func(name, script, stdin string) string {
		t.Helper()
		return shIn(work, name, script, stdin)
	}
	// shEnv runs script with the README's environment (it sets its own
	// variables at its start).
	shEnv := func(name, script string) string {
		t.Helper()
		return shIn(work, name, script, "")
	}
	// clientEnv is what an MCP client gives the server it starts: almost
	// nothing (no XDG_STATE_HOME, no GRAPH_ENGINEERING_DATABASE, no HOME).
	clientEnv := []string{"PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH")}
	var server *exec.Cmd
	defer func() {
		if server != nil {
			server.Process.Signal(syscall.SIGTERM)
			server.Wait()
		}
	}()
	url := "http://127.0.0.1:" + port + "/mcp"
	ctx := testwait.Context(t)
	handshake := func(what string, transport mcp.Transport) {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "1"}, nil).Connect(ctx, transport, nil)
		if err != nil {
			t.Fatalf("%s: connect: %v", what, err)
		}
		defer cs.Close()
		tools, err := cs.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) != 7 {
			t.Fatalf("%s: tools/list: %v", what, err)
		}
	}
	// sharesDatabase creates a task through a client-started stdio server
	// and reads it back through the shell-started HTTP server: they must use
	// the same database.
	sharesDatabase := func(what string, cmd *exec.Cmd) {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("%s: connect: %v", what, err)
		}
		created := readmeCall(t, ctx, cs, manifest.ToolCreate, map[string]any{"workflow_id": "readme-shared", "node_id": strings.ReplaceAll(what, " ", "-")})
		cs.Close()
		id := created["task"].(map[string]any)["task_id"].(string)
		hs, err := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatalf("%s: connect over HTTP: %v", what, err)
		}
		defer hs.Close()
		res, err := hs.CallTool(ctx, &mcp.CallToolParams{Name: manifest.ToolInspect, Arguments: map[string]any{"task_id": id}})
		if err != nil || res.IsError {
			t.Fatalf("%s: the task created through the client-started server is not in the HTTP server's database: %v %+v", what, err, res)
		}
		// Finish it, so the examples' workers below see only their own tasks.
		c := readmeCall(t, ctx, hs, manifest.ToolClaim, map[string]any{"owner": "readme", "task_id": id})["lease"].(map[string]any)
		readmeCall(t, ctx, hs, manifest.ToolComplete, map[string]any{"task_id": id, "owner": "readme", "generation": c["generation"], "claim_token": c["claim_token"], "result": "shared"})
	}
	seen := map[string]bool{}
	for _, blk := range readmeBlocks(t) {
		seen[blk.name] = true
		lines := nonEmptyLines(blk.body)
		switch blk.name {
		case "two-commands":
			want := []string{"go run ./cmd/graph-engineering-mcp serve --http 127.0.0.1:7330", "scripts/test"}
			if strings.Join(lines, "\n") != strings.Join(want, "\n") {
				t.Fatalf("two-commands block changed; update TestREADME:\n%s", blk.body)
			}
			args := strings.Fields(rewrite(lines[0]))
			server = exec.Command(filepath.Join(binDir, args[0]), args[1:]...)
			server.Dir, server.Env = work, env
			var logs testwait.Buffer
			server.Stdout, server.Stderr = &logs, &logs
			if err := server.Start(); err != nil {
				t.Fatal(err)
			}
			waitHealthy(t, "http://127.0.0.1:"+port+"/healthz", &logs)
			// The test command is what CI runs.
			ci, err := os.ReadFile("../../.ci/run")
			if err != nil || !strings.Contains(string(ci), "scripts/test") {
				t.Fatalf(".ci/run does not run scripts/test: %v", err)
			}
		case "stop":
			if lines[0] != "go build -o graph-engineering-mcp ./cmd/graph-engineering-mcp" || len(lines) != 6 || !strings.HasPrefix(lines[1], "./graph-engineering-mcp serve --http 127.0.0.1:7330 &") {
				t.Fatalf("stop block changed; update TestREADME:\n%s", blk.body)
			}
			// The built binary stands in for go build; a second port, since
			// the two-commands server still holds the first.
			stopDir := filepath.Join(tmp, "stop")
			if err := os.MkdirAll(stopDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(bin, filepath.Join(stopDir, "graph-engineering-mcp")); err != nil {
				t.Fatal(err)
			}
			stopPort := freePort(t)
			script := strings.ReplaceAll(strings.SplitN(blk.body, "\n", 2)[1], "127.0.0.1:7330", "127.0.0.1:"+stopPort)
			// bash -e: wait fails the block unless the server exits 0.
			out := shIn(stopDir, blk.name, script, "")
			if !strings.Contains(out, "HTTP server stopped; database closed cleanly") {
				t.Fatalf("the stopped server did not close cleanly:\n%s", out)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:"+stopPort)
			if err != nil {
				t.Fatalf("port %s still held after the stop block: %v", stopPort, err)
			}
			ln.Close()
		case "connect-stdio":
			if lines[0] != "go install ./cmd/graph-engineering-mcp" || !strings.HasPrefix(lines[1], "claude mcp add graph-engineering -- ") {
				t.Fatalf("connect-stdio block changed; update TestREADME:\n%s", blk.body)
			}
			gobin := filepath.Join(tmp, "gobin")
			install := exec.Command("go", "install", "./cmd/graph-engineering-mcp")
			install.Dir, install.Env = root, append(os.Environ(), "GOBIN="+gobin)
			if out, err := install.CombinedOutput(); err != nil {
				t.Fatalf("go install: %v\n%s", err, out)
			}
			// What claude would start: the command after "--", as the shell
			// expands it when the user runs claude mcp add.
			argv := nonEmptyLines(sh(blk.name, "printf '%s\\n' "+strings.SplitN(lines[1], " -- ", 2)[1], ""))
			if len(argv) != 4 || argv[2] != "--database" || argv[3] != filepath.Join(tmp, "state", "graph-engineering", "tasks.db") {
				t.Fatalf("claude mcp add starts %q; want serve --database with the default path", argv)
			}
			cmd := exec.Command(filepath.Join(gobin, argv[0]), argv[1:]...)
			cmd.Env = clientEnv
			handshake("claude mcp add (stdio)", &mcp.CommandTransport{Command: cmd})
			cmd = exec.Command(filepath.Join(gobin, argv[0]), argv[1:]...)
			cmd.Env = clientEnv
			sharesDatabase("claude mcp add", cmd)
		case "connect-http":
			f := strings.Fields(rewrite(lines[0]))
			if len(f) != 7 || f[3] != "--transport" || f[4] != "http" {
				t.Fatalf("connect-http block changed; update TestREADME:\n%s", blk.body)
			}
			handshake("claude mcp add (http)", &mcp.StreamableClientTransport{Endpoint: f[6]})
		case "connect-token":
			// Both lines against a server that requires a token: claude's
			// header must get through and nothing without it; the Inspector
			// line is run for real by scripts/clients-check.
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "claude mcp add --transport http graph-engineering ") ||
				!strings.HasPrefix(lines[1], "npx @modelcontextprotocol/inspector --cli ") {
				t.Fatalf("connect-token block changed; update TestREADME and scripts/clients-check:\n%s", blk.body)
			}
			const token = "readme-token-0123456789abcdef"
			tokPort := freePort(t)
			tok := exec.Command(bin, "serve", "--http", "127.0.0.1:"+tokPort, "--database", filepath.Join(tmp, "token.db"), "--log-level", "warn")
			tok.Env = append(slices.Clone(env), "GRAPH_ENGINEERING_AUTH_TOKEN="+token)
			var tokLogs testwait.Buffer
			tok.Stdout, tok.Stderr = &tokLogs, &tokLogs
			if err := tok.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { tok.Process.Signal(syscall.SIGTERM); tok.Wait() }()
			waitHealthy(t, "http://127.0.0.1:"+tokPort+"/healthz", &tokLogs)
			// What the shell hands claude: expand the line's words as bash does.
			words := nonEmptyLines(shEnv(blk.name, "GRAPH_ENGINEERING_AUTH_TOKEN="+token+"; set -- "+strings.ReplaceAll(lines[0], "127.0.0.1:7330", "127.0.0.1:"+tokPort)+`; printf '%s\n' "$@"`))
			if len(words) != 9 || words[7] != "--header" || words[8] != "Authorization: Bearer "+token {
				t.Fatalf("claude mcp add with a token passes %q", words)
			}
			name, value, _ := strings.Cut(words[8], ": ")
			hc := &http.Client{Transport: headerRT{name, value, http.DefaultTransport}}
			handshake("claude mcp add --header", &mcp.StreamableClientTransport{Endpoint: words[6], HTTPClient: hc})
			if _, err := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: words[6]}, nil); err == nil {
				t.Fatal("a client without the header connected to the token server")
			}
			if !strings.Contains(lines[1], `--header "Authorization: Bearer $GRAPH_ENGINEERING_AUTH_TOKEN"`) {
				t.Fatalf("the Inspector line does not pass the header: %s", lines[1])
			}
		case "mcp-servers":
			var cfg struct {
				MCPServers map[string]struct {
					Command string            `json:"command"`
					Args    []string          `json:"args"`
					Type    string            `json:"type"`
					URL     string            `json:"url"`
					Headers map[string]string `json:"headers"`
				} `json:"mcpServers"`
			}
			body := strings.ReplaceAll(rewrite(blk.body), "/home/you/go/bin/", binDir+"/")
			body = strings.ReplaceAll(body, "/home/you/.local/state/", filepath.Join(tmp, "state")+"/")
			if strings.Contains(body, "/home/you") {
				t.Fatalf("mcpServers block has a /home/you path TestREADME does not map:\n%s", blk.body)
			}
			if err := json.Unmarshal([]byte(body), &cfg); err != nil || len(cfg.MCPServers) != 2 {
				t.Fatalf("mcpServers block: %v", err)
			}
			for name, s := range cfg.MCPServers {
				if s.Command != "" {
					if !filepath.IsAbs(s.Command) || !slices.Contains(s.Args, "--database") {
						t.Fatalf("mcpServers %s: want an absolute command and an explicit --database: %+v", name, s)
					}
					cmd := exec.Command(s.Command, s.Args...)
					cmd.Env = clientEnv
					handshake("mcpServers "+name, &mcp.CommandTransport{Command: cmd})
					cmd = exec.Command(s.Command, s.Args...)
					cmd.Env = clientEnv
					sharesDatabase("mcpServers "+name, cmd)
					continue
				}
				if s.Type != "http" || s.URL != url || !strings.HasPrefix(s.Headers["Authorization"], "Bearer ") {
					t.Fatalf("mcpServers %s: %+v", name, s)
				}
				// The server above runs without a token; a token-protected one
				// is covered by the HTTP tests. The URL must serve MCP.
				handshake("mcpServers "+name, &mcp.StreamableClientTransport{Endpoint: s.URL})
			}
		case "examples":
			// A database already in use: another workflow's ready task, which
			// the examples must leave alone, and finish all the same.
			busy := func() (string, map[string]any) {
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				out := readmeCall(t, ctx, cs, manifest.ToolCreate, map[string]any{"workflow_id": "readme-busy", "node_id": "other-work"})
				id := out["task"].(map[string]any)["task_id"].(string)
				return id, readmeCall(t, ctx, cs, manifest.ToolInspect, map[string]any{"task_id": id})
			}
			busyID, _ := busy()
			out := sh(blk.name, rewrite(blk.body), "")
			if !strings.Contains(out, "4 of 4 nodes completed") {
				t.Fatalf("examples output:\n%s", out)
			}
			if _, after := busy(); after["task"].(map[string]any)["task_id"] != busyID || after["task"].(map[string]any)["state"] != "pending" {
				t.Fatalf("the examples touched another workflow's task: %v", after["task"])
			}
		case "operator":
			claimed := seedReadmeWorkflow(t, ctx, url)
			script := strings.ReplaceAll(rewrite(blk.body), "01JEXAMPLE0000000000000000", claimed)
			// Each command answers its own confirmation prompt.
			var out string
			for _, line := range nonEmptyLines(script) {
				out += sh(blk.name, line, "y\n")
			}
			for _, want := range []string{claimed, "digraph", "would requeue 1 failed task(s) of workflow my-workflow", "requeued 1 failed task(s) of workflow my-workflow", "aborted", "drained all claiming", "resumed all claiming", "verified"} {
				if !strings.Contains(out, want) && !fileContains(filepath.Join(work, "my-workflow.dot"), want) {
					t.Errorf("operator block output lacks %q:\n%s", want, out)
				}
			}
		case "ui":
			out := strings.TrimSpace(sh(blk.name, rewrite(blk.body), ""))
			link := strings.SplitN(out, "\n", 2)[0]
			if !strings.HasPrefix(link, "http://127.0.0.1:"+port+"/ui/login?code=") {
				t.Fatalf("ui link printed:\n%s", out)
			}
			resp, err := http.Get(link)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/ui/workflows/my-workflow" {
				t.Fatalf("the README's ui link landed on %s with %d", resp.Request.URL.Path, resp.StatusCode)
			}
		case "profile":
			if _, err := manifest.ParseProfile([]byte(blk.body)); err != nil {
				t.Fatalf("the README's profile is refused: %v", err)
			}
			if err := os.WriteFile(filepath.Join(work, "workers.json"), []byte(blk.body), 0o644); err != nil {
				t.Fatal(err)
			}
		case "manifest":
			out := sh(blk.name, rewrite(blk.body), "")
			if _, err := manifest.Verify([]byte(strings.TrimSpace(out))); err != nil || !strings.Contains(out, `"tasksExtension":false`) {
				t.Fatalf("manifest with the README's profile: %v\n%s", err, out)
			}
		case "oauth-file":
			// The auth file's oauth section as shown must be accepted as it
			// is (the OAuth tests in mcpadapter/httpfront run the same
			// configuration against a real OpenID provider).
			ps, err := principal.ParseAuthFile([]byte(blk.body))
			if err != nil || ps.OAuth() == nil || len(ps.OAuth().Principals) != 2 {
				t.Fatalf("oauth-file block: %v", err)
			}
		case "skills":
			// Run from the repository root, as the README says: the shipped
			// example folder must load cleanly.
			if out := shIn(root, blk.name, rewrite(blk.body), ""); !strings.Contains(out, "skill://graph-worker/SKILL.md") || !strings.Contains(out, "2 served, 0 private, 0 refused") {
				t.Fatalf("skills check output:\n%s", out)
			}
		case "backup":
			sh(blk.name, rewrite(blk.body), "")
			if fi, err := os.Stat(filepath.Join(work, "tasks-backup.db")); err != nil || fi.Size() == 0 {
				t.Fatalf("no backup written: %v", err)
			}
		default:
			t.Fatalf("README block %q is not run by TestREADME; teach it", blk.name)
		}
	}
	for _, name := range []string{"two-commands", "stop", "connect-stdio", "connect-http", "connect-token", "mcp-servers", "examples", "operator", "ui", "profile", "manifest", "skills", "backup", "oauth-file"} {
		if !seen[name] {
			t.Errorf("README block %q is gone; update TestREADME", name)
		}
	}
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

func fileContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

func waitHealthy(t *testing.T, url string, logs *testwait.Buffer) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs)
		}
	}()
	testwait.For(t, "the server to be healthy at "+url, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// seedReadmeWorkflow creates my-workflow (a claimed task, a pending one, and
// one blocked on the first) and returns the claimed task's id.
func seedReadmeWorkflow(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "readme", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(tool string, args map[string]any) map[string]any { return readmeCall(t, ctx, cs, tool, args) }
	call(manifest.ToolCreate, map[string]any{"workflow_id": "my-workflow", "node_id": "fetch"})
	index := call(manifest.ToolCreate, map[string]any{"workflow_id": "my-workflow", "node_id": "index"})["task"].(map[string]any)["task_id"]
	call(manifest.ToolCreate, map[string]any{"workflow_id": "my-workflow", "node_id": "report", "depends_on": []string{"fetch", "index"}})
	// index fails, for admin requeue --failed.
	l := call(manifest.ToolClaim, map[string]any{"owner": "readme-worker", "task_id": index})["lease"].(map[string]any)
	call(manifest.ToolFail, map[string]any{"task_id": index, "owner": "readme-worker", "generation": l["generation"], "claim_token": l["claim_token"], "error": "index: upstream API down"})
	out := call(manifest.ToolClaim, map[string]any{"owner": "readme-worker", "workflow_id": "my-workflow", "lease_ms": 900000})
	return out["task"].(map[string]any)["task_id"].(string)
}

// readmeCall calls tool and returns its structured result; an error fails the test.
func readmeCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// headerRT adds one header to every request, as a client configured with
// --header does.
type headerRT struct {
	name, value string
	next        http.RoundTripper
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.next.RoundTrip(r)
}
