package faults

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation asked of the server.
type Kind string

// The operations the model knows.
const (
	Claim     Kind = "claim"      // graph_task_claim with task_id
	ClaimNext Kind = "claim_next" // graph_task_claim without task_id, answered with a task
	Heartbeat Kind = "heartbeat"
	Complete  Kind = "complete"
	Fail      Kind = "fail"    // graph_task_fail, retryable, retry_after_ms 0
	Release   Kind = "release" // graph_task_cancel with release: true
)

// Outcome is what the answer says about the operation's effect.
type Outcome int

const (
	// Applied: the server answered with a result; the operation took effect.
	Applied Outcome = iota
	// Refused: the server answered that it did nothing (a tool error of
	// kind stale_claim, conflict, invalid, not_found, forbidden, or
	// unavailable with a reason whose advice says nothing was written).
	Refused
	// Unknown: the answer was lost or says the operation may have been
	// applied (a transport error after the request was sent, a timeout, an
	// HTTP 5xx or JSON-RPC error, unavailable with unknown_outcome or
	// files_replaced). It may or may not have taken effect, at any time
	// after it was sent: its return time is infinite.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Refused:
		return "refused"
	}
	return "unknown"
}

// Unbounded ends of a server-time interval.
const (
	negInf int64 = math.MinInt64
	posInf int64 = math.MaxInt64
)

// add is a + b, saturating at the unbounded ends.
func add(a, b int64) int64 {
	switch {
	case a == negInf || b == negInf:
		return negInf
	case a == posInf || b == posInf:
		return posInf
	}
	return a + b
}

// Task is what the model knows of one task before the history starts: it
// was created pending, claimable at once (retry_delay_ms 0), with
// MaxAttempts, and the server recorded Shifts (lease_shift events: a lease
// given back the time the server was away) in its history.
type Task struct {
	ID          string
	MaxAttempts int
	Shifts      []Shift
}

// Shift is a lease_shift event the server recorded: the lease of
// Generation was moved to expire at ExpiresMS, at server time AtMS.
type Shift struct {
	Generation int64
	AtMS       int64
	ExpiresMS  int64
}

// Input is one operation on one task, as sent.
type Input struct {
	Op      int // index of the operation in the recorded history
	Kind    Kind
	Task    *Task
	Owner   string
	Gen     int64  // holder writes: the generation presented
	Token   string // holder writes: the claim token presented
	LeaseMS int64  // claims and heartbeats: the lease asked for
	// Lo and Hi bound the server time of the operation, from the server's
	// own clock as other answers report it: Lo is a lower bound of its
	// arrival (the latest server time answered by any operation that
	// returned before this one was sent), Hi an upper bound of the moment it
	// took effect (the earliest server time answered by any operation sent
	// after this one returned); negInf and posInf when there is none.
	Lo, Hi int64
}

// Output is the answer.
type Output struct {
	Outcome Outcome
	// Refusal is the kind of a refusal ("stale_claim", "conflict", …, or
	// "unavailable/<reason>"), Reason the stale claim's reason; Detail is
	// the answer's text, for the report.
	Refusal, Reason, Detail string
	// Of an applied operation, as answered.
	Gen       int64
	Token     string
	ExpiresMS int64 // the lease expiry of a claim or heartbeat
	Attempts  int
	State     string
}

// state is the model's view of one task. A claim's token the client never
// learnt (an unknown outcome) is "?<op>", which no client presents.
type state struct {
	Phase    string // pending, claimed, completed, failed
	Gen      int64
	Token    string
	Attempts int
	// ExpLo and ExpHi bound the live lease's expiry in server time (Unix
	// ms): exact once an answer stated it, open when an unknown outcome or a
	// shift may have moved it.
	ExpLo, ExpHi int64
	Shifted      uint64 // bit i: Task.Shifts[i] was applied
}

func initial() state { return state{Phase: "pending"} }

