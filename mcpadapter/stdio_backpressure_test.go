package mcpadapter

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// bpCall is one modern tools/call line.
func bpCall(id, tool, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + stdioMeta + `}}` + "\n"
}

func bpList(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{%s}}`+"\n", i, stdioMeta)
}

// waitStill polls n until it has not changed for a while, or until done
// reports true; it returns the last value. It decides when to stop looking,
// never what is asserted.
func waitStill(n func() int64, done func() bool) int64 {
	last, since := n(), time.Now()
	for !done() && time.Since(since) < 500*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		if v := n(); v != last {
			last, since = v, time.Now()
		}
	}
	return n()
}

// A client that writes requests and never reads stdout: the server stops
// reading stdin once MaxStdioInFlight calls are unanswered, and resumes one
// for one as the client reads answers. Every call is answered exactly once.
func TestStdioInFlightBoundStopsIntake(t *testing.T) {
	f := newFixture(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- f.srv.ServeStdio(f.ctx, inR, outW) }()

	const total = 6 * MaxStdioInFlight
	var consumed atomic.Int64 // lines the server has taken off stdin
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range total {
			if _, err := io.WriteString(inW, bpList(i)); err != nil {
				return
			}
			consumed.Add(1)
		}
	}()
	finished := func() bool {
		select {
		case <-wrote:
			return true
		default:
			return false
		}
	}
	// The reading loop holds MaxStdioInFlight calls and reads one line ahead.
	const slack = 1
	if got := waitStill(consumed.Load, finished); got > MaxStdioInFlight+slack {
		t.Fatalf("the server read %d requests while none of its answers was read; want at most %d", got, MaxStdioInFlight+slack)
	}

	// Each io.Pipe Read returns (part of) one write: after k answers have
	// been taken, at most k + MaxStdioInFlight + slack lines were read.
	seen := map[float64]bool{}
	br := bufio.NewReader(io.LimitReader(outR, 1<<40))
	for read := 0; read < total; read++ {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %d answers: %v", read, err)
		}
		var m struct {
			ID     float64         `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(line, &m); err != nil || m.Result == nil {
			t.Fatalf("answer %d: %s", read, line)
		}
		if seen[m.ID] {
			t.Fatalf("id %v answered twice", m.ID)
		}
		seen[m.ID] = true
		// The bufio.Reader may hold a few answers beyond read+1 already.
		if c := consumed.Load(); c > int64(read+1+br.Buffered()/len(line)+1+MaxStdioInFlight+slack) {
			t.Fatalf("after %d answers the server had read %d requests", read+1, c)
		}
	}
	<-wrote
	inW.Close()
	if err := <-served; err != nil {
		t.Fatalf("ServeStdio at end of input: %v", err)
	}
}

