package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	_ "github.com/mattn/go-sqlite3"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// builtBinary builds the command once per test run.
func builtBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ge-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "graph-engineering-mcp")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestStdioSDKClientBothEras(t *testing.T) {
	bin := builtBinary(t)
	db := filepath.Join(t.TempDir(), "tasks.db")
	for _, version := range []string{"", "2025-11-25", "2024-11-05"} {
		t.Run("version="+version, func(t *testing.T) {
			cmd := exec.Command(bin, "serve", "--database", db)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
			var opts *mcp.ClientSessionOptions
			if version != "" {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
			}
			ctx, cancel := testwait.Bound(t, context.Background())
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, opts)
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, stderr.String())
			}
			want := version
			if want == "" {
				want = manifest.ModernVersion
			}
			if got := cs.InitializeResult().ProtocolVersion; got != want {
				t.Fatalf("negotiated %s, want %s", got, want)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 7 {
				t.Fatalf("tools/list: %v", err)
			}
			node := "n" + strings.ReplaceAll(want, "-", "")
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: manifest.ToolCreate, Arguments: map[string]any{"workflow_id": "stdio", "node_id": node}})
			if err != nil || res.IsError {
				t.Fatalf("create: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: manifest.ToolClaim, Arguments: map[string]any{"owner": "w", "workflow_id": "stdio"}})
			if err != nil || res.IsError {
				t.Fatalf("claim: %v %+v", err, res)
			}
			if err := cs.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			if strings.Contains(stderr.String(), "level=ERROR") {
				t.Errorf("server logged errors:\n%s", stderr.String())
			}
		})
	}
}

// stdioServer runs the binary with raw pipes.
type stdioServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     *os.File
	out    *bufio.Reader
	stderr *testwait.Buffer // written by the child's copier while tests read it
	db     string
}

func startStdio(t *testing.T, args ...string) *stdioServer {
	t.Helper()
	db := filepath.Join(t.TempDir(), "tasks.db")
	cmd := exec.Command(builtBinary(t), append([]string{"serve", "--database", db}, args...)...)
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	stderr := &testwait.Buffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	s := &stdioServer{t: t, cmd: cmd, in: inW, out: bufio.NewReaderSize(outR, 1<<20), stderr: stderr, db: db}
	t.Cleanup(func() { s.in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return s
}

func (s *stdioServer) send(line string) {
	s.t.Helper()
	if _, err := s.in.WriteString(line + "\n"); err != nil {
		s.t.Fatal(err)
	}
}

// recv reads one line of stdout, which must be one JSON-RPC message, and
// decodes it (see recvRaw).
func (s *stdioServer) recv() map[string]any {
	s.t.Helper()
	out := map[string]any{}
	for k, v := range s.recvRaw() {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			s.t.Fatalf("member %q: %v", k, err)
		}
		out[k] = x
	}
	return out
}

func errCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

const modernMetaJSON = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func TestStdioHostileLinesAndCleanExit(t *testing.T) {
	s := startStdio(t)
	// An oversized line is answered and discarded; the server keeps serving.
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 600<<10) + `",` + modernMetaJSON + `}}`)
	if m := s.recv(); errCode(m) != -32600 || m["id"] != nil || !strings.Contains(fmt.Sprint(m["error"]), "524288") {
		t.Fatalf("oversized line: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + modernMetaJSON + `}}`)
	if m := s.recv(); m["id"] != float64(2) || m["result"] == nil {
		t.Fatalf("after the oversized line: %v", m)
	}
	for _, tc := range []struct {
		line string
		code float64
	}{
		{`{not json`, -32700},
		{`[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]`, -32600},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, -32600},
		{`{"jsonrpc":"1.0","id":4,"method":"tools/list"}`, -32600},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}`, -32602},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, -32022},
		{`{"jsonrpc":"2.0","id":7,"method":"prompts/list","params":{` + modernMetaJSON + `}}`, -32601},
	} {
		s.send(tc.line)
		if m := s.recv(); errCode(m) != tc.code {
			t.Errorf("%s: got %v, want code %v", tc.line, m, tc.code)
		}
	}
	s.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"n"},` + modernMetaJSON + `}}`)
	if m := s.recv(); m["result"] == nil {
		t.Fatalf("create: %v", m)
	}
	// End of input: exit 0, database closed cleanly (WAL checkpointed).
	s.in.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	if err := testwait.Recv(t, "the server to exit at end of input", done); err != nil {
		t.Fatalf("exit: %v\n%s", err, s.stderr.String())
	}
	if fi, err := os.Stat(s.db + "-wal"); err == nil && fi.Size() != 0 {
		t.Errorf("WAL holds %d bytes after a clean exit", fi.Size())
	}
	db, err := sql.Open("sqlite3", "file:"+s.db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity %q %v", ok, err)
	}
	if !strings.Contains(s.stderr.String(), "database closed cleanly") {
		t.Errorf("stderr lacks the clean-close log:\n%s", s.stderr.String())
	}
}

