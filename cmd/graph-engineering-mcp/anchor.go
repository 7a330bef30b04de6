package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
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
// last time and syncs the file. Call stop before closing the store. Each
// write also appends the heads of the workflows changed since the previous
// write (taskgraph.RecentWorkflowHeads, bounded), those not written
// unchanged last time.
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
	// The workflow heads written last time, and the server time from which
	// a workflow counts as changed since (with a margin for commits that
	// straddled the previous write).
	lastWF := map[string]string{}
	var sinceMS int64
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
		wfs, err := store.RecentWorkflowHeads(context.WithoutCancel(ctx), sinceMS)
		if err != nil {
			return err
		}
		var b strings.Builder
		b.WriteString(anchorLine(h))
		seen := make(map[string]string, len(wfs))
		for _, w := range wfs {
			tok := w.String()
			seen[w.WorkflowID] = tok
			if lastWF[w.WorkflowID] != tok {
				b.WriteString(h.At.UTC().Format(time.RFC3339Nano) + " " + tok + "\n")
			}
		}
		if _, err := io.WriteString(f, b.String()); err != nil {
			return fmt.Errorf("append to the audit anchor %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync the audit anchor %s: %w", path, err)
		}
		last, lastWF, sinceMS = h.String(), seen, h.At.UnixMilli()-anchorInterval.Milliseconds()
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
// and lines starting with # skipped; lines naming a workflow are its heads,
// the others database-wide heads.
func readAnchors(path string) ([]taskgraph.AuditHead, []taskgraph.WorkflowHead, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, usagef("--anchor %s: %v", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 512), taskgraph.MaxAnchorLine+2)
	var out []taskgraph.AuditHead
	var wfs []taskgraph.WorkflowHead
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if len(out)+len(wfs) >= maxAnchorLines {
			return nil, nil, usagef("--anchor %s: more than %d heads", path, maxAnchorLines)
		}
		if taskgraph.IsWorkflowHeadLine(line) {
			w, err := taskgraph.ParseWorkflowHead(line)
			if err != nil {
				return nil, nil, usagef("--anchor %s line %d: %v", path, n, err)
			}
			wfs = append(wfs, w)
			continue
		}
		h, err := taskgraph.ParseAuditHead(line)
		if err != nil {
			return nil, nil, usagef("--anchor %s line %d: %v", path, n, err)
		}
		out = append(out, h)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, usagef("--anchor %s: %v (lines are at most %d bytes)", path, err, taskgraph.MaxAnchorLine)
	}
	return out, wfs, nil
}

// latestWorkflowHeads keeps, of each workflow's heads, the one with the
// most events (a chain that verifies and extends it extends the earlier
// ones), in the order of their first line.
func latestWorkflowHeads(hs []taskgraph.WorkflowHead) []taskgraph.WorkflowHead {
	at := map[string]int{}
	var out []taskgraph.WorkflowHead
	for _, h := range hs {
		i, ok := at[h.WorkflowID]
		switch {
		case !ok:
			at[h.WorkflowID] = len(out)
			out = append(out, h)
		case h.Events >= out[i].Events:
			out[i] = h
		}
	}
	return out
}