// Parked claims have their own bound below MaxStdioInFlight: a client that
// long-polls far beyond it still gets its heartbeat answered, the extra
// long polls are tried once and answer claimed:false at once, and the
// parked ones keep waiting and claim tasks created later.
func TestStdioParkedClaimsLeaveRoomForHolders(t *testing.T) {
	f := newFixture(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- f.srv.ServeStdio(f.ctx, inR, outW) }()
	answers := make(chan map[string]json.RawMessage, 4*MaxStdioInFlight)
	go func() {
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				close(answers)
				return
			}
			var m map[string]json.RawMessage
			json.Unmarshal(line, &m)
			answers <- m
		}
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s); err != nil {
			t.Fatal(err)
		}
	}
	waitCtx := testwait.Context(t) // a hang fails the test at its deadline
	recv := func() (id string, res map[string]any) {
		t.Helper()
		select {
		case m, ok := <-answers:
			if !ok {
				t.Fatal("stdout ended")
			}
			var r struct {
				StructuredContent map[string]any `json:"structuredContent"`
				IsError           bool           `json:"isError"`
				Content           []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			json.Unmarshal(m["result"], &r)
			if r.IsError {
				r.StructuredContent = map[string]any{"error": r.Content[0].Text}
			}
			var sid string
			json.Unmarshal(m["id"], &sid)
			return sid, r.StructuredContent
		case <-waitCtx.Done():
			t.Fatal("no answer before the test's deadline")
		}
		return "", nil
	}
	const longPoll = `{"owner":"w","workflow_id":"idle","wait_ms":30000}`
	for i := range MaxStdioParkedClaims {
		send(bpCall(fmt.Sprintf(`"park-%d"`, i), manifest.ToolClaim, longPoll))
	}
	// More long polls than MaxStdioInFlight: none of them parks.
	extra := 2 * MaxStdioInFlight
	for i := range extra {
		send(bpCall(fmt.Sprintf(`"extra-%d"`, i), manifest.ToolClaim, longPoll))
	}
	for range extra {
		id, res := recv()
		if !strings.HasPrefix(id, "extra-") || res["claimed"] != false {
			t.Fatalf("beyond the parked bound: answer %s %v, want an extra long poll answered claimed:false", id, res)
		}
	}
	// The worker's own claim and heartbeat get through beside the parked polls.
	send(bpCall(`"create"`, manifest.ToolCreate, `{"workflow_id":"busy","node_id":"a"}`))
	if id, res := recv(); id != "create" || res["task"] == nil {
		t.Fatalf("create: %s %v", id, res)
	}
	send(bpCall(`"claim"`, manifest.ToolClaim, `{"owner":"w","workflow_id":"busy","wait_ms":0}`))
	id, res := recv()
	if id != "claim" || res["claimed"] != true {
		t.Fatalf("claim: %s %v", id, res)
	}
	task := res["task"].(map[string]any)["task_id"].(string)
	l := res["lease"].(map[string]any)
	hb, _ := json.Marshal(map[string]any{"task_id": task, "owner": "w", "generation": l["generation"], "claim_token": l["claim_token"]})
	send(bpCall(`"heartbeat"`, manifest.ToolHeartbeat, string(hb)))
	if id, res := recv(); id != "heartbeat" || res["task"] == nil {
		t.Fatalf("heartbeat beside %d parked claims: %s %v", MaxStdioParkedClaims, id, res)
	}
	// At the bound, the wait is dropped only where the validator would have
	// accepted it: refusals stay refusals.
	for _, tc := range []struct{ args, want string }{
		{`{"owner":"w","task_id":"` + task + `","wait_ms":5}`, "applies only to claim-next"},
		{`{"owner":"w","wait_ms":30001}`, "wait_ms"},
		{`{"owner":"w","wait_ms":5,"wait_ms":6}`, "appears twice"},
	} {
		send(bpCall(`"refused"`, manifest.ToolClaim, tc.args))
		if id, res := recv(); id != "refused" || !strings.Contains(fmt.Sprint(res["error"]), tc.want) {
			t.Errorf("%s at the parked bound: %s %v, want a refusal mentioning %q", tc.args, id, res, tc.want)
		}
	}
	// The parked claims were waiting all along: each takes a new task.
	for i := range MaxStdioParkedClaims {
		send(bpCall(fmt.Sprintf(`"fill-%d"`, i), manifest.ToolCreate, fmt.Sprintf(`{"workflow_id":"idle","node_id":"n%d"}`, i)))
	}
	parked := 0
	for range 2 * MaxStdioParkedClaims {
		id, res := recv()
		switch {
		case strings.HasPrefix(id, "fill-"):
		case strings.HasPrefix(id, "park-") && res["claimed"] == true:
			parked++
		default:
			t.Fatalf("unexpected answer %s %v", id, res)
		}
	}
	if parked != MaxStdioParkedClaims {
		t.Fatalf("%d parked claims claimed a task, want %d", parked, MaxStdioParkedClaims)
	}
	inW.Close()
	if err := <-served; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	outW.Close() // ends the test's reader of stdout
}

// stdoutEnd is the far end of a stdout under test.
type stdoutEnd struct {
	name string
	pipe func(t *testing.T) (r io.Closer, w io.Writer)
}

var stdoutEnds = []stdoutEnd{
	// io.Pipe has no deadlines: the writer's timer alone detects a stall.
	{"io.Pipe", func(t *testing.T) (io.Closer, io.Writer) {
		r, w := io.Pipe()
		// Closing the read end at the end fails the write the session's
		// writer is stuck in (an io.Pipe has no deadline), so it ends.
		t.Cleanup(func() { r.Close() })
		return r, w
	}},
	// os.Pipe is pollable: the write deadline interrupts the stalled write.
	{"os.Pipe", func(t *testing.T) (io.Closer, io.Writer) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return r, w
	}},
}

// A client that stops reading stdout is gone once a write has not completed
// within the write timeout: the session ends by itself, stdin still open,
// and says why.
func TestStdioStalledStdoutEndsSession(t *testing.T) {
	for _, end := range stdoutEnds {
		t.Run(end.name, func(t *testing.T) {
			f := newFixture(t)
			inR, inW := io.Pipe()
			defer inW.Close()
			_, w := end.pipe(t)
			served := make(chan error, 1)
			go func() {
				served <- f.srv.serveStdio(f.ctx, inR, w, MaxStdioInFlight, MaxStdioParkedClaims, 300*time.Millisecond)
			}()
			go func() {
				for i := 0; ; i++ { // enough answers to fill any pipe buffer
					if _, err := io.WriteString(inW, bpList(i)); err != nil {
						return
					}
				}
			}()
			select {
			case err := <-served:
				if !errors.Is(err, ErrStdoutStalled) {
					t.Fatalf("ServeStdio with an unread stdout: %v, want ErrStdoutStalled", err)
				}
			case <-testwait.Context(t).Done():
				t.Fatal("ServeStdio kept serving a client that does not read")
			}
		})
	}
}

