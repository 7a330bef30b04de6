package watch

import (
	"sync"
	"time"
)

// Set is a bounded set of watchers of type T, scanned by one goroutine
// while any is open (see the package's invariants).
type Set[T comparable] struct {
	max     int
	poll    time.Duration
	changed func() <-chan struct{}
	scan    func([]T)

	mu      sync.Mutex
	members map[T]struct{}
	running bool
	kick    chan struct{} // a new member: scan at once (holds at most one)
}

// New returns an empty Set of at most max members. changed returns a
// channel closed at the next commit the store reports (taskgraph's
// Store.Changed); scan reads what the members watch and hands each its
// news. poll is the longest the goroutine waits between two scans when no
// commit is reported (another replica's commits that no driver announces).
func New[T comparable](max int, poll time.Duration, changed func() <-chan struct{}, scan func([]T)) *Set[T] {
	return &Set[T]{max: max, poll: poll, changed: changed, scan: scan, members: map[T]struct{}{}, kick: make(chan struct{}, 1)}
}

// Max is the Set's bound.
func (s *Set[T]) Max() int { return s.max }

// Add makes x a member and has it scanned at once, starting the goroutine
// if it is not running; false, changing nothing, when the Set is full.
func (s *Set[T]) Add(x T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.members) >= s.max {
		return false
	}
	s.members[x] = struct{}{}
	if !s.running {
		s.running = true
		go s.run()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return true
}

// Remove ends x's membership; removing a non-member does nothing.
func (s *Set[T]) Remove(x T) {
	s.mu.Lock()
	delete(s.members, x)
	s.mu.Unlock()
}

// Len is the number of members.
func (s *Set[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.members)
}

// Each calls f with every member, under the Set's lock: f must not call
// the Set (metrics read the members' own counters with it).
func (s *Set[T]) Each(f func(T)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for x := range s.members {
		f(x)
	}
}

// run scans the members after every reported commit, and at least every
// poll, until none is left.
func (s *Set[T]) run() {
	for {
		changed := s.changed() // armed before reading: no commit is missed
		s.mu.Lock()
		if len(s.members) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		xs := make([]T, 0, len(s.members))
		for x := range s.members {
			xs = append(xs, x)
		}
		s.mu.Unlock()
		s.scan(xs)
		t := time.NewTimer(s.poll)
		select {
		case <-changed:
		case <-s.kick:
		case <-t.C:
		}
		t.Stop()
	}
}