// Model is the porcupine model of the lease rules of one task, partitioned
// by task: see the package documentation. It is nondeterministic: its state
// is the set of states the task may be in, kept canonical (normalized,
// deduplicated, sorted) so that sets compare in linear time.
func Model() porcupine.Model {
	return porcupine.Model{
		Partition: partitionByTask,
		Init:      func() any { return []state{initial()} },
		Step: func(s, in, out any) (bool, any) {
			next := stepSet(context.Background(), s.([]state), in.(Input), out.(Output))
			return len(next) > 0, next
		},
		StepContext: func(ctx context.Context, s, in, out any) (bool, any) {
			next := stepSet(ctx, s.([]state), in.(Input), out.(Output))
			return len(next) > 0, next
		},
		Equal: func(a, b any) bool { return slices.Equal(a.([]state), b.([]state)) },
		Hash: func(s any) uint64 {
			var h uint64
			for _, st := range s.([]state) {
				h ^= hashState(st)
			}
			return h
		},
		DescribeOperation: describeOperation,
		DescribeState: func(s any) string {
			var parts []string
			for i, st := range s.([]state) {
				if i == 4 {
					parts = append(parts, fmt.Sprintf("… %d more", len(s.([]state))-4))
					break
				}
				parts = append(parts, describeState(st))
			}
			return "{" + strings.Join(parts, " | ") + "}"
		},
	}
}

func hashState(st state) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%d|%s|%d|%d|%d|%d", st.Phase, st.Gen, st.Token, st.Attempts, st.ExpLo, st.ExpHi, st.Shifted)
	return h.Sum64()
}

// stepSet steps every state of the set and returns the canonical set of
// the results (empty when the answer is impossible from every state).
func stepSet(ctx context.Context, states []state, in Input, out Output) []state {
	seen := map[state]bool{}
	var next []state
	for _, s := range states {
		if ctx.Err() != nil {
			return nil
		}
		for _, n := range step(s, in, out) {
			n = normalize(n, in.Task)
			if !seen[n] {
				seen[n] = true
				next = append(next, n)
			}
		}
	}
	slices.SortFunc(next, compareStates)
	return next
}

// normalize drops what no longer matters, so that states that behave alike
// are equal: a task not claimed has no token, expiry or shifts; a claimed
// one keeps only the applied shifts of its own generation.
func normalize(s state, t *Task) state {
	if s.Phase != "claimed" {
		s.Token, s.ExpLo, s.ExpHi, s.Shifted = "", 0, 0, 0
		return s
	}
	var mask uint64
	for j, sh := range t.Shifts {
		if j < 64 && sh.Generation == s.Gen {
			mask |= 1 << j
		}
	}
	s.Shifted &= mask
	return s
}

func compareStates(a, b state) int {
	return cmp.Or(cmp.Compare(a.Phase, b.Phase), cmp.Compare(a.Gen, b.Gen), cmp.Compare(a.Token, b.Token),
		cmp.Compare(a.Attempts, b.Attempts), cmp.Compare(a.ExpLo, b.ExpLo), cmp.Compare(a.ExpHi, b.ExpHi), cmp.Compare(a.Shifted, b.Shifted))
}

// partitionByTask splits a history into one history per task: the lease
// rules of one task never depend on another's.
func partitionByTask(history []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var out [][]porcupine.Operation
	for _, op := range history {
		id := op.Input.(Input).Task.ID
		i, ok := idx[id]
		if !ok {
			i = len(out)
			idx[id] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], op)
	}
	return out
}

// step returns every state the task may be in after the operation, given
// its answer; none when the answer is impossible.
func step(s state, in Input, out Output) []state {
	var next []state
	for _, pre := range environment(s, in) {
		next = append(next, apply(pre, in, out)...)
	}
	return dedupe(next)
}

