package watch

import (
	"sync"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

func TestMain(m *testing.M) { testwait.RunNoLeaks(m) }

// signal is a store's change signal the test fires by hand.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}

// A poll far longer than any test: every scan below is caused by a member
// joining or a commit being reported, never by the poll.
const never = time.Hour

func TestSetScansNewMembersAndEveryCommit(t *testing.T) {
	sig := newSignal()
	scans := make(chan []int, 16)
	s := New(2, never, sig.wait, func(xs []int) { scans <- xs })

	if !s.Add(1) {
		t.Fatal("Add(1) to an empty set of 2 was refused")
	}
	if got := testwait.Recv(t, "the scan of a new member", scans); len(got) != 1 || got[0] != 1 {
		t.Fatalf("first scan = %v, want [1]", got)
	}
	if !s.Add(2) {
		t.Fatal("Add(2) to a set of 2 holding 1 was refused")
	}
	// A scan may repeat (a kick left over from the first Add): the second
	// member must be in one soon, and in every scan from then on.
	for len(testwait.Recv(t, "a scan of both members", scans)) != 2 {
	}
	if s.Add(3) {
		t.Fatal("Add(3) beyond the bound of 2 was accepted")
	}
	if s.Len() != 2 {
		t.Fatalf("Len = %d after a refused Add, want 2", s.Len())
	}

	for len(scans) > 0 { // drain repeats
		<-scans
	}
	sig.fire()
	if got := testwait.Recv(t, "the scan after a commit", scans); len(got) != 2 {
		t.Fatalf("scan after a commit = %v, want both members", got)
	}

	s.Remove(1)
	seen := 0
	s.Each(func(x int) {
		seen++
		if x != 2 {
			t.Errorf("member %d after Remove(1), want only 2", x)
		}
	})
	if seen != 1 {
		t.Fatalf("Each saw %d members, want 1", seen)
	}
	s.Remove(2)
	sig.fire() // the goroutine wakes, finds no member and stops (RunNoLeaks checks)
	testwait.For(t, "the scanning goroutine to stop", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.running
	})
	for len(scans) > 0 {
		if got := <-scans; len(got) == 0 {
			t.Fatal("a set with no members was scanned")
		}
	}

	// A later Add starts it again.
	if !s.Add(4) {
		t.Fatal("Add(4) to an emptied set was refused")
	}
	if got := testwait.Recv(t, "the scan after a restart", scans); len(got) != 1 || got[0] != 4 {
		t.Fatalf("scan after restart = %v, want [4]", got)
	}
	s.Remove(4)
	sig.fire()
	testwait.For(t, "the scanning goroutine to stop again", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.running
	})
}

// scan may remove members (a stream that ended) without deadlock.
func TestSetScanMayRemove(t *testing.T) {
	sig := newSignal()
	done := make(chan struct{})
	var s *Set[int]
	s = New(4, never, sig.wait, func(xs []int) {
		for _, x := range xs {
			s.Remove(x)
		}
		close(done)
	})
	s.Add(7)
	testwait.Recv(t, "the scan that removes its member", done)
	testwait.For(t, "the scanning goroutine to stop", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.running
	})
}
