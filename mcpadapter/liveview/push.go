package liveview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/watch"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// The pushed workflow page (issue 26.3). Instead of polling its workflow,
// the page opens an event stream, GET /ui/workflows/{id}/events, and
// fetches /ui/api/workflows/{id} only when the stream says the workflow's
// version moved. One hub per handler watches the workflows of every open
// stream: it wakes when the store reports a commit (taskgraph.Store.Changed)
// and at least every uiStreamPoll (another replica's commits that no driver
// announces), reads each watched workflow's version (one row, and its
// pause: never the workflow's tasks), and hands the new version to every
// stream of that workflow. Time alone changes one thing the page shows, a
// claim whose lease lapsed: the hub also tells a stream once the next lapse
// of the answer last built for its version has passed (server time). A
// stream holds the latest version only (coalesced): the hub never waits for
// a stream, and a stream costs nothing while its workflow is unchanged.

// Bounds of the pushed view.
const (
	// UIMaxStreams bounds the event streams open at once; beyond it the
	// stream is refused with 503 and Retry-After (the page polls instead).
	UIMaxStreams = 256
	// uiStreamPoll is the longest the hub waits before reading the watched
	// versions again when no commit was reported.
	uiStreamPoll = time.Second
	// uiStreamKeepAlive is how often an idle stream writes a comment, so
	// that proxies keep it and a client that went away is noticed.
	uiStreamKeepAlive = 25 * time.Second
	// uiStreamWriteTimeout bounds one write of a stream: a client that
	// reads nothing for that long is gone.
	uiStreamWriteTimeout = 30 * time.Second
	// uiStreamRetryMS is the reconnection delay the stream asks of the
	// browser (the SSE retry field).
	uiStreamRetryMS = 2000
	// uiStreamRetryAfter is the Retry-After (seconds) of a refused stream.
	uiStreamRetryAfter = 30
)

// StreamStats are the counters of the pushed view (metrics).
type StreamStats struct {
	// Open is the number of event streams open now.
	Open int
	// Changes counts the versions the hub handed to a stream (a moved
	// version or a passed lapse): what the streams were told, before they
	// coalesce and write it.
	Changes int64
	// Sent counts the change events written since New.
	Sent int64
	// Refused counts the streams refused at UIMaxStreams.
	Refused int64
	// Scans counts the hub's reads of the watched versions.
	Scans int64
}

// pushHub watches the workflows of open event streams.
type pushHub struct {
	u       *Handler
	streams *watch.Set[*stream]
	changes atomic.Int64
	sent    atomic.Int64
	refused atomic.Int64
	scans   atomic.Int64
}

// stream is one open event stream of one workflow.
type stream struct {
	workflowID string
	v          viewer
	// next holds the latest version not yet written (capacity 1: the hub
	// replaces an unwritten one, never waits).
	next chan string
	// The hub's goroutine only: the version last handed over, and the
	// lapse it was told about.
	last      string
	lapseSent int64
}

func newPushHub(u *Handler, max int) *pushHub {
	if max <= 0 {
		max = UIMaxStreams
	}
	h := &pushHub{u: u}
	h.streams = watch.New(max, uiStreamPoll, u.store.Changed, h.scan)
	return h
}

// add registers s, starting the hub's reads; false at the bound.
func (h *pushHub) add(s *stream) bool {
	if !h.streams.Add(s) {
		h.refused.Add(1)
		return false
	}
	return true
}

func (h *pushHub) stats() StreamStats {
	return StreamStats{Open: h.streams.Len(), Changes: h.changes.Load(), Sent: h.sent.Load(), Refused: h.refused.Load(), Scans: h.scans.Load()}
}

// scan reads each watched workflow's version once and hands a moved one
// (or a passed lapse) to its streams.
func (h *pushHub) scan(ss []*stream) {
	h.scans.Add(1)
	now := h.u.store.Clock().Now().UnixMilli()
	versions := map[string]string{}
	for _, s := range ss {
		if _, ok := versions[s.workflowID]; ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), uiReadTimeout)
		v, err := h.u.version(ctx, s.workflowID)
		cancel()
		if err != nil {
			v = "" // missing, or the read failed: nothing to say this time
		}
		versions[s.workflowID] = v
	}
	for _, s := range ss {
		v := versions[s.workflowID]
		if v == "" {
			continue
		}
		tell := v != s.last
		if !tell {
			// The answer last built for this version shows a claim live
			// whose lease has lapsed since: the page must ask again.
			if next := h.u.lapseOf(v); next != 0 && now >= next && s.lapseSent != next {
				s.lapseSent, tell = next, true
			}
		}
		if !tell {
			continue
		}
		s.last = v
		select { // only the hub sends: after the drain the send cannot block
		case <-s.next:
		default:
		}
		s.next <- v
		h.changes.Add(1)
	}
}

