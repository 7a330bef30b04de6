package mcpadapter

import (
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// callLimit is the in-flight bound of one stdio connection: at most max
// calls read and not yet answered, of which at most parkMax are claim-next
// calls that may wait. Only the reading loop takes places (wait, then
// admit), so a place seen free by wait is still free at admit; answers
// release them from any goroutine, in two steps like the SDK: the id is
// free for reuse before its answer is written (a client may reuse it as
// soon as it reads the answer), the place once the write has returned. An
// id is in flight at most once (the router refuses a second call under it).
type callLimit struct {
	max, parkMax int

	mu     sync.Mutex
	held   map[jsonrpc.ID]bool // ids in flight -> parked
	places int                 // calls in flight, answers being written included
	parked int
	freed  chan struct{} // signalled (without blocking) when a place frees
}

func newCallLimit(max, parkMax int) *callLimit {
	return &callLimit{max: max, parkMax: parkMax, held: map[jsonrpc.ID]bool{}, freed: make(chan struct{}, 1)}
}

// wait blocks until a call may be admitted; it reports false when stop or
// gone is closed first (a nil channel never is).
func (l *callLimit) wait(stop, gone <-chan struct{}) bool {
	for {
		l.mu.Lock()
		room := l.places < l.max
		l.mu.Unlock()
		if room {
			return true
		}
		select {
		case <-l.freed:
		case <-stop:
			return false
		case <-gone:
			return false
		}
	}
}

// admit counts req in flight (holds(req.ID) is false). A claim-next call
// that would wait is counted as parked; beyond parkMax it is rewritten to
// wait_ms 0 first, so it is tried once and answered at once.
func (l *callLimit) admit(req *jsonrpc.Request, parsed *wire.Message) {
	park := parksClaim(req, parsed)
	l.mu.Lock()
	defer l.mu.Unlock()
	if park && l.parked >= l.parkMax {
		if params, ok := withoutWait(req.Params); ok {
			req.Params, park = params, false
		}
	}
	l.held[req.ID] = park
	l.places++
	if park {
		l.parked++
	}
}

// answering frees id (its call is being answered, or dropped) and reports
// whether it was in flight; its place stays taken until free.
func (l *callLimit) answering(id jsonrpc.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	park, ok := l.held[id]
	delete(l.held, id)
	if park {
		l.parked--
	}
	return ok
}

// free gives back the place of a call whose answer was written (or failed,
// or was dropped).
func (l *callLimit) free() {
	l.mu.Lock()
	l.places--
	l.mu.Unlock()
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// holds reports whether a call under id is in flight.
func (l *callLimit) holds(id jsonrpc.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.held[id]
	return ok
}

// parksClaim reports whether req is a graph_task_claim the store would let
// wait (ClaimMayWait), reading its params from parsed when the transport
// parsed them.
func parksClaim(req *jsonrpc.Request, parsed *wire.Message) bool {
	if req.Method != "tools/call" {
		return false
	}
	var name string
	var args json.RawMessage
	var ok bool
	if parsed != nil {
		name, args, ok = parsed.ToolCall()
	} else {
		name, args, ok = wire.ToolCallParts(req.Params)
	}
	return ok && ClaimMayWait(name, args)
}

// ClaimMayWait reports whether a tools/call of name with args is a
// graph_task_claim the store would let wait: claim-next (no task_id) with a
// valid wait_ms above 0. Keys match exactly, as in the SDK's decoder.
// Anything the validator refuses is not a waiting claim, so it is answered
// at once: stdio's withoutWait never turns a refusal into a success, and
// over HTTP such a claim takes a slot like any short call. Both transports
// classify with this one function.
func ClaimMayWait(name string, rawArgs json.RawMessage) bool {
	if name != manifest.ToolClaim {
		return false
	}
	args, ok := input.Object(rawArgs)
	if !ok {
		return false
	}
	if _, has := args["task_id"]; has {
		return false
	}
	n, err := input.Int(args["wait_ms"])
	return err == nil && n > 0 && n <= taskgraph.MaxClaimWait.Milliseconds()
}

// withoutWait returns claim params with wait_ms set to 0, every other
// member unchanged.
func withoutWait(params json.RawMessage) (json.RawMessage, bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return nil, false
	}
	args, ok := input.Object(p["arguments"])
	if !ok {
		return nil, false
	}
	args["wait_ms"] = json.RawMessage("0")
	b, err := json.Marshal(args)
	if err != nil {
		return nil, false
	}
	p["arguments"] = b
	out, err := json.Marshal(p)
	if err != nil {
		return nil, false
	}
	return out, true
}
