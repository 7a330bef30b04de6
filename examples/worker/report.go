package main

import (
	"sync"
	"unicode/utf8"
)

// maxStatusBytes is the server's bound on a report's status_message.
const maxStatusBytes = 512

// reportSlot holds a handler's latest progress for the holder writes of
// its claim: the heartbeat loop sends it when it changed, the completion
// or failure always.
type reportSlot struct {
	mu       sync.Mutex
	p        *Progress
	version  int // bumped by each set
	sentVers int // the version the last successful heartbeat carried
}

// set records p as the latest progress (Task.Report).
func (s *reportSlot) set(p Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.p = &p
	s.version++
}

// changed returns the latest progress when no heartbeat carried it yet
// (nil otherwise) and its version, to pass to sent once one did.
func (s *reportSlot) changed() (*Progress, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil || s.version == s.sentVers {
		return nil, s.version
	}
	p := *s.p
	return &p, s.version
}

// sent records that a heartbeat carried version v.
func (s *reportSlot) sent(v int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sentVers = max(s.sentVers, v)
}

// latest returns the latest progress, nil when the handler reported none.
func (s *reportSlot) latest() *Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return nil
	}
	p := *s.p
	return &p
}

// addTo adds p to a holder write's arguments as the server takes them:
// progress {done, total} (done clamped to 0..total, total left out when
// unknown), status_message (cut to the server's bound on a rune boundary)
// and usage. A nil p adds nothing.
func (p *Progress) addTo(args map[string]any) {
	if p == nil {
		return
	}
	done := max(p.Done, 0)
	prog := map[string]any{"done": done}
	if p.Total > 0 {
		prog["done"] = min(done, p.Total)
		prog["total"] = p.Total
	}
	args["progress"] = prog
	if msg := p.Message; msg != "" {
		for len(msg) > maxStatusBytes || !utf8.ValidString(msg) {
			_, size := utf8.DecodeLastRuneInString(msg)
			msg = msg[:len(msg)-max(size, 1)]
		}
		args["status_message"] = msg
	}
	if p.Usage != nil {
		args["usage"] = p.Usage
	}
}
