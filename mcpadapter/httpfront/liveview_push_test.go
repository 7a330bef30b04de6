package httpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// sseEvent is one event of a live view stream.
type sseEvent struct {
	Name string
	Data string
}

// uiStream is an open GET /ui/workflows/{id}/events, read by a goroutine
// into events (closed at the end of the stream).
type uiStream struct {
	resp   *http.Response
	events chan sseEvent
	cancel context.CancelFunc
}

// openUIStream opens the event stream of workflow wf with the given
// headers; it returns the response when the status is not 200.
func (f *uiFixture) openUIStream(t testing.TB, wf string, hdr map[string]string) (*uiStream, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(testwait.Context(t))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/ui/workflows/"+wf+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	s := &uiStream{resp: resp, events: make(chan sseEvent, 64), cancel: cancel}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.Name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(s.close)
	return s, nil
}

func (s *uiStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next event of the stream; ok is false at its end.
func (s *uiStream) next(t testing.TB) (sseEvent, bool) {
	t.Helper()
	return testwait.RecvOK(t, "an event of the live view stream", s.events)
}

func versionOf(t testing.TB, ev sseEvent) string {
	t.Helper()
	var d struct {
		Version string `json:"version"`
	}
	if ev.Name != "version" || json.Unmarshal([]byte(ev.Data), &d) != nil || d.Version == "" {
		t.Fatalf("event %q %s, want a version event", ev.Name, ev.Data)
	}
	return d.Version
}

// waitScans waits until the hub read the watched versions n more times.
func (f *uiFixture) waitScans(t testing.TB, n int64) {
	t.Helper()
	from := f.h.ui.StreamStats().Scans
	testwait.For(t, "the live view hub to read the versions again", func() bool { return f.h.ui.StreamStats().Scans >= from+n })
}

// The page's stream says when the workflow changed, and only then: the
// first event at once (the version the page's ETag starts with), one after
// a write, none while nothing changes however often the hub looks, and the
// page's fetch after an event is the only answer built.
func TestUIEventsSayWhenTheWorkflowChanged(t *testing.T) {
	t.Parallel()
	f := newUIFixture(t, Options{})
	if _, err := f.store.CreateWorkflow(f.ctx, "wf", []taskgraph.NodeSpec{{NodeID: "a"}, {NodeID: "b", DependsOn: []string{"a"}}}); err != nil {
		t.Fatal(err)
	}
	s, resp := f.openUIStream(t, "wf", nil)
	if s == nil {
		t.Fatalf("stream refused: %d", resp.StatusCode)
	}
	ev, ok := s.next(t)
	if !ok {
		t.Fatal("the stream ended before its first event")
	}
	v1 := versionOf(t, ev)
	_, hdr, _ := f.get(t, http.MethodGet, "/ui/api/workflows/wf", nil)
	if etag := hdr.Get("ETag"); !strings.HasPrefix(etag, v1) {
		t.Fatalf("the workflow's ETag %q does not start with the streamed version %q", etag, v1)
	}
	builds := f.h.ui.WorkflowBuilds()

	// Nothing changes: the hub reads the version again and again (and
	// server time passes), but says nothing and builds nothing.
	before := f.h.ui.StreamStats()
	f.clock.Advance(time.Minute)
	f.waitScans(t, 3)
	after := f.h.ui.StreamStats()
	if after.Changes != before.Changes || f.h.ui.WorkflowBuilds() != builds {
		t.Fatalf("with nothing changed: %d versions handed over (was %d), %d builds (was %d)", after.Changes, before.Changes, f.h.ui.WorkflowBuilds(), builds)
	}
	select {
	case ev := <-s.events:
		t.Fatalf("an event while nothing changed: %q %s", ev.Name, ev.Data)
	default:
	}

	// A write: one event with a new version.
	f.complete(t, "wf", "a")
	ev, ok = s.next(t)
	if !ok {
		t.Fatal("the stream ended instead of saying the workflow changed")
	}
	if v2 := versionOf(t, ev); v2 == v1 {
		t.Fatalf("after a completion the version is still %q", v2)
	}
	if f.h.ui.WorkflowBuilds() != builds {
		t.Fatalf("the hub built an answer: %d builds, want %d (only the page's fetch builds)", f.h.ui.WorkflowBuilds(), builds)
	}
	if st := f.h.ui.StreamStats(); st.Open != 1 || st.Sent < 2 {
		t.Fatalf("stats %+v: want 1 open, at least 2 sent", st)
	}
}

// A claim whose lease lapses changes the page without any write: the
// stream says so once server time passes the lapse of the answer the page
// last fetched.
func TestUIEventsSayWhenAShownClaimLapses(t *testing.T) {
	t.Parallel()
	f := newUIFixture(t, Options{})
	if _, err := f.store.CreateWorkflow(f.ctx, "wf", []taskgraph.NodeSpec{{NodeID: "a"}}); err != nil {
		t.Fatal(err)
	}
	f.claim(t, "wf", "a", "silent-worker", 10*time.Minute)
	s, resp := f.openUIStream(t, "wf", nil)
	if s == nil {
		t.Fatalf("stream refused: %d", resp.StatusCode)
	}
	v := versionOf(t, testwait.Recv(t, "the first event", s.events))
	_, hdr, _ := f.get(t, http.MethodGet, "/ui/api/workflows/wf", nil) // what the page fetches
	f.clock.Advance(11 * time.Minute)
	ev, ok := s.next(t)
	if !ok || versionOf(t, ev) != v {
		t.Fatalf("after the lease lapsed: %v %+v, want the version %q again", ok, ev, v)
	}
	status, hdr2, body := f.get(t, http.MethodGet, "/ui/api/workflows/wf", map[string]string{"If-None-Match": hdr.Get("ETag")})
	if status != http.StatusOK || hdr2.Get("ETag") == hdr.Get("ETag") || !strings.Contains(body, `"stuck":true`) {
		t.Fatalf("the fetch the event asks for: %d, ETag %q (was %q), body %.200s; want the claim shown stuck", status, hdr2.Get("ETag"), hdr.Get("ETag"), body)
	}
}

// Streams are bounded: beyond the bound a stream is refused with 503 and
// Retry-After (the page polls), and a closed stream makes room.
func TestUIEventsAreBounded(t *testing.T) {
	t.Parallel()
	f := newUIFixture(t, Options{UIMaxStreams: 2})
	if _, err := f.store.CreateWorkflow(f.ctx, "wf", []taskgraph.NodeSpec{{NodeID: "a"}}); err != nil {
		t.Fatal(err)
	}
	s1, _ := f.openUIStream(t, "wf", nil)
	s2, _ := f.openUIStream(t, "wf", nil)
	if s1 == nil || s2 == nil {
		t.Fatal("a stream under the bound was refused")
	}
	s3, resp := f.openUIStream(t, "wf", nil)
	if s3 != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the third stream: %v, status %d, Retry-After %q; want 503 with Retry-After", s3 != nil, resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if st := f.h.ui.StreamStats(); st.Refused != 1 || st.Open != 2 {
		t.Fatalf("stats %+v, want 2 open and 1 refused", st)
	}
	s1.close()
	testwait.For(t, "the closed stream to be let go", func() bool { return f.h.ui.StreamStats().Open == 1 })
	if s4, resp := f.openUIStream(t, "wf", nil); s4 == nil {
		t.Fatalf("a stream after one closed: %d", resp.StatusCode)
	}
	// A missing workflow, or one outside the viewer's scope, is a 404.
	if s, resp := f.openUIStream(t, "nope", nil); s != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a missing workflow's stream: %d", resp.StatusCode)
	}
}

