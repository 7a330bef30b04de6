package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// BrokenLink locates the first place where the history does not verify.
type BrokenLink struct {
	WorkflowID string
	Seq        int64 // chain position; 0 when the problem is the workflow's head
	EventID    int64
	// TaskID names the task whose stored row or content does not match its
	// events, when that is the problem.
	TaskID string
	// AuditSeq is the position in the database-wide audit chain, when the
	// problem is there (0 otherwise).
	AuditSeq int64
	Reason   string
}

// VerifyReport is the outcome of Verify.
type VerifyReport struct {
	Workflows int
	Events    int64
	// Tasks counts the task rows checked against their events.
	Tasks int64
	// AuditEntries counts the entries of the database-wide chain verified.
	AuditEntries int64
	// V1Events counts events in hash format 1 (written before migration
	// 0003), V2Events those in format 2.
	V1Events, V2Events int64
	// Broken is nil when every chain verifies.
	Broken *BrokenLink
}

// ErrBrokenChain matches the error Verify returns with a report whose
// Broken is set.
var ErrBrokenChain = errors.New("event history does not verify")

// Verify checks the whole audit trail of h on one consistent snapshot
// while writers go on, and stops at the first broken item, returned in the
// report with an error matching ErrBrokenChain:
//
//   - the database-wide audit chain: entry hashes and links, its head, and
//     that the workflows it records as live are exactly the workflows
//     stored (a workflow deleted whole, or one added behind the store's
//     back, is reported);
//   - every workflow's event chain: each event's hash in its version,
//     sequence numbers without gaps, links, and the stored head and count;
//     every stored event body is in a chain or journaled for one
//     (tgdriver.Reads.UnheldEvent);
//   - every task: the stored state, owner, generation, attempts, result and
//     error equal what its last event (format 2) records it left, and the
//     stored payload matches the digest of its create event (format 2).
//     Tasks whose events are all in format 1 are checked only for having
//     events.
func Verify(ctx context.Context, h History) (VerifyReport, error) {
	var rep VerifyReport
	if err := h.Link(ctx, ""); err != nil {
		return rep, fmt.Errorf("verify history: %w", err)
	}
	var brokenErr error
	err := h.Snapshot(ctx, func(rd tgdriver.Reads) error {
		rep = VerifyReport{}
		brokenErr = nil
		fail := func(b *BrokenLink) error {
			rep.Broken = b
			where := "workflow " + b.WorkflowID
			switch {
			case b.AuditSeq > 0:
				where = fmt.Sprintf("audit entry %d", b.AuditSeq)
				if b.WorkflowID != "" {
					where += " (workflow " + b.WorkflowID + ")"
				}
			case b.TaskID != "":
				where += fmt.Sprintf(" event %d task %s", b.Seq, b.TaskID)
			case b.WorkflowID == "":
				where = "audit chain"
			case b.Seq == 0 && b.EventID > 0:
				where += fmt.Sprintf(" event id %d", b.EventID)
			default:
				where += fmt.Sprintf(" event %d", b.Seq)
			}
			brokenErr = fmt.Errorf("%w: %s: %s", ErrBrokenChain, where, b.Reason)
			return nil
		}
		orphan, ok, err := rd.OrphanEventWorkflow(ctx)
		if err != nil {
			return err
		}
		if ok {
			return fail(&BrokenLink{WorkflowID: orphan, Reason: "events exist for a workflow that has no chain head"})
		}
		heads, err := rd.Workflows(ctx)
		if err != nil {
			return err
		}
		if b, err := verifyAuditChain(ctx, rd, heads, &rep); err != nil || b != nil {
			if err != nil {
				return err
			}
			return fail(b)
		}
		broken, err := verifyWorkflows(ctx, rd, heads, &rep)
		if broken != nil {
			return fail(broken)
		}
		if err != nil {
			return err
		}
		// Last, so that a link deleted from a chain is reported as the gap
		// it leaves, not as the body it left unheld.
		wf, id, ok, err := rd.UnheldEvent(ctx)
		if err != nil {
			return err
		}
		if ok {
			return fail(&BrokenLink{WorkflowID: wf, EventID: id, Reason: fmt.Sprintf(
				"the body of event id %d is stored but neither linked into the chain nor journaled (written behind the store's back)", id)})
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	return rep, brokenErr
}

// verifyAuditChain checks the database-wide chain against the stored
// workflows.
func verifyAuditChain(ctx context.Context, rd tgdriver.Reads, heads []tgdriver.WorkflowRow, rep *VerifyReport) (*BrokenLink, error) {
	count, headHash, _, err := rd.AuditHead(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]int64{} // workflow -> the entry that made it live
	prev := ""
	var n int64
	var broken *BrokenLink
	err = rd.AuditEntries(ctx, func(a tgdriver.AuditRow) error {
		n++
		stop := func(reason string, args ...any) error {
			broken = &BrokenLink{WorkflowID: a.WorkflowID, AuditSeq: a.Seq, Reason: fmt.Sprintf(reason, args...)}
			return errStop
		}
		if a.Seq != n {
			return stop("audit sequence %d found where %d was expected (an entry is missing or was inserted)", a.Seq, n)
		}
		if a.PrevHash != prev {
			return stop("prev_hash does not match the hash of audit entry %d", n-1)
		}
		want, err := EntryHash(a)
		if err != nil || want != a.Hash {
			return stop("content does not match its hash (the audit entry was edited)")
		}
		prev = a.Hash
		switch {
		case n == 1 && a.Kind != EntrySwitch:
			return stop("the audit chain does not start with its %q entry", EntrySwitch)
		case a.Kind == EntrySwitch && n != 1:
			return stop("a second %q entry", EntrySwitch)
		case a.Kind == EntryAdopt || a.Kind == EntryCreate:
			if at, ok := live[a.WorkflowID]; ok {
				return stop("workflow %s recorded again, but it is live since audit entry %d", a.WorkflowID, at)
			}
			live[a.WorkflowID] = a.Seq
		case a.Kind == EntryPrune:
			if _, ok := live[a.WorkflowID]; !ok {
				return stop("prune of workflow %s, which is not live", a.WorkflowID)
			}
			delete(live, a.WorkflowID)
		case a.Kind == EntryPause || a.Kind == EntryResume:
			if _, ok := live[a.WorkflowID]; a.WorkflowID != "" && !ok {
				return stop("%s of workflow %s, which is not live", a.Kind, a.WorkflowID)
			}
		case a.Kind == EntryLimit:
			if a.WorkflowID != "" {
				return stop("%s entry names workflow %s; limits are database-wide", a.Kind, a.WorkflowID)
			}
		case a.Kind != EntrySwitch:
			return stop("unknown audit entry kind %q", a.Kind)
		}
		return nil
	})
	rep.AuditEntries = n
	if broken != nil {
		return broken, nil
	}
	if err != nil {
		return nil, err
	}
	if n != count || prev != headHash {
		return &BrokenLink{Reason: fmt.Sprintf("the audit chain has %d entries ending in %q but its head records %d ending in %q (entries were removed or added)", n, prev, count, headHash)}, nil
	}
	if n == 0 {
		if len(heads) > 0 {
			return &BrokenLink{WorkflowID: heads[0].WorkflowID, Reason: fmt.Sprintf("the audit chain is empty but %d workflows are stored (open the database read-write once with this binary to start it, or it was removed)", len(heads))}, nil
		}
		return nil, nil
	}
	for _, h := range heads {
		if _, ok := live[h.WorkflowID]; !ok {
			return &BrokenLink{WorkflowID: h.WorkflowID, Reason: "the workflow is stored but the audit chain records no creation of it (it was added behind the store's back)"}, nil
		}
		delete(live, h.WorkflowID)
	}
	if len(live) > 0 {
		missing := make([]string, 0, len(live))
		for wf := range live {
			missing = append(missing, wf)
		}
		sort.Slice(missing, func(i, j int) bool { return live[missing[i]] < live[missing[j]] })
		wf := missing[0]
		return &BrokenLink{WorkflowID: wf, AuditSeq: live[wf], Reason: fmt.Sprintf("workflow %s, recorded live by audit entry %d, is missing (deleted whole without a prune); %d workflows are missing", wf, live[wf], len(missing))}, nil
	}
	return nil, nil
}

// errStop ends a walk early.
var errStop = errors.New("stop")

// stateDiff names the fields of two task-state objects that differ, as
// "result differs", "state, owner differ".
func stateDiff(stored, recorded []byte) string {
	var a, b map[string]any
	_ = json.Unmarshal(stored, &a)
	_ = json.Unmarshal(recorded, &b)
	var out []string
	for _, k := range []string{"state", "owner", "generation", "attempts", "result_sha256", "error_sha256"} {
		if fmt.Sprint(a[k]) != fmt.Sprint(b[k]) {
			out = append(out, strings.TrimSuffix(k, "_sha256"))
		}
	}
	switch len(out) {
	case 0:
		return "task state differs"
	case 1:
		return out[0] + " differs"
	}
	return strings.Join(out, ", ") + " differ"
}
