package tgpostgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// cut says what a cutProxy does to the next message it is armed for.
type cut int

const (
	cutNone cut = iota
	// cutAfterCommit forwards the next COMMIT to the server, then closes the
	// client's side before any answer: the server commits, the client never
	// hears (the ambiguous commit of issue 24).
	cutAfterCommit
	// cutBeforeCommit closes both sides instead of forwarding the next
	// COMMIT: nothing commits, and the client cannot tell either.
	cutBeforeCommit
	// cutNext closes both sides instead of forwarding the next message of
	// any kind: the connection is lost before the COMMIT was sent.
	cutNext
)

// cutProxy is a TCP proxy in front of the test's PostgreSQL server that
// reads the frontend protocol (startup, then typed messages) so that it can
// drop a connection at exactly the message a test chose.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	armed  cut
	fired  chan cut
}

func newCutProxy(t *testing.T, rawURL string) (*cutProxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: u.Host, fired: make(chan cut, 8)}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *cutProxy) arm(c cut) {
	p.mu.Lock()
	p.armed = c
	p.mu.Unlock()
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.relay(c)
	}
}

func (p *cutProxy) relay(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	go func() {
		_, _ = io.Copy(client, server)
		client.Close()
	}()
	defer server.Close()
	defer client.Close()
	// The startup message (and an SSL or GSS request before it) has no type byte.
	for {
		msg, err := readUntyped(client)
		if err != nil {
			return
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
		if len(msg) != 8 { // not a request for encryption: that was the startup
			break
		}
	}
	for {
		msg, err := readTyped(client)
		if err != nil {
			return
		}
		p.mu.Lock()
		armed := p.armed
		isCommit := isCommitMessage(msg)
		fire := armed == cutNext || (isCommit && (armed == cutAfterCommit || armed == cutBeforeCommit))
		if fire {
			p.armed = cutNone
		}
		p.mu.Unlock()
		if !fire {
			if _, err := server.Write(msg); err != nil {
				return
			}
			continue
		}
		if armed == cutAfterCommit {
			_, _ = server.Write(msg)
			client.Close()
			// Let the server read the COMMIT before it sees the socket end.
			time.Sleep(200 * time.Millisecond)
		}
		p.fired <- armed
		return
	}
}

func readUntyped(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	msg := make([]byte, n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

func readTyped(r io.Reader) ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	msg := make([]byte, n+1)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}

// isCommitMessage: a simple query or a Parse whose text is COMMIT.
func isCommitMessage(msg []byte) bool {
	body := bytes.ToLower(msg[5:])
	switch msg[0] {
	case 'Q':
		return bytes.HasPrefix(bytes.TrimSpace(body), []byte("commit"))
	case 'P':
		if i := bytes.IndexByte(body, 0); i >= 0 {
			return bytes.HasPrefix(bytes.TrimSpace(body[i+1:]), []byte("commit"))
		}
	}
	return false
}

// workflowExists reads, on a direct connection, whether workflowID was
// committed, once no other session of the database is inside a transaction:
// the server has then processed the COMMIT it read before the proxy cut the
// connection, or rolled the transaction back.
func workflowExists(t *testing.T, ctx context.Context, url, workflowID string) bool {
	t.Helper()
	c := raw(t, url)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		var n, open int
		if err := c.QueryRow(ctx, `SELECT (SELECT count(*) FROM workflows WHERE workflow_id = $1),
			(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL)`,
			workflowID).Scan(&n, &open); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			return n == 1
		}
		select {
		case <-ctx.Done():
			t.Fatalf("a session stayed in its transaction: %v", ctx.Err())
		case <-time.After(wait):
		}
	}
}

