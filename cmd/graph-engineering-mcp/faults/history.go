package faults

import (
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is one recorded operation: what a client sent, when, and what it was
// answered, exactly as it went over the wire.
type Op struct {
	Kind    Kind   `json:"kind"`
	Task    string `json:"task,omitempty"` // named, or (claim-next) answered
	Owner   string `json:"owner"`
	Gen     int64  `json:"generation,omitempty"`
	Token   string `json:"token,omitempty"`
	LeaseMS int64  `json:"lease_ms,omitempty"`
	// RequestID, when set, makes attempts with the same id one operation
	// (Build merges them): the server answers a retry with the original's
	// answer and never acts twice (issue 24's request ids, to come).
	RequestID string `json:"request_id,omitempty"`
	// Stream is the porcupine client id: a worker's operations are
	// sequential until one has an unknown outcome, which never returns, so
	// its next operation starts a new stream (etcd's robustness tests do
	// the same).
	Stream int `json:"stream"`
	// Call and Return are the test's monotonic times (ns since the
	// recording began) at which the request was sent and the answer read;
	// they order operations in real time and are never used as server time.
	Call   int64 `json:"call_ns"`
	Return int64 `json:"return_ns"`
	// ServerMS is the server time the answer reports for the operation (the
	// claim's or heartbeat's lease expiry less the lease, a holder write's
	// updated_at), 0 when it reports none.
	ServerMS int64  `json:"server_ms,omitempty"`
	Out      Output `json:"output"`
	Replica  string `json:"replica,omitempty"`
	// Request and Response are the bytes sent and received (Response also
	// holds a transport error's text).
	Request  json.RawMessage `json:"request,omitempty"`
	Response string          `json:"response,omitempty"`
}

// Recorder collects the operations of concurrent clients. It is safe for
// concurrent use.
type Recorder struct {
	t0 time.Time
	mu sync.Mutex
	// ops in the order they were recorded (returned).
	ops     []Op
	streams int
}

// NewRecorder starts a recording now.
func NewRecorder() *Recorder { return &Recorder{t0: time.Now()} }

// Now is the recording's monotonic time, for Op.Call and Op.Return.
func (r *Recorder) Now() int64 { return int64(time.Since(r.t0)) }

// Stream returns a new stream (porcupine client) id.
func (r *Recorder) Stream() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streams++
	return r.streams - 1
}

// Add records op.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns a copy of the recorded operations.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Recorded is what the server's own history says was applied, read after
// the run: the task each claim's owner took (owners are unique per claim),
// and how many holder writes of each kind each claim made (Kind, owner,
// generation). An unknown outcome the history shows was not applied is left
// out, as etcd's robustness tests drop a failed request that was never
// persisted: it changes nothing, and every unknown outcome left in makes
// the search wider.
type Recorded struct {
	ClaimedBy map[string]string
	Writes    map[WriteKey]int
}

// WriteKey names the holder writes of one kind by one claim.
type WriteKey struct {
	Kind  Kind
	Owner string
	Gen   int64
}

// Build turns recorded operations into porcupine operations on the tasks
// of tasks. An unknown outcome's return time is after every other
// operation's (it may take effect at any time after it was sent). A
// claim-next whose outcome is unknown names no task: claimedBy maps each
// owner to the task whose history records a claim by it (owners are unique
// per claim), and one that claimed nothing is left out, as is any operation
// on a task not in tasks. slackMS widens the server-time bounds for clocks
// that may disagree by that much (replicas' calibrations).
func Build(ops []Op, tasks map[string]*Task, claimedBy map[string]string, slackMS int64) []porcupine.Operation {
	return BuildRecorded(ops, tasks, Recorded{ClaimedBy: claimedBy}, slackMS)
}

// BuildRecorded is Build, leaving out the unknown outcomes rec shows were
// not applied (with rec.Writes nil, only claims are judged so).
func BuildRecorded(ops []Op, tasks map[string]*Task, rec Recorded, slackMS int64) []porcupine.Operation {
	claimedBy := rec.ClaimedBy
	ops = mergeRetries(ops)
	ops = dropUnapplied(ops, rec)
	lo, hi := serverBounds(ops, slackMS)
	var last int64
	for _, op := range ops {
		last = max(last, op.Return, op.Call)
	}
	var out []porcupine.Operation
	for i, op := range ops {
		id := op.Task
		if id == "" && op.Kind == ClaimNext && op.Out.Outcome == Unknown {
			id = claimedBy[op.Owner]
		}
		t := tasks[id]
		if t == nil {
			continue
		}
		ret := op.Return
		if op.Out.Outcome == Unknown {
			ret = last + 1
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Stream,
			Input: Input{Op: i, Kind: op.Kind, Task: t, Owner: op.Owner, Gen: op.Gen, Token: op.Token, LeaseMS: op.LeaseMS,
				Lo: lo[i], Hi: hi[i]},
			Call:     op.Call,
			Output:   op.Out,
			Return:   ret,
			Metadata: op.Replica,
		})
	}
	return out
}

