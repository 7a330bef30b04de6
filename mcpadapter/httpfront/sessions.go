package mcpadapter

import (
	"sync"
)

// sessionTracker records how each legacy session is used, so that at
// MaxSessions an initialize can close the session that matters least
// instead of being refused: first the oldest session that never got past
// initialize (no request or notification after it), then the one idle the
// longest. A session with a request in flight is never closed. Order is
// kept with a counter of events, not a clock.
type sessionTracker struct {
	mu   sync.Mutex
	tick uint64
	m    map[string]*sessionUse
}

type sessionUse struct {
	created  uint64
	lastUsed uint64
	inFlight int
	pastInit bool
}

func newSessionTracker() *sessionTracker { return &sessionTracker{m: map[string]*sessionUse{}} }

// opened records a session that initialize just created.
// Sessions that ended without DELETE (idle expiry, shutdown) are forgotten
// once the tracker holds more than bound entries.
func (t *sessionTracker) opened(id string, bound int, live func() map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tick++
	t.m[id] = &sessionUse{created: t.tick, lastUsed: t.tick}
	if len(t.m) > bound {
		t.purge(live())
	}
}

// begin records a request of session id; the returned func ends it.
func (t *sessionTracker) begin(id, method string) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.m[id]
	if u == nil {
		return func() {}
	}
	t.tick++
	u.lastUsed, u.inFlight = t.tick, u.inFlight+1
	if method != "initialize" {
		u.pastInit = true
	}
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.tick++
		u.lastUsed, u.inFlight = t.tick, u.inFlight-1
	}
}

// ended forgets a session (DELETE).
func (t *sessionTracker) ended(id string) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// victim picks the session to close for room, among the live ones, and
// forgets it; "" when every live session has a request in flight (or none
// is tracked yet).
func (t *sessionTracker) victim(live map[string]bool) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.purge(live)
	best, bestID := (*sessionUse)(nil), ""
	for id, u := range t.m {
		if u.inFlight > 0 {
			continue
		}
		if best == nil || less(u, best) {
			best, bestID = u, id
		}
	}
	if best != nil {
		delete(t.m, bestID)
	}
	return bestID
}

// less orders eviction candidates: never initialized before initialized,
// then the oldest (never initialized) or longest idle (initialized).
func less(a, b *sessionUse) bool {
	if a.pastInit != b.pastInit {
		return !a.pastInit
	}
	if !a.pastInit {
		return a.created < b.created
	}
	return a.lastUsed < b.lastUsed
}

func (t *sessionTracker) purge(live map[string]bool) {
	for id := range t.m {
		if !live[id] {
			delete(t.m, id)
		}
	}
}
