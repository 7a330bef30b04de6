package mcpadapter

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Flow control on stdio (MCP.md §9, "Backpressure").
const (
	// MaxStdioInFlight bounds the calls read from stdin and not yet answered
	// on stdout. With that many pending, the server stops reading stdin
	// until an answer has been written, so memory stays bounded whatever the
	// client sends and however slowly it reads.
	MaxStdioInFlight = 64
	// MaxStdioParkedClaims bounds the claim-next calls (graph_task_claim
	// without task_id, wait_ms > 0) that may wait at once on one stdio
	// connection. It is below MaxStdioInFlight, so a client's heartbeats and
	// completions always find room beside its long polls. A claim that would
	// wait beyond it is tried once, without waiting: it claims a ready task
	// or answers claimed: false at once.
	MaxStdioParkedClaims = MaxStdioInFlight / 2
	// StdioWriteTimeout bounds one write to stdout. A write that cannot
	// complete within it (the client stopped reading and the pipe is full)
	// means the client is gone: the server stops as at end of input.
	StdioWriteTimeout = 30 * time.Second
)

// Why stdout can no longer carry answers. ServeStdio returns an error
// wrapping one of these (errors.Is) when it stopped because of it.
var (
	// ErrStdoutClosed: the client closed its end of stdout (EPIPE, or
	// io.ErrClosedPipe on an in-process pipe).
	ErrStdoutClosed = errors.New("stdio: the client closed its end of stdout (broken pipe)")
	// ErrStdoutStalled: a write to stdout did not complete within
	// StdioWriteTimeout.
	ErrStdoutStalled = errors.New("stdio: the client stopped reading stdout")
)

// errStdoutShutdown fails the writes still waiting when the shutdown bound
// is reached; it is not reported as an error of ServeStdio.
var errStdoutShutdown = errors.New("stdio: shutting down; the answers still pending are not sent")

// stdioWriteGrace is how long ServeStdio waits, when it returns, for a
// write the OS has not finished, before abandoning it.
const stdioWriteGrace = 100 * time.Millisecond

// stdioWriter owns stdout: one goroutine writes, one message at a time, and
// every write has a deadline. Callers wait for their own write, so a caller
// learns that its answer went out (or why not); once a write fails or
// stalls, every later write fails at once with the same cause.
type stdioWriter struct {
	w        io.Writer
	timeout  time.Duration
	deadline interface{ SetWriteDeadline(time.Time) error } // nil when w has no deadlines

	reqs chan stdioWrite
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	err    error         // why broken was closed
	broken chan struct{} // closed once, with err set

	waiting atomic.Int64 // calls of write not yet returned
}

type stdioWrite struct {
	b    []byte
	done chan error
}

func newStdioWriter(w io.Writer, timeout time.Duration) *stdioWriter {
	sw := &stdioWriter{w: w, timeout: timeout, reqs: make(chan stdioWrite), stop: make(chan struct{}), done: make(chan struct{}), broken: make(chan struct{})}
	// An *os.File on a pollable (non-blocking) pipe supports deadlines, so
	// a stalled write is interrupted rather than abandoned. A blocking file
	// descriptor (the usual stdout of a child process) answers
	// os.ErrNoDeadline, and the timer below alone applies.
	if d, ok := w.(interface{ SetWriteDeadline(time.Time) error }); ok && d.SetWriteDeadline(time.Time{}) == nil {
		sw.deadline = d
	}
	go sw.run()
	return sw
}

func (sw *stdioWriter) run() {
	defer close(sw.done)
	for {
		select {
		case req := <-sw.reqs:
			req.done <- sw.writeOne(req.b)
		case <-sw.stop:
			return
		}
	}
}

func (sw *stdioWriter) writeOne(b []byte) error {
	sw.mu.Lock()
	if sw.err != nil {
		sw.mu.Unlock()
		return sw.err
	}
	sw.mu.Unlock()
	if sw.deadline != nil {
		sw.deadline.SetWriteDeadline(time.Now().Add(sw.timeout))
	}
	stalled := time.AfterFunc(sw.timeout, func() {
		sw.fail(fmt.Errorf("%w: a write did not complete within %s", ErrStdoutStalled, sw.timeout))
	})
	_, err := sw.w.Write(b)
	stalled.Stop()
	if err != nil {
		sw.fail(classifyWriteError(err, sw.timeout))
		return sw.cause()
	}
	return nil
}

// classifyWriteError says what a failed write to stdout means.
func classifyWriteError(err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrClosedPipe):
		return fmt.Errorf("%w: %w", ErrStdoutClosed, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: a write did not complete within %s", ErrStdoutStalled, timeout)
	}
	return fmt.Errorf("stdio: write to stdout: %w", err)
}

// write sends one message and waits until it is written, failed or stalled.
func (sw *stdioWriter) write(b []byte) error {
	sw.waiting.Add(1)
	defer sw.waiting.Add(-1)
	select {
	case <-sw.broken:
		return sw.cause()
	default:
	}
	req := stdioWrite{b: b, done: make(chan error, 1)}
	select {
	case sw.reqs <- req:
	case <-sw.broken:
		return sw.cause()
	}
	select {
	case err := <-req.done:
		return err
	case <-sw.broken:
		select {
		case err := <-req.done:
			return err
		default:
			return sw.cause()
		}
	}
}

// fail marks stdout unusable with err (the first cause wins) and interrupts
// a write in progress where the writer supports deadlines.
func (sw *stdioWriter) fail(err error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return
	}
	sw.err = err
	close(sw.broken)
	if sw.deadline != nil {
		sw.deadline.SetWriteDeadline(time.Now())
	}
}

func (sw *stdioWriter) cause() error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.err
}

// busy reports writes not yet finished.
func (sw *stdioWriter) busy() bool { return sw.waiting.Load() > 0 }

// gone is closed once stdout can no longer carry answers.
func (sw *stdioWriter) gone() <-chan struct{} { return sw.broken }

// shutdown fails every write still waiting: the shutdown bound is reached.
func (sw *stdioWriter) shutdown() { sw.fail(errStdoutShutdown) }

// close stops the writer goroutine. It waits for it, except that a write
// the OS still holds after stdout failed is abandoned after
// stdioWriteGrace: no write starts after close returns.
func (sw *stdioWriter) close() {
	sw.fail(errStdoutShutdown)
	close(sw.stop)
	select {
	case <-sw.done:
	case <-time.After(stdioWriteGrace):
	}
}

// result is what ServeStdio reports about stdout: nil unless the client
// closed it, stopped reading it, or a write failed otherwise.
func (sw *stdioWriter) result() error {
	err := sw.cause()
	if errors.Is(err, errStdoutShutdown) {
		return nil
	}
	return err
}