// environment returns the states the server may have reached on its own
// before the operation took effect: the live lease lapsed and was expired
// (only once it could have lapsed: the operation's Hi is not before the
// earliest possible expiry), and a recorded lease shift of the live
// generation applied (only once it had happened: its time is not after
// Hi), in any order, each at most once.
func environment(s state, in Input) []state {
	seen := []state{s}
	for i := 0; i < len(seen); i++ {
		cur := seen[i]
		if cur.Phase != "claimed" {
			continue
		}
		var more []state
		if in.Hi >= cur.ExpLo {
			lapsed := cur
			lapsed.Token = ""
			lapsed.Phase = "pending"
			if cur.Attempts >= in.Task.MaxAttempts {
				lapsed.Phase = "failed"
			}
			more = append(more, lapsed)
		}
		for j, sh := range in.Task.Shifts {
			if j < 64 && cur.Shifted&(1<<j) == 0 && sh.Generation == cur.Gen && sh.AtMS <= in.Hi {
				shifted := cur
				shifted.Shifted |= 1 << j
				shifted.ExpLo, shifted.ExpHi = sh.ExpiresMS, sh.ExpiresMS
				more = append(more, shifted)
			}
		}
		for _, m := range more {
			if !contains(seen, m) {
				seen = append(seen, m)
			}
		}
	}
	return seen
}

