package main

import (
	"os"
	"runtime/debug"
)

// serverGCPercent is the garbage collector's target for serve and bench
// when GOGC is not set. A server's live heap is small (a few MB: the store
// keeps its state in SQLite), while every MCP request allocates a few
// hundred KB that die at once (the SDK decodes each message with a freshly
// buffered decoder). With Go's default of 100 the collector ran about every
// other request and took most of the CPU of an HTTP claim+complete cycle;
// 800 lets the heap grow to nine times the live data between collections,
// a few tens of MB, for a large gain in throughput (scripts/bench-store.md:
// bench --mode http went from 25% to about 36% of --mode store on the
// development machine; 400 gave about 31%).
const serverGCPercent = 800

// tuneGC applies serverGCPercent unless the operator chose a GC policy with
// GOGC or GOMEMLIMIT, which always win. It returns the percent in force.
func tuneGC() int {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		old := debug.SetGCPercent(100)
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(serverGCPercent)
	return serverGCPercent
}
