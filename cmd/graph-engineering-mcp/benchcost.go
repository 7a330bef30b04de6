package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"
)

// benchCost is what the process has spent so far: CPU time of every
// thread, heap allocations, and bytes written to storage.
type benchCost struct {
	cpu     time.Duration
	allocs  uint64
	bytes   uint64
	written uint64
}

// costSamples are the runtime metrics benchCost reads: cumulative, so two
// readings subtract.
var costSamples = []string{"/gc/heap/allocs:objects", "/gc/heap/allocs:bytes"}

// startCost reads the process's cost now.
func startCost() benchCost {
	var c benchCost
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	s := make([]metrics.Sample, len(costSamples))
	for i, name := range costSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		c.allocs = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		c.bytes = s[1].Value.Uint64()
	}
	c.written = writtenBytes()
	return c
}

// writtenBytes is write_bytes of /proc/self/io: the bytes this process
// caused to be written to storage (counted when it dirtied the pages,
// whoever writes them back), 0 where the file is missing.
func writtenBytes() uint64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("write_bytes: ")); ok {
			n, _ := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// since is the cost spent since c was read.
func (c benchCost) since() benchCost {
	now := startCost()
	return benchCost{cpu: now.cpu - c.cpu, allocs: now.allocs - c.allocs, bytes: now.bytes - c.bytes, written: now.written - c.written}
}

// writeHeapProfile writes the heap profile (allocations since the process
// started, sampled) to path.
func writeHeapProfile(path string) error {
	runtime.GC() // the profile holds the allocations up to the last collection
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("--memprofile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return nil
}
