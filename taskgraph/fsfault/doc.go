// Package fsfault makes the filesystem faults the store's tests need, on
// real mounts rather than mocks: a small tmpfs that fills up (a full disk)
// and a read-only bind mount of a folder (a read-only database). Both need
// Linux and the right to mount (root or CAP_SYS_ADMIN); where either is
// missing the calling test is skipped with a message saying so, never
// failed. Every mount is undone when the test ends.
package fsfault
