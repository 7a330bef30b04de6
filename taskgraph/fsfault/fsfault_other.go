//go:build !linux

package fsfault

import "testing"

// Tmpfs needs Linux mounts: it skips the test.
func Tmpfs(t testing.TB, size int) string {
	t.Skip("mounting a tmpfs to fill up needs Linux")
	return ""
}

// ReadOnly needs Linux bind mounts: it skips the test.
func ReadOnly(t testing.TB, dir string) string {
	t.Skip("a read-only bind mount needs Linux")
	return ""
}

// Fill needs Linux mounts: it skips the test.
func Fill(t testing.TB, dir string) string {
	t.Skip("filling a tmpfs needs Linux")
	return ""
}