// serverBounds computes each operation's Input.Lo and Input.Hi from the
// server times other answers report: an operation arrived after every
// server time answered by an operation that returned before it was sent,
// and took effect before every server time answered by an operation sent
// after it returned. An operation whose outcome is unknown has no upper
// bound.
func serverBounds(ops []Op, slackMS int64) (lo, hi []int64) {
	n := len(ops)
	lo, hi = make([]int64, n), make([]int64, n)
	type stamp struct {
		at int64 // Return (for lo) or Call (for hi)
		ms int64
	}
	var byReturn, byCall []stamp
	for _, op := range ops {
		if op.ServerMS != 0 && op.Out.Outcome == Applied {
			byReturn = append(byReturn, stamp{op.Return, op.ServerMS})
			byCall = append(byCall, stamp{op.Call, op.ServerMS})
		}
	}
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].at < byReturn[j].at })
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].at < byCall[j].at })
	prefixMax := make([]int64, len(byReturn))
	for i, s := range byReturn {
		prefixMax[i] = s.ms
		if i > 0 {
			prefixMax[i] = max(prefixMax[i], prefixMax[i-1])
		}
	}
	suffixMin := make([]int64, len(byCall))
	for i := len(byCall) - 1; i >= 0; i-- {
		suffixMin[i] = byCall[i].ms
		if i < len(byCall)-1 {
			suffixMin[i] = min(suffixMin[i], suffixMin[i+1])
		}
	}
	for i, op := range ops {
		// Operations that returned strictly before this one was sent.
		k := sort.Search(len(byReturn), func(j int) bool { return byReturn[j].at >= op.Call })
		lo[i] = negInf
		if k > 0 {
			lo[i] = prefixMax[k-1] - slackMS
		}
		hi[i] = posInf
		if op.Out.Outcome != Unknown {
			// Operations sent strictly after this one returned.
			k := sort.Search(len(byCall), func(j int) bool { return byCall[j].at > op.Return })
			if k < len(byCall) {
				hi[i] = suffixMin[k] + slackMS
			}
		}
	}
	return lo, hi
}

// mergeRetries makes the attempts of one request id one operation: sent
// with the first attempt, answered with the last attempt whose outcome is
// known (else unknown), in the first attempt's stream.
func mergeRetries(ops []Op) []Op {
	first := map[string]int{}
	var out []Op
	for _, op := range ops {
		if op.RequestID == "" {
			out = append(out, op)
			continue
		}
		i, seen := first[op.RequestID]
		if !seen {
			first[op.RequestID] = len(out)
			out = append(out, op)
			continue
		}
		m := &out[i]
		if op.Call < m.Call {
			m.Call, m.Stream = op.Call, op.Stream
		}
		if op.Out.Outcome != Unknown {
			call, stream := m.Call, m.Stream
			*m = op
			m.Call, m.Stream = call, stream
		}
	}
	return out
}

// dropUnapplied leaves out the unknown outcomes the server's history shows
// had no effect: a claim whose owner claimed nothing, a complete, fail or
// release of a claim that recorded none, and the unknown heartbeats of a
// claim whose recorded heartbeats are all accounted for by applied answers.
// An operation's time bounds are computed from the operations kept.
func dropUnapplied(ops []Op, rec Recorded) []Op {
	applied := map[WriteKey]int{}
	for _, op := range ops {
		if op.Out.Outcome == Applied {
			applied[WriteKey{op.Kind, op.Owner, op.Gen}]++
		}
	}
	out := ops[:0:0]
	for _, op := range ops {
		if op.Out.Outcome == Unknown {
			switch op.Kind {
			case Claim, ClaimNext:
				if rec.ClaimedBy != nil && rec.ClaimedBy[op.Owner] == "" {
					continue
				}
			case Heartbeat, Complete, Fail, Release:
				k := WriteKey{op.Kind, op.Owner, op.Gen}
				if rec.Writes != nil && rec.Writes[k] <= applied[k] {
					continue
				}
			}
		}
		out = append(out, op)
	}
	return out
}
