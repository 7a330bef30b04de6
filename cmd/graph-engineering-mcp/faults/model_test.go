package faults

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hist builds a history of one task "T" step by step: each operation is
// sent after the previous one returned, unless overlap says it was sent
// while the previous one was in flight.
type hist struct {
	ops  []Op
	now  int64
	task *Task
}

func newHist() *hist { return &hist{task: &Task{ID: "T", MaxAttempts: 100}} }

func (h *hist) add(op Op, overlap bool) {
	if overlap && len(h.ops) > 0 {
		op.Call = h.ops[len(h.ops)-1].Call + 1
	} else {
		op.Call = h.now + 10
	}
	op.Return = op.Call + 100
	h.now = max(h.now, op.Return)
	op.Task = "T"
	h.ops = append(h.ops, op)
}

// claimed: a claim answered with generation gen, token tok, at server time
// at (ms) with a 1500 ms lease.
func claimed(owner string, gen int64, attempts int, tok string, at int64) Op {
	return Op{Kind: Claim, Owner: owner, LeaseMS: 1500, ServerMS: at,
		Out: Output{Outcome: Applied, Gen: gen, Token: tok, ExpiresMS: at + 1500, Attempts: attempts, State: "claimed"}}
}

func holder(kind Kind, owner string, gen int64, tok string, at int64, state string, attempts int) Op {
	op := Op{Kind: kind, Owner: owner, Gen: gen, Token: tok, LeaseMS: 1500, ServerMS: at,
		Out: Output{Outcome: Applied, State: state, Gen: gen, Attempts: attempts}}
	if kind == Heartbeat {
		op.Out.ExpiresMS = at + 1500
	}
	return op
}

func refused(op Op, kind, reason string) Op {
	op.Out = Output{Outcome: Refused, Refusal: kind, Reason: reason}
	op.ServerMS = 0
	return op
}

func unknown(op Op) Op {
	op.Out = Output{Outcome: Unknown}
	op.ServerMS = 0
	return op
}

func (h *hist) check(t *testing.T) Report {
	t.Helper()
	ops := Build(h.ops, map[string]*Task{"T": h.task}, nil, 0)
	rep, err := Check(h.ops, ops, 10*time.Second, t.TempDir(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func wantLinearizable(t *testing.T, h *hist, want bool) {
	t.Helper()
	rep := h.check(t)
	if got := len(rep.Illegal) == 0 && len(rep.TimedOut) == 0; got != want {
		summary, _ := os.ReadFile(filepath.Join(rep.Dir, "summary.txt"))
		t.Fatalf("linearizable = %v, want %v: %s\n%s", got, want, rep, summary)
	}
	if !want {
		if _, err := os.Stat(filepath.Join(rep.Dir, "task-T.html")); err != nil {
			t.Fatalf("no visualization kept: %v", err)
		}
		if _, err := os.Stat(filepath.Join(rep.Dir, "history.jsonl")); err != nil {
			t.Fatalf("no history kept: %v", err)
		}
	}
}

func TestModelAcceptsTheRules(t *testing.T) {
	t.Parallel()
	h := newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false) // lease until 2500
	h.add(holder(Heartbeat, "a", 1, "ta", 1400, "claimed", 1), false)
	h.add(holder(Fail, "a", 1, "ta", 1500, "pending", 1), false)
	h.add(claimed("b", 2, 2, "tb", 1600), false)
	h.add(holder(Release, "b", 2, "tb", 1700, "pending", 1), false)
	h.add(refused(holder(Complete, "b", 2, "tb", 0, "", 0), "stale_claim", "claim_not_held"), false)
	h.add(claimed("c", 3, 2, "tc", 1800), false) // until 3300
	h.add(refused(Op{Kind: Claim, Owner: "d", LeaseMS: 1500}, "conflict", ""), false)
	// c's lease lapses unseen; e reclaims once the server's time is past it.
	h.add(claimed("e", 4, 3, "te", 3400), false)
	h.add(refused(holder(Heartbeat, "c", 3, "tc", 0, "", 0), "stale_claim", "superseded_generation"), false)
	h.add(holder(Complete, "e", 4, "te", 3500, "completed", 3), false)
	h.add(refused(Op{Kind: Claim, Owner: "f", LeaseMS: 1500}, "conflict", ""), false)
	wantLinearizable(t, h, true)
}

func TestModelRefusesDoubleGrant(t *testing.T) {
	t.Parallel()
	h := newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false)
	h.add(claimed("b", 1, 1, "tb", 1001), true)
	wantLinearizable(t, h, false)
}

func TestModelRefusesDoubleComplete(t *testing.T) {
	t.Parallel()
	h := newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false)
	h.add(holder(Complete, "a", 1, "ta", 1100, "completed", 1), false)
	h.add(holder(Complete, "a", 1, "ta", 1200, "completed", 1), false)
	wantLinearizable(t, h, false)
}

// pin adds an answer of another task reporting server time at: it bounds
// the server time of the operations around it, and nothing else.
func (h *hist) pin(at int64) {
	h.add(Op{Kind: Heartbeat, Owner: "u", Gen: 1, Token: "tu", LeaseMS: 1500, ServerMS: at,
		Out: Output{Outcome: Applied, State: "claimed", Gen: 1, Attempts: 1, ExpiresMS: at + 1500}}, false)
	h.ops[len(h.ops)-1].Task = "U"
}

func TestModelRefusesWriteAcceptedAfterLapse(t *testing.T) {
	t.Parallel()
	h := newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false) // lease until 2500
	h.pin(3000)
	h.add(holder(Heartbeat, "a", 1, "ta", 3100, "claimed", 1), false)
	wantLinearizable(t, h, false)
}

