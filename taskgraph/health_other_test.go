//go:build !linux

package taskgraph

import "testing"

// mountTmpfs needs Linux mounts.
func mountTmpfs(t *testing.T, size int) string {
	t.Skip("mounting a tmpfs to fill up needs Linux")
	return ""
}

// bindReadOnly needs Linux bind mounts.
func bindReadOnly(t *testing.T, dir string) string {
	t.Skip("a read-only bind mount needs Linux")
	return ""
}