// A client that closes its end of stdout ends the session at its next
// answer, with ErrStdoutClosed, not by a signal.
func TestStdioClosedStdoutEndsSession(t *testing.T) {
	for _, end := range stdoutEnds {
		t.Run(end.name, func(t *testing.T) {
			f := newFixture(t)
			inR, inW := io.Pipe()
			defer inW.Close()
			r, w := end.pipe(t)
			r.Close()
			served := make(chan error, 1)
			go func() { served <- f.srv.ServeStdio(f.ctx, inR, w) }()
			go io.WriteString(inW, bpCall("1", manifest.ToolCreate, `{"workflow_id":"w","node_id":"n"}`)+bpList(2))
			select {
			case err := <-served:
				if !errors.Is(err, ErrStdoutClosed) {
					t.Fatalf("ServeStdio with a closed stdout: %v, want ErrStdoutClosed", err)
				}
			case <-testwait.Context(t).Done():
				t.Fatal("ServeStdio kept serving a client that closed stdout")
			}
		})
	}
}

// Every place is given back: calls the client cancels (their answers are
// dropped), calls refused for reusing an id in flight, and errors from the
// sessions. Several times MaxStdioInFlight of each, and the session still
// reads and answers.
func TestStdioInFlightPlacesAreReleased(t *testing.T) {
	f := newFixture(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- f.srv.ServeStdio(f.ctx, inR, outW) }()
	answers := make(chan map[string]json.RawMessage, 8*MaxStdioInFlight) // the test writes everything before it reads
	go func() {
		defer close(answers)
		br := bufio.NewReader(outR)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]json.RawMessage
			json.Unmarshal(line, &m)
			answers <- m
		}
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s); err != nil {
			t.Fatal(err)
		}
	}
	waitCtx := testwait.Context(t) // a hang fails the test at its deadline
	recv := func() map[string]json.RawMessage {
		t.Helper()
		select {
		case m, ok := <-answers:
			if !ok {
				t.Fatal("stdout ended")
			}
			return m
		case <-waitCtx.Done():
			t.Fatal("no answer: the session stopped reading")
		}
		return nil
	}
	const longPoll = `{"owner":"w","workflow_id":"idle","wait_ms":30000}`
	send(bpCall(`"held"`, manifest.ToolClaim, longPoll))
	for i := range 3 * MaxStdioInFlight {
		// A claim the client gives up on: no answer, its place comes back.
		send(bpCall(fmt.Sprintf(`"gone-%d"`, i), manifest.ToolClaim, `{"owner":"w","workflow_id":"idle","wait_ms":1}`))
		send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"gone-%d"}}`+"\n", i))
		// A second call under an id in flight: -32600 with id null.
		send(bpList(0)[:len(`{"jsonrpc":"2.0","id":`)] + `"held"` + bpList(0)[len(`{"jsonrpc":"2.0","id":0`):])
		// A session error: unknown method, -32601.
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"unknown-%d","method":"prompts/list","params":{%s}}`+"\n", i, stdioMeta))
	}
	send(bpList(7))
	refused, unknown := 0, 0
	for {
		m := recv()
		if string(m["id"]) == "7" {
			break
		}
		var e struct {
			Code int `json:"code"`
		}
		json.Unmarshal(m["error"], &e)
		switch {
		case string(m["id"]) == "null" && e.Code == -32600:
			refused++
		case strings.HasPrefix(string(m["id"]), `"unknown-`) && e.Code == -32601:
			unknown++
		case strings.HasPrefix(string(m["id"]), `"gone-`):
			// Answered before its cancellation arrived: allowed.
		default:
			t.Fatalf("unexpected answer %v", m)
		}
	}
	if refused != 3*MaxStdioInFlight || unknown != 3*MaxStdioInFlight {
		t.Fatalf("%d reused ids refused and %d unknown methods answered, want %d each", refused, unknown, 3*MaxStdioInFlight)
	}
	send(bpCall(`"fill"`, manifest.ToolCreate, `{"workflow_id":"idle","node_id":"n"}`))
	for got := map[string]bool{}; !got[`"fill"`] || !got[`"held"`]; {
		got[string(recv()["id"])] = true
	}
	inW.Close()
	if err := <-served; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	outW.Close() // ends the test's reader of stdout
}

// A shutdown signal (ctx done) while stdout is unread: ServeStdio returns
// nil within the signal's drain bound, even though the pending answer's
// write stalls meanwhile; the caller asked to stop.
func TestStdioSignalWithUnreadStdoutReturnsNil(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(f.ctx)
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe() // never read
	defer outR.Close()      // frees the session's writer, stuck in a write, at the end
	served := make(chan error, 1)
	go func() {
		served <- f.srv.serveStdio(ctx, inR, outW, MaxStdioInFlight, MaxStdioParkedClaims, 5*time.Second)
	}()
	// A write to io.Pipe returns once the server has read it; the third is
	// read only after the first was handed to a session.
	for i := range 3 {
		if _, err := io.WriteString(inW, bpList(i)); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeStdio after ctx was done: %v, want nil", err)
		}
	case <-testwait.Context(t).Done():
		t.Fatalf("ServeStdio did not return after ctx was done (its drain bound is %s)", drainAfterCancel)
	}
}