// version is the version of workflow id as the page's ETag starts with
// it: a digest of the workflow's version (one row: task count, event chain
// length and head, update time) and the pause in effect, if any. It builds
// nothing.
func (u *Handler) version(ctx context.Context, id string) (string, error) {
	ver, err := u.store.WorkflowVersion(ctx, id)
	if err != nil {
		return "", err
	}
	// An operator's pause changes what the page shows (its badge) without
	// an event of the workflow: it is part of the version.
	var paused string
	ps, err := u.store.Pauses(ctx, id)
	if err != nil {
		return "", err
	}
	if len(ps) > 0 {
		paused = ps[0].String()
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%s\x00%d\x00%s", id, ver.Tasks, ver.Events, ver.Head, ver.UpdatedAtMS, paused))
	return `"v` + hex.EncodeToString(sum[:12]) + `-`, nil
}

// StreamStats returns the counters of the pushed view.
func (u *Handler) StreamStats() StreamStats { return u.push.stats() }

// serveEvents answers GET /ui/workflows/{id}/events: an SSE stream whose
// events say that the workflow changed (event "version", data
// {"version": …}): the first at once, then one each time its version moves
// or a claim the last answer shows live lapses. It ends with event
// "shutdown" as the server shuts down, with event "unauthorized" once the
// viewer's login no longer holds, and when the client goes away. A
// workflow outside the viewer's scope answers as a missing one; at
// UIMaxStreams the stream is refused (503, Retry-After).
func (u *Handler) serveEvents(w http.ResponseWriter, r *http.Request, v viewer, id string) {
	if !v.allows(id) {
		writeUIJSON(w, r, http.StatusNotFound, map[string]string{"error": "not found"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), uiReadTimeout)
	_, err := u.version(ctx, id)
	cancel()
	if err != nil {
		status, msg := http.StatusServiceUnavailable, "unavailable: the database did not answer in time"
		switch {
		case errors.Is(err, taskgraph.ErrNotFound):
			status, msg = http.StatusNotFound, "not found"
		case errors.Is(err, taskgraph.ErrInvalid):
			status, msg = http.StatusBadRequest, err.Error()
		}
		writeUIJSON(w, r, status, map[string]string{"error": msg})
		return
	}
	if u.stopped() {
		w.Header().Set("Retry-After", fmt.Sprint(uiStreamRetryAfter))
		writeUIJSON(w, r, http.StatusServiceUnavailable, map[string]string{"error": "unavailable: the server is shutting down"})
		return
	}
	s := &stream{workflowID: id, v: v, next: make(chan string, 1)}
	if !u.push.add(s) {
		w.Header().Set("Retry-After", fmt.Sprint(uiStreamRetryAfter))
		writeUIJSON(w, r, http.StatusServiceUnavailable, map[string]string{"error": fmt.Sprintf(
			"too many live view streams: %d are open, the most this server keeps; the page polls instead, retry the stream later", u.push.streams.Max())})
		return
	}
	defer u.push.streams.Remove(s)
	rc := http.NewResponseController(w)
	// The request had no body: the read deadline no longer applies, and the
	// stream outlives the server's write timeout (each write sets its own).
	_ = rc.SetReadDeadline(time.Time{})
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(uiStreamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(fmt.Appendf(nil, "retry: %d\n\n", uiStreamRetryMS)) {
		return
	}
	keep := time.NewTicker(uiStreamKeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-u.stop:
			write(sseEvent("shutdown", map[string]string{"reason": "the server is shutting down; the page polls until it is back"}))
			return
		case <-keep.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case ver := <-s.next:
			// The login is checked again before anything is said: a
			// session that ended or a principal removed ends the stream.
			if nv, status, why := u.viewer(r); status != 0 || !nv.allows(id) {
				if why == "" {
					why = "not found"
				}
				write(sseEvent("unauthorized", map[string]string{"error": why}))
				return
			}
			if !write(sseEvent("version", map[string]string{"version": ver})) {
				return
			}
			u.push.sent.Add(1)
		}
	}
}

// sseEvent is one SSE event of type name with v as its JSON data.
func sseEvent(name string, v any) []byte {
	b, _ := json.Marshal(v) // maps of strings: cannot fail
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, b)
}

// stopped reports whether the server is shutting down.
func (u *Handler) stopped() bool {
	select {
	case <-u.stop:
		return true
	default:
		return false
	}
}

// lapseOf returns when (server time, Unix ms) the next claim shown live by
// the answer last built for version lapses (0: none, or not built).
func (u *Handler) lapseOf(version string) int64 {
	u.lapseMu.Lock()
	defer u.lapseMu.Unlock()
	return u.lapseByVersion[version]
}
