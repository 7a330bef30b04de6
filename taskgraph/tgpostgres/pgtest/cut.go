package pgtest

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Cut says where a CutProxy drops a connection.
type Cut int

const (
	// CutNone forwards everything.
	CutNone Cut = iota
	// CutAfterCommit forwards the COMMIT to the server, then closes the
	// client's side before any answer: the server commits, the client never
	// hears (an ambiguous commit).
	CutAfterCommit
	// CutBeforeCommit closes both sides instead of forwarding the COMMIT:
	// nothing commits, and the client cannot tell either.
	CutBeforeCommit
	// CutNext closes both sides instead of forwarding the next message of
	// any kind: the connection is lost before a COMMIT was sent.
	CutNext
	// CutAfterCommitRound forwards the COMMIT and every message after it
	// up to the next Sync, then closes the client's side before any
	// answer: a round of the extended protocol that carries its COMMIT
	// (pgx's batch in exec mode: one Sync a round) reaches the server
	// whole and commits; the client never hears.
	CutAfterCommitRound
)

// CutProxy is a TCP proxy in front of a PostgreSQL server that reads the
// frontend protocol (the startup message, then typed messages) so that a
// test can drop a connection at exactly the message it chose. It handles
// plain connections only (sslmode=disable, as URL's are).
type CutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	armed  Cut
	after  []byte // with CutAfterCommit and CutBeforeCommit: only a transaction that sent this
	// Fired receives the cut made, once per arming.
	Fired chan Cut
}

// NewCutProxy starts a proxy to the server of rawURL and returns it with
// the URL that goes through it; it stops when the test ends. The proxy
// finds a statement by its text, which pgx sends only when it prepares it:
// with pgx's statement cache, a connection that ran COMMIT once (Open's
// migration check does) sends only the statement's name afterwards, and a
// cut armed for it never fires. So the URL asks for describe_exec, which
// sends the text every time.
func NewCutProxy(t testing.TB, rawURL string) (*CutProxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{ln: ln, target: u.Host, Fired: make(chan Cut, 8)}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	u.Host = ln.Addr().String()
	q := u.Query()
	q.Set("default_query_exec_mode", "describe_exec")
	u.RawQuery = q.Encode()
	return p, u.String()
}

// Arm makes the proxy cut once, at c.
func (p *CutProxy) Arm(c Cut) { p.ArmAfter(c, "") }

// ArmAfter makes the proxy cut once, at c, in the first transaction that
// sent a statement containing text (any transaction when text is ""; text
// is compared case-insensitively). With CutNext text is ignored.
func (p *CutProxy) ArmAfter(c Cut, text string) {
	p.mu.Lock()
	p.armed, p.after = c, bytes.ToLower([]byte(text))
	p.mu.Unlock()
}

func (p *CutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.relay(c)
	}
}

func (p *CutProxy) relay(client net.Conn) {
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
	sawText := false // this connection's transaction sent the armed text
	for {
		msg, err := readTyped(client)
		if err != nil {
			return
		}
		p.mu.Lock()
		armed, after := p.armed, p.after
		commit := isCommit(msg)
		if len(after) > 0 && (msg[0] == 'Q' || msg[0] == 'P') && bytes.Contains(bytes.ToLower(msg[5:]), after) {
			sawText = true
		}
		fire := armed == CutNext ||
			(commit && (armed == CutAfterCommit || armed == CutBeforeCommit || armed == CutAfterCommitRound) && (len(after) == 0 || sawText))
		if fire {
			p.armed = CutNone
		}
		p.mu.Unlock()
		if commit || isRollback(msg) {
			sawText = false
		}
		if !fire {
			if _, err := server.Write(msg); err != nil {
				return
			}
			continue
		}
		if armed == CutAfterCommitRound {
			for msg[0] != 'S' {
				if _, err := server.Write(msg); err != nil {
					return
				}
				if msg, err = readTyped(client); err != nil {
					return
				}
			}
		}
		if armed == CutAfterCommit || armed == CutAfterCommitRound {
			_, _ = server.Write(msg)
			client.Close()
			// The server reads what was sent, then the end of its input:
			// it runs the COMMIT (or the round) to its end and closes.
			// Reading its answers meanwhile, never forwarding them, keeps
			// the proxy's side from answering them with a reset, which
			// could end the session before the COMMIT ran; the server's
			// close says it has run, so Fired comes after the outcome is
			// settled however slow the server is.
			if tc, ok := server.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			_, _ = io.Copy(io.Discard, server)
		}
		p.Fired <- armed
		return
	}
}

func readUntyped(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 4 {
		return nil, io.ErrUnexpectedEOF
	}
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
	if n < 4 {
		return nil, io.ErrUnexpectedEOF
	}
	msg := make([]byte, n+1)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}

// isRollback: a simple query that ends the transaction without committing.
func isRollback(msg []byte) bool {
	return msg[0] == 'Q' && bytes.HasPrefix(bytes.TrimSpace(bytes.ToLower(msg[5:])), []byte("rollback"))
}

// isCommit: a simple query or a Parse whose text is COMMIT.
func isCommit(msg []byte) bool {
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