// A write whose connection is lost once its COMMIT was sent is an unknown
// outcome, whether the server committed it (the COMMIT arrived, the answer
// was lost) or not (the COMMIT never arrived); a connection lost before the
// COMMIT was sent is ErrUnreachable, and nothing was written.
func TestLostCommitIsUnknownOutcome(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.URL(t)
	p, proxied := newCutProxy(t, url)
	d := open(t, proxied, Options{})
	for _, c := range []struct {
		name      string
		cut       cut
		want      error
		committed bool
	}{
		{"committed, answer lost", cutAfterCommit, tgdriver.ErrUnknownOutcome, true},
		{"COMMIT lost", cutBeforeCommit, tgdriver.ErrUnknownOutcome, false},
		{"lost before COMMIT", cutNext, tgdriver.ErrUnreachable, false},
	} {
		wf := "wf-" + c.name
		runs := 0
		err := d.Write(ctx, func(tx tgdriver.Tx) error {
			runs++
			if c.cut == cutNext {
				p.arm(cutNext)
			}
			if _, err := tx.EnsureWorkflow(ctx, wf, 1); err != nil {
				return err
			}
			if c.cut != cutNext {
				p.arm(c.cut)
			}
			return nil
		})
		if got := <-p.fired; got != c.cut {
			t.Fatalf("%s: the proxy cut at %v", c.name, got)
		}
		if !errors.Is(err, c.want) || !errors.Is(err, tgdriver.ErrUnavailable) {
			t.Errorf("%s: Write: %v, want %v", c.name, err, c.want)
		}
		if got := tgdriver.MayHaveApplied(err); got != (c.want == tgdriver.ErrUnknownOutcome) {
			t.Errorf("%s: MayHaveApplied = %v for %v", c.name, got, err)
		}
		if runs != 1 {
			t.Errorf("%s: the write ran %d times; a lost connection is never retried inside the driver", c.name, runs)
		}
		if got := workflowExists(t, ctx, url, wf); got != c.committed {
			t.Errorf("%s: committed = %v, want %v", c.name, got, c.committed)
		}
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping after the cuts: %v (the pool replaces a lost connection)", err)
	}
}

// The server's own answer that a COMMIT did not commit (an ERROR, which
// rolls the transaction back) keeps its usual class: it is no unknown
// outcome.
func TestClassifyCommit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	d := open(t, pgtest.URL(t), Options{})
	// A deferred unique violation is reported by COMMIT, and rolls back.
	err := d.Write(ctx, func(tx tgdriver.Tx) error {
		w := tx.(*wtx)
		if _, err := w.tx.Exec(ctx, `CREATE TEMP TABLE once (k int UNIQUE DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP`); err != nil {
			return err
		}
		_, err := w.tx.Exec(ctx, `INSERT INTO once VALUES (1), (1)`)
		return err
	})
	if err == nil || errors.Is(err, tgdriver.ErrUnknownOutcome) || sqlState(err) != codeUniqueViolation {
		t.Errorf("a COMMIT refused with an ERROR: %v, want the unique violation itself", err)
	}
}

// Every pooled session carries the bounds on holding and waiting for locks
// (the defaults, an option, or the URL's own runtime parameter), and a wait
// for a lock beyond the lock timeout is ErrBusy, nothing written.
func TestSessionBoundsAndLockTimeoutIsBusy(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	url := pgtest.URL(t)
	show := func(d *Driver, name string) string {
		var v string
		if err := d.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	d := open(t, url, Options{})
	for name, want := range map[string]string{"idle_in_transaction_session_timeout": "3s", "lock_timeout": "5s", "tcp_keepalives_count": "3"} {
		if got := show(d, name); got != want {
			t.Errorf("default %s = %s, want %s", name, got, want)
		}
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	d2 := open(t, url+sep+"lock_timeout=7000", Options{LockTimeout: 150 * time.Millisecond, IdleInTransactionTimeout: -1, StatementTimeout: 20 * time.Second})
	for name, want := range map[string]string{"idle_in_transaction_session_timeout": "0", "lock_timeout": "7s", "statement_timeout": "20s"} {
		if got := show(d2, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}

	d3 := open(t, url, Options{LockTimeout: 150 * time.Millisecond})
	if err := d3.Write(ctx, func(tx tgdriver.Tx) error { _, err := tx.EnsureWorkflow(ctx, "locked", 1); return err }); err != nil {
		t.Fatal(err)
	}
	holder := raw(t, url)
	htx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer htx.Rollback(ctx)
	if _, err := htx.Exec(ctx, `SELECT 1 FROM workflows WHERE workflow_id = 'locked' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	err = d3.Write(ctx, func(tx tgdriver.Tx) error {
		_, err := tx.LockWorkflow(ctx, "locked")
		return err
	})
	if !errors.Is(err, tgdriver.ErrBusy) || tgdriver.MayHaveApplied(err) {
		t.Fatalf("a write waiting beyond the lock timeout: %v, want ErrBusy", err)
	}
	if reason, retryable, _ := tgdriver.UnavailableReason(err); reason != "busy" || !retryable {
		t.Fatalf("reason %q retryable %v", reason, retryable)
	}
}
