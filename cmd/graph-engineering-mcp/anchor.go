package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// anchorInterval is how often serve --audit-anchor appends the head (when
// it changed).
const anchorInterval = 5 * time.Second

// maxAnchorLines bounds the lines audit verify --anchor reads from a file.
const maxAnchorLines = 1_000_000

// anchorLine is one line of an anchor file: the time, a space, the token.
func anchorLine(h taskgraph.AuditHead) string {
	return h.At.UTC().Format(time.RFC3339Nano) + " " + h.String() + "\n"
}

// startAnchor appends the store's audit head to path every anchorInterval
// (when it changed) until the returned stop is called, which appends it a
// last time and syncs the file. Call stop before closing the store.
func startAnchor(ctx context.Context, store *taskgraph.Store, path string, logger *slog.Logger) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, usagef("--audit-anchor %s: %v", path, err)
	}
	var mu sync.Mutex
	last := ""
	write := func() error {
		mu.Lock()
		defer mu.Unlock()
		h, err := store.AuditHead(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		if h.String() == last {
			return nil
		}
		if _, err := io.WriteString(f, anchorLine(h)); err != nil {
			return fmt.Errorf("append to the audit anchor %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync the audit anchor %s: %w", path, err)
		}
		last = h.String()
		return nil
	}
	if err := write(); err != nil {
		f.Close()
		return nil, err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(anchorInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if err := write(); err != nil {
					logger.Error("audit anchor", "file", path, "err", err)
				}
			}
		}
	}()
	var once sync.Once
	var stopErr error
	return func() error {
		once.Do(func() {
			close(done)
			wg.Wait()
			stopErr = errors.Join(write(), f.Close())
			if stopErr == nil {
				logger.Info("audit head anchored", "file", path, "head", last)
			}
		})
		return stopErr
	}, nil
}

// readAnchors reads the heads of an anchor file: one per line, blank lines
// and lines starting with # skipped.
func readAnchors(path string) ([]taskgraph.AuditHead, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usagef("--anchor %s: %v", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 512), taskgraph.MaxAnchorLine+2)
	var out []taskgraph.AuditHead
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if len(out) >= maxAnchorLines {
			return nil, usagef("--anchor %s: more than %d heads", path, maxAnchorLines)
		}
		h, err := taskgraph.ParseAuditHead(line)
		if err != nil {
			return nil, usagef("--anchor %s line %d: %v", path, n, err)
		}
		out = append(out, h)
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("--anchor %s: %v (lines are at most %d bytes)", path, err, taskgraph.MaxAnchorLine)
	}
	return out, nil
}
