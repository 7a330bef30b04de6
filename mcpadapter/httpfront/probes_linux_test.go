//go:build linux

package httpfront

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
)

// On a full disk /readyz answers 503 disk_full with Retry-After and a write
// tool gets the retryable unavailable error over the real SDK client; once
// space is freed both recover. The database lives on a small tmpfs.
func TestReadyzDiskFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", 4<<20)); err != nil {
		t.Skipf("cannot mount a tmpfs to fill up (needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	f := newReadyFixtureIn(t, dir)
	cs := f.client("", readyToken, nil)
	callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "a"})
	filler := filepath.Join(dir, "filler")
	fh, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{64 << 10, 4 << 10, 1} {
		chunk := make([]byte, n)
		for {
			if _, err := fh.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill: %v", err)
				}
				break
			}
		}
	}
	fh.Close()

	r := wantReady(t, f, http.StatusServiceUnavailable, "not ready: disk_full: database disk full")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 disk_full without Retry-After")
	}
	res, _ := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "b",
		"payload": map[string]any{"blob": strings.Repeat("x", 60<<10)}})
	wantUnavailableResult(t, res, "disk_full", true, "once an operator has freed space")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	wantReady(t, f, http.StatusOK, "ready\n")
	if res, _ := callTool(t, cs, manifest.ToolCreate, map[string]any{"workflow_id": "wf", "node_id": "b"}); res.IsError {
		t.Fatalf("create after freeing space: %s", toolText(res))
	}
}