func contains(ss []state, s state) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func dedupe(ss []state) []state {
	var out []state
	for _, s := range ss {
		if !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// apply is the operation's own step from pre.
func apply(pre state, in Input, out Output) []state {
	switch out.Outcome {
	case Refused:
		if refusalAllowed(pre, in, out) {
			return []state{pre}
		}
		return nil
	case Unknown:
		next := []state{pre} // it did not take effect
		if s, ok := effect(pre, in, nil); ok {
			next = append(next, s)
		}
		return next
	}
	if s, ok := effect(pre, in, &out); ok {
		return []state{s}
	}
	return nil
}

// effect is the state after the operation took effect from pre, with the
// answer out (nil for an unknown outcome); ok is false when the rules do
// not allow it to take effect, or not with that answer.
func effect(pre state, in Input, out *Output) (state, bool) {
	s := pre
	switch in.Kind {
	case Claim, ClaimNext:
		// Only a pending task is claimed (a lapsed lease was expired first:
		// environment), at the next generation, by one attempt more.
		if pre.Phase != "pending" {
			return s, false
		}
		s.Phase, s.Gen, s.Attempts = "claimed", pre.Gen+1, pre.Attempts+1
		if out == nil {
			s.Token = "?" + strconv.Itoa(in.Op)
			// The lease began at the claim's server time, at or after its
			// arrival; when is not known.
			s.ExpLo, s.ExpHi = add(in.Lo, in.LeaseMS), posInf
			return s, true
		}
		if out.Gen != s.Gen || out.Attempts != s.Attempts {
			return s, false
		}
		s.Token, s.ExpLo, s.ExpHi, s.Shifted = out.Token, out.ExpiresMS, out.ExpiresMS, 0
		return s, true
	}
	// A holder write takes effect only from the live claim: claimed, the
	// same generation and token, and a lease not yet lapsed at its arrival.
	if pre.Phase != "claimed" || pre.Gen != in.Gen || pre.Token != in.Token || in.Lo >= pre.ExpHi {
		return s, false
	}
	switch in.Kind {
	case Heartbeat:
		if out == nil {
			s.ExpLo, s.ExpHi = add(in.Lo, in.LeaseMS), posInf
			return s, true
		}
		if out.State != "claimed" || out.Gen != pre.Gen {
			return s, false
		}
		s.ExpLo, s.ExpHi = out.ExpiresMS, out.ExpiresMS
		// A shift that happened before this heartbeat arrived moved a lease
		// this heartbeat replaced: it can no longer apply.
		s.Shifted |= shiftsBefore(in)
		return s, true
	case Complete:
		s.Phase = "completed"
	case Fail:
		s.Phase = "pending"
		if pre.Attempts >= in.Task.MaxAttempts {
			s.Phase = "failed"
		}
	case Release:
		s.Phase, s.Attempts = "pending", max(pre.Attempts-1, 0)
	default:
		return s, false
	}
	s.Token, s.ExpLo, s.ExpHi = "", 0, 0
	if out != nil && (out.State != s.Phase || out.Gen != s.Gen || out.Attempts != s.Attempts) {
		return s, false
	}
	return s, true
}

// shiftsBefore is the set of the task's shifts that happened before the
// operation arrived.
func shiftsBefore(in Input) uint64 {
	var bits uint64
	for j, sh := range in.Task.Shifts {
		if j < 64 && sh.AtMS < in.Lo {
			bits |= 1 << j
		}
	}
	return bits
}

// refusalAllowed: may the server have refused the operation in state pre?
func refusalAllowed(pre state, in Input, out Output) bool {
	if len(out.Refusal) > len("unavailable/") && out.Refusal[:len("unavailable/")] == "unavailable/" {
		// The database was not available and says nothing was written: that
		// may happen in any state.
		return true
	}
	switch in.Kind {
	case Claim:
		// Refused as not claimable, unless it certainly was: pending, or
		// claimed with a lease certainly lapsed at its arrival and an
		// attempt left.
		if out.Refusal != "conflict" {
			return false
		}
		certainlyClaimable := pre.Phase == "pending" ||
			(pre.Phase == "claimed" && in.Lo >= pre.ExpHi && pre.Attempts < in.Task.MaxAttempts)
		return !certainlyClaimable
	case ClaimNext:
		return false // a claim-next that took no task is not in the history
	}
	// A holder write is refused as a stale claim, unless its claim
	// certainly was the live one at its arrival.
	if out.Refusal != "stale_claim" {
		return false
	}
	certainlyLive := pre.Phase == "claimed" && pre.Gen == in.Gen && pre.Token == in.Token && in.Hi < pre.ExpLo
	return !certainlyLive
}

func describeOperation(in, out any) string {
	i, o := in.(Input), out.(Output)
	var s string
	switch i.Kind {
	case Claim, ClaimNext:
		s = fmt.Sprintf("%s %s", i.Kind, i.Owner)
	default:
		s = fmt.Sprintf("%s %s g%d %s", i.Kind, i.Owner, i.Gen, short(i.Token))
	}
	switch o.Outcome {
	case Applied:
		switch i.Kind {
		case Claim, ClaimNext, Heartbeat:
			s += fmt.Sprintf(" -> g%d %s exp %s a%d", o.Gen, short(o.Token), ms(o.ExpiresMS), o.Attempts)
		default:
			s += fmt.Sprintf(" -> %s a%d", o.State, o.Attempts)
		}
	case Refused:
		s += " -> refused " + o.Refusal
		if o.Reason != "" {
			s += " (" + o.Reason + ")"
		}
	default:
		s += " -> unknown"
	}
	return s + fmt.Sprintf(" [server %s..%s]", ms(i.Lo), ms(i.Hi))
}

func describeState(s state) string {
	d := fmt.Sprintf("%s g%d a%d", s.Phase, s.Gen, s.Attempts)
	if s.Phase == "claimed" {
		d += fmt.Sprintf(" %s exp %s..%s", short(s.Token), ms(s.ExpLo), ms(s.ExpHi))
	}
	return d
}

func short(token string) string {
	if len(token) > 6 {
		return token[:6]
	}
	return token
}

// ms renders a server time: the seconds and milliseconds of the minute,
// enough to compare neighbours in a visualization.
func ms(v int64) string {
	switch v {
	case negInf:
		return "-inf"
	case posInf:
		return "+inf"
	}
	return fmt.Sprintf("%d.%03d", (v/1000)%100, v%1000)
}
