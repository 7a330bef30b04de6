package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"time"
)

// benchCost is what the process has spent so far: CPU time of every
// thread, and heap allocations.
type benchCost struct {
	cpu    time.Duration
	allocs uint64
	bytes  uint64
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
	return c
}

// since is the cost spent since c was read.
func (c benchCost) since() benchCost {
	now := startCost()
	return benchCost{cpu: now.cpu - c.cpu, allocs: now.allocs - c.allocs, bytes: now.bytes - c.bytes}
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