// On shutdown a stream ends with event "shutdown" and then the end of the
// response: the page sees it end (and polls), the drain is not held.
func TestUIEventsEndOnShutdown(t *testing.T) {
	t.Parallel()
	f := newUIFixture(t, Options{})
	if _, err := f.store.CreateWorkflow(f.ctx, "wf", []taskgraph.NodeSpec{{NodeID: "a"}}); err != nil {
		t.Fatal(err)
	}
	s, _ := f.openUIStream(t, "wf", nil)
	if s == nil {
		t.Fatal("stream refused")
	}
	testwait.Recv(t, "the first event", s.events)
	f.h.StopListens()
	ev, ok := s.next(t)
	if !ok || ev.Name != "shutdown" || !strings.Contains(ev.Data, "shutting down") {
		t.Fatalf("at shutdown: %v %+v, want event shutdown", ok, ev)
	}
	if ev, ok := s.next(t); ok {
		t.Fatalf("after the shutdown event: %+v, want the end of the stream", ev)
	}
	testwait.For(t, "the stream to be let go", func() bool { return f.h.ui.StreamStats().Open == 0 })
	if s, resp := f.openUIStream(t, "wf", nil); s != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream opened while shutting down: %v", s != nil)
	}
}

// The stream is behind the page's login and Origin rules.
func TestUIEventsNeedTheLogin(t *testing.T) {
	t.Parallel()
	const token = "ui-events-token-0123456789"
	f := newUIFixture(t, Options{AuthToken: token})
	if _, err := f.store.CreateWorkflow(f.ctx, "wf", []taskgraph.NodeSpec{{NodeID: "a"}}); err != nil {
		t.Fatal(err)
	}
	if s, resp := f.openUIStream(t, "wf", nil); s != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a login: %v", s != nil)
	}
	if s, resp := f.openUIStream(t, "wf", map[string]string{"Authorization": "Bearer " + token, "Origin": "https://evil.example"}); s != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("from a foreign origin: %v", s != nil)
	}
	s, resp := f.openUIStream(t, "wf", map[string]string{"Authorization": "Bearer " + token})
	if s == nil {
		t.Fatalf("with the token: %d", resp.StatusCode)
	}
	versionOf(t, testwait.Recv(t, "the first event", s.events))
}
