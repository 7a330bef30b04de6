package faults

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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/sqlitestore"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgsqlite"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary returns the server binary: GE_FAULTS_BINARY when set (to check
// another build), else this tree's, built once.
func binary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GE_FAULTS_BINARY"); p != "" {
		return p
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ge-faults-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "graph-engineering-mcp")
		out, err := exec.Command("go", "build", "-o", binPath, "..").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lockedBuffer collects a process's output safely while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// server is the real binary serving MCP over HTTP on one address, across
// restarts.
type server struct {
	t    *testing.T
	name string
	bin  string
	db   string
	addr string
	env  []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	up   bool          // started and not killed
	done chan struct{} // closed once the process was reaped, with exit set
	exit error
	logs lockedBuffer
}

func newServer(t *testing.T, name, db string, env ...string) *server {
	s := &server{t: t, name: name, bin: binary(t), db: db, addr: freeAddr(t), env: env}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cmd != nil && s.up {
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func (s *server) endpoint() string { return "http://" + s.addr }

// start runs the binary and waits until it answers /healthz.
func (s *server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The database through the environment: a PostgreSQL URL holds a
	// password, which the process list would show.
	// The model (model.go) has no poison tasks: a task the workers here
	// keep abandoning would otherwise fail at the third lease loss, which
	// the model cannot foresee (the loss is counted when the server
	// processes the expiry, at a moment no operation marks). So the
	// servers allow the most losses there are; the behaviour suite tests
	// poison tasks.
	cmd := exec.Command(s.bin, "serve", "--http", s.addr, "--log-level", "warn", "--max-lease-losses", strconv.Itoa(taskgraph.MaxMaxLeaseLosses))
	cmd.Env = append(append(os.Environ(), "GRAPH_ENGINEERING_DATABASE="+s.db), s.env...)
	cmd.Stdout, cmd.Stderr = &s.logs, &s.logs
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		s.exit = err
		close(done)
	}()
	s.cmd, s.up, s.done = cmd, true, done
	hc := &http.Client{Timeout: 2 * time.Second}
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 300*time.Millisecond) {
		if resp, err := hc.Get(s.endpoint() + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			s.up = false
			return fmt.Errorf("%s exited before it was healthy:\n%s", s.name, s.logs.String())
		case <-time.After(wait):
		}
	}
}

func (s *server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.cmd.Process.Signal(sig)
}

// kill SIGKILLs the server and reaps it.
func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	<-s.done
	s.up = false
}

// stop ends the server gracefully and returns its exit error.
func (s *server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.up {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.up = false
	<-s.done
	return s.exit
}

// pgCluster is a PostgreSQL server of the test's own (scripts/postgres in a
// folder of its own), so that a test may crash it.
type pgCluster struct {
	t      *testing.T
	dir    string
	script string
	url    string
}

func newPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the PostgreSQL crash fault needs scripts/postgres (Linux)")
	}
	if os.Getenv("GRAPH_ENGINEERING_TEST_POSTGRES") == "skip" {
		t.Skip("GRAPH_ENGINEERING_TEST_POSTGRES=skip: PostgreSQL tests skipped on purpose")
	}
	parent, err := os.MkdirTemp("", "ge-faults-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o755); err != nil { // the server runs as another user
		t.Fatal(err)
	}
	c := &pgCluster{t: t, dir: filepath.Join(parent, "pg"), script: filepath.Join("..", "..", "..", "scripts", "postgres")}
	out, err := c.run("start")
	if err != nil {
		t.Fatalf("scripts/postgres start: %v", err)
	}
	line := strings.TrimSpace(string(out))
	c.url = strings.TrimPrefix(line[strings.LastIndex(line, "\n")+1:], "export GRAPH_ENGINEERING_TEST_POSTGRES=")
	t.Cleanup(func() {
		if _, err := c.run("stop"); err != nil {
			t.Errorf("scripts/postgres stop: %v", err)
		}
		os.RemoveAll(parent)
	})
	return c
}

func (c *pgCluster) run(verb string) ([]byte, error) {
	cmd := exec.Command(c.script, verb)
	// The cluster is the test's own: a PG_PORT exported for a developer's
	// cluster (scripts/postgres honours it) would put both on one port, so
	// the script picks a free one.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG_PORT=") })
	cmd.Env = append(env, "PG_DIR="+c.dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

// crash stops the server at once (pg_ctl -m immediate) and restart starts it again.
func (c *pgCluster) crash() error   { _, err := c.run("crash"); return err }
func (c *pgCluster) restart() error { _, err := c.run("restart"); return err }

// serverRecord is what the model needs from the server's own history once
// the run is over: every task (its max_attempts), the recorded lease
// shifts, and which task each claim's owner took.
type serverRecord struct {
	tasks     map[string]*Task
	claimedBy map[string]string
	writes    map[WriteKey]int
	shifts    int
}

func readRecord(ctx context.Context, st *taskgraph.Store) (serverRecord, error) {
	rec := serverRecord{tasks: map[string]*Task{}, claimedBy: map[string]string{}, writes: map[WriteKey]int{}}
	wfs, err := st.WorkflowIDs(ctx)
	if err != nil {
		return rec, err
	}
	for _, wf := range wfs {
		view, err := st.Workflow(ctx, wf)
		if err != nil {
			return rec, err
		}
		for _, tk := range view.Tasks {
			rec.tasks[tk.TaskID] = &Task{ID: tk.TaskID, MaxAttempts: tk.MaxAttempts}
		}
		evs, err := st.WorkflowEvents(ctx, wf)
		if err != nil {
			return rec, err
		}
		for _, e := range evs {
			switch e.Kind {
			case taskgraph.EventClaim:
				rec.claimedBy[e.Owner] = e.TaskID
			case taskgraph.EventHeartbeat:
				rec.writes[WriteKey{Heartbeat, e.Owner, e.Generation}]++
			case taskgraph.EventComplete:
				rec.writes[WriteKey{Complete, e.Owner, e.Generation}]++
			case taskgraph.EventRetry, taskgraph.EventFail:
				rec.writes[WriteKey{Fail, e.Owner, e.Generation}]++
			case taskgraph.EventRelease:
				rec.writes[WriteKey{Release, e.Owner, e.Generation}]++
			case taskgraph.EventLeaseShift:
				var d struct {
					Exp int64 `json:"lease_expires_at_ms"`
				}
				if err := json.Unmarshal(e.Detail, &d); err != nil {
					return rec, err
				}
				if t := rec.tasks[e.TaskID]; t != nil {
					t.Shifts = append(t.Shifts, Shift{Generation: e.Generation, AtMS: e.At.UnixMilli(), ExpiresMS: d.Exp})
					rec.shifts++
				}
			}
		}
	}
	return rec, nil
}

// openRecord opens the database read-only (an SQLite path or a PostgreSQL URL).
func openRecord(ctx context.Context, db string) (*taskgraph.Store, error) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		d, err := tgpostgres.Open(ctx, db, tgpostgres.Options{ReadOnly: true, MaxConns: 2})
		if err != nil {
			return nil, err
		}
		return taskgraph.OpenDriver(ctx, d, taskgraph.Options{})
	}
	return sqlitestore.OpenReadOnly(ctx, db, taskgraph.Options{}, tgsqlite.Options{})
}

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
