package httpfront

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

// hasSession reports whether a legacy session with this id is live.
func (h *Handler) hasSession(id string) bool {
	for ss := range h.srv.MCP().Sessions() {
		if ss.ID() == id {
			return true
		}
	}
	return false
}

// liveSessionIDs returns the ids of the live legacy sessions.
func (h *Handler) liveSessionIDs() map[string]bool {
	ids := map[string]bool{}
	for ss := range h.srv.MCP().Sessions() {
		if id := ss.ID(); id != "" {
			ids[id] = true
		}
	}
	return ids
}

// legacySessions counts live legacy sessions.
func (h *Handler) legacySessions() int {
	n := 0
	for ss := range h.srv.MCP().Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

// makeRoomForSession reports whether a new legacy session may open: below
// MaxSessions it may; at the cap it closes the session that matters least
// (see sessionTracker) and may, unless every session has a request in
// flight. The caller holds initMu.
func (h *Handler) makeRoomForSession() bool {
	live := h.liveSessionIDs()
	for len(live) >= h.opts.MaxSessions {
		id := h.sessions.victim(live)
		if id == "" {
			return false
		}
		for ss := range h.srv.MCP().Sessions() {
			if ss.ID() == id {
				_ = ss.Close() // the session is gone either way; its close error concerns no one
			}
		}
		delete(live, id)
		if h.metrics != nil {
			h.metrics.evict("session")
		}
		h.log.Info("closed a legacy session to make room for a new one", "max_sessions", h.opts.MaxSessions)
	}
	return true
}
