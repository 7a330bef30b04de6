package testwait

import (
	"bytes"
	"errors"
	"sync"
)

// ErrClosed is what a Write to a closed Buffer returns.
var ErrClosed = errors.New("testwait: write to a closed Buffer")

// Buffer is a bytes.Buffer safe for concurrent writers and readers (the
// output of a logger or a child process that the test reads while it runs),
// which says when it grows. The zero value is ready to use.
type Buffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced by every write; nil until asked for
	closed  bool
}

// Write appends p and wakes whoever waits on Changed. After Close it writes
// nothing and returns ErrClosed.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, ErrClosed
	}
	n, err := b.buf.Write(p)
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return n, err
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Bytes returns a copy of everything written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// Changed returns a channel closed by the next Write. Take it before
// reading the content, so that a write in between is not missed.
func (b *Buffer) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// Close makes every later Write fail with ErrClosed and returns a copy of
// everything written before it.
func (b *Buffer) Close() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return bytes.Clone(b.buf.Bytes())
}