func TestServeRefusesBadProfiles(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ body, want string }{
		"unknown key":  {`{"allowed_tools":["graph_task_claim"],"admin":true}`, `"admin"`},
		"unknown tool": {`{"allowed_tools":["graph_task_force"]}`, "graph_task_force"},
		"not json":     {`allowed_tools: all`, "profile"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		os.WriteFile(p, []byte(tc.body), 0o600)
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"graph-engineering-mcp", "serve", "--database", filepath.Join(dir, "x.db"), "--profile", p}, strings.NewReader(""), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %s", name, code, stderr.String(), tc.want)
		}
		if n := strings.Count(stderr.String(), p); n != 1 {
			t.Errorf("%s: stderr names the profile's path %d times, want once: %q", name, n, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("%s: wrote to stdout: %q", name, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	missing := filepath.Join(dir, "missing.json")
	if code := run(context.Background(), []string{"graph-engineering-mcp", "serve", "--profile", missing}, strings.NewReader(""), &stdout, &stderr); code != exitUsage || strings.Count(stderr.String(), missing) != 1 {
		t.Errorf("missing profile file: exit %d (%s); want 2, naming the path once", code, stderr.String())
	}
}

func TestManifestCommandMatchesServedBytes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.json")
	os.WriteFile(p, []byte(`{"allowed_tools":["graph_task_claim","graph_task_complete"]}`), 0o600)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"graph-engineering-mcp", "manifest", "--profile", p}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("manifest: exit %d %s", code, stderr.String())
	}
	printed := strings.TrimSuffix(stdout.String(), "\n")
	sha, err := manifest.Verify([]byte(printed))
	if err != nil {
		t.Fatalf("printed manifest does not verify: %v", err)
	}
	// The server with the same profile serves the same bytes.
	s := startStdio(t, "--profile", p)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"graph-engineering://capabilities/manifest",` + modernMetaJSON + `}}`)
	m := s.recv()
	contents := m["result"].(map[string]any)["contents"].([]any)[0].(map[string]any)
	if contents["text"] != printed {
		t.Fatalf("served manifest differs from the printed one:\n%s\n%s", contents["text"], printed)
	}
	if !strings.Contains(printed, sha) || !strings.Contains(printed, `"tools":["graph_task_claim","graph_task_complete"]`) {
		t.Fatalf("manifest: %s", printed)
	}
}

// A client that writes its requests and closes stdin (echo ... | serve) gets
// every answer before the server exits.
func TestStdioAnswersInFlightRequestsAtEOF(t *testing.T) {
	s := startStdio(t)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_create","arguments":{"workflow_id":"w","node_id":"n"},` + modernMetaJSON + `}}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"graph_task_claim","arguments":{"owner":"x","workflow_id":"other","wait_ms":1000},` + modernMetaJSON + `}}`)
	s.in.Close()
	got := map[float64]bool{}
	for i := 0; i < 2; i++ {
		m := s.recv()
		if m["result"] == nil {
			t.Fatalf("in-flight request answered with %v", m)
		}
		got[m["id"].(float64)] = true
	}
	if !got[1] || !got[2] {
		t.Fatalf("answers for %v", got)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// SIGTERM stops intake but lets a call in flight finish and be answered: a
// parked claim-next answers claimed: false at once, saying the server is
// shutting down (it waits longer than the shutdown bound, so without that it
// would get no answer).
func TestStdioSIGTERMFinishesCallInFlight(t *testing.T) {
	s := startStdio(t)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"graph_task_claim","arguments":{"owner":"x","wait_ms":30000},` + modernMetaJSON + `}}`)
	// Requests are read in order: once a later one is answered, the claim
	// has been read and is waiting (a slow start cannot let SIGTERM stop
	// intake before it).
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"graph_task_inspect","arguments":{"task_id":"no-such-task"},` + modernMetaJSON + `}}`)
	if m := s.recv(); m["id"] != float64(2) {
		t.Fatalf("the inspect behind the claim: %v", m)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	m := s.recv()
	if m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("call in flight at SIGTERM: %v", m)
	}
	if res := fmt.Sprint(m["result"]); !strings.Contains(res, "claimed:false") || !strings.Contains(res, tools.ShuttingDownHint) {
		t.Fatalf("the parked claim at SIGTERM answered %s, want claimed: false with the shutting-down hint", res)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, s.stderr.String())
	}
}

// Without --database the server uses $XDG_STATE_HOME/graph-engineering, else
// ~/.local/state/graph-engineering, and creates the folder with mode 0700.
func TestDefaultDatabasePath(t *testing.T) {
	bin := builtBinary(t)
	for name, tc := range map[string]struct{ xdg, want string }{
		"xdg":  {xdg: "state", want: "state/graph-engineering"},
		"home": {xdg: "", want: "home/.local/state/graph-engineering"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"HOME=" + filepath.Join(dir, "home"), "PATH=" + os.Getenv("PATH")}
			if tc.xdg != "" {
				env = append(env, "XDG_STATE_HOME="+filepath.Join(dir, tc.xdg))
			}
			cmd := exec.Command(bin, "serve")
			cmd.Env, cmd.Stdin = env, strings.NewReader("")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("serve: %v\n%s", err, out)
			}
			folder := filepath.Join(dir, tc.want)
			fi, err := os.Stat(folder)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("folder %s has mode %v, want 0700", folder, fi.Mode().Perm())
			}
			if _, err := os.Stat(filepath.Join(folder, "tasks.db")); err != nil {
				t.Errorf("no database: %v", err)
			}
		})
	}
}