func TestModelRefusesEarlySteal(t *testing.T) {
	t.Parallel()
	h := newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false) // until 2500
	h.add(claimed("b", 2, 2, "tb", 1200), false)
	// An answer sent after b's returned reports server time 1300: b took
	// effect before then, when a's lease was live. (b's own time does not
	// bound it: a claim may wait for a lock while another replica expires
	// the lease.)
	h.pin(1300)
	wantLinearizable(t, h, false)

	h = newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false)
	h.add(claimed("b", 2, 2, "tb", 2600), false) // lapsed by then
	wantLinearizable(t, h, true)
}

func TestModelRefusesRefusingAClaimableTask(t *testing.T) {
	t.Parallel()
	h := newHist()
	h.add(refused(Op{Kind: Claim, Owner: "a", LeaseMS: 1500}, "conflict", ""), false)
	wantLinearizable(t, h, false)

	// A live claim's holder refused although nothing else happened.
	h = newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false)
	h.add(refused(holder(Heartbeat, "a", 1, "ta", 0, "", 0), "stale_claim", "lease_expired"), false)
	h.add(holder(Heartbeat, "a", 1, "ta", 1100, "claimed", 1), false) // pins server time: 1100 < 2500
	wantLinearizable(t, h, false)
}

// Issue 24's ambiguous commit: a claim answered "unreachable" (nothing
// written, says the server) committed, and the retry was refused because
// the task was claimed. Answered as an unknown outcome, the same history is
// linearizable.
func TestModelAmbiguousCommit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reason string
		want   bool
	}{{"unreachable", false}, {"unknown_outcome", true}} {
		h := newHist()
		first := Op{Kind: Claim, Owner: "w1-c1", LeaseMS: 1500}
		if c.reason == "unreachable" {
			first.Out = Output{Outcome: Refused, Refusal: "unavailable/unreachable"}
		} else {
			first.Out = Output{Outcome: Unknown, Refusal: "unavailable/unknown_outcome"}
		}
		h.add(first, false)
		h.add(refused(Op{Kind: Claim, Owner: "w1-c2", LeaseMS: 1500}, "conflict", ""), false)
		// Later a claim gets generation 2: the lost claim held generation 1.
		h.add(claimed("w2", 2, 2, "t2", 9000), false)
		t.Run(c.reason, func(t *testing.T) { wantLinearizable(t, h, c.want) })
	}
}

func TestModelUnknownOutcomes(t *testing.T) {
	t.Parallel()
	h := newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false)
	h.add(unknown(holder(Complete, "a", 1, "ta", 0, "", 0)), false)
	// A retry is refused: the first complete had been applied.
	h.add(refused(holder(Complete, "a", 1, "ta", 0, "", 0), "stale_claim", "task_finished"), false)
	h.add(refused(Op{Kind: Claim, Owner: "b", LeaseMS: 1500}, "conflict", ""), false)
	wantLinearizable(t, h, true)

	// A heartbeat with a lost answer may have extended the lease: a later
	// heartbeat past the first expiry is then accepted; without it, not.
	for _, lost := range []bool{true, false} {
		h = newHist()
		h.add(claimed("a", 1, 1, "ta", 1000), false) // until 2500
		if lost {
			h.add(unknown(holder(Heartbeat, "a", 1, "ta", 0, "", 0)), false)
		}
		h.pin(2800)
		h.add(holder(Heartbeat, "a", 1, "ta", 2900, "claimed", 1), false)
		wantLinearizable(t, h, lost)
	}
}

// A lease the server's history shows shifted (after a restart) may be
// judged by its shifted expiry; without the record it may not.
func TestModelLeaseShift(t *testing.T) {
	t.Parallel()
	for _, shifted := range []bool{false, true} {
		h := newHist()
		if shifted {
			h.task.Shifts = []Shift{{Generation: 1, AtMS: 2000, ExpiresMS: 6000}}
		}
		h.add(claimed("a", 1, 1, "ta", 1000), false) // until 2500
		h.pin(4000)
		h.add(holder(Heartbeat, "a", 1, "ta", 4500, "claimed", 1), false)
		name := map[bool]string{false: "unrecorded", true: "recorded"}[shifted]
		t.Run(name, func(t *testing.T) { wantLinearizable(t, h, shifted) })
	}
}

func TestReportNamesTheFolder(t *testing.T) {
	t.Parallel()
	h := newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false)
	h.add(claimed("b", 1, 1, "tb", 1001), true)
	rep := h.check(t)
	if !strings.Contains(rep.String(), rep.Dir) || rep.Dir == "" {
		t.Fatalf("the report does not name the kept history: %s", rep)
	}
}

// Attempts with one request id are one operation: a retry answered with
// the original's answer makes an unknown outcome known.
func TestRequestIDRetriesAreOneOperation(t *testing.T) {
	t.Parallel()
	h := newHist()
	h.add(claimed("a", 1, 1, "ta", 1000), false)
	lost := unknown(holder(Complete, "a", 1, "ta", 0, "", 0))
	lost.RequestID = "r1"
	h.add(lost, false)
	retry := holder(Complete, "a", 1, "ta", 1200, "completed", 1)
	retry.RequestID = "r1"
	h.add(retry, false)
	ops := Build(h.ops, map[string]*Task{"T": h.task}, nil, 0)
	if len(ops) != 2 {
		t.Fatalf("%d operations, want the claim and one complete", len(ops))
	}
	if out := ops[1].Output.(Output); out.Outcome != Applied || ops[1].Call != h.ops[1].Call || ops[1].Return != h.ops[2].Return {
		t.Fatalf("merged: %+v from %d to %d", out, ops[1].Call, ops[1].Return)
	}
	wantLinearizable(t, h, true)
}
