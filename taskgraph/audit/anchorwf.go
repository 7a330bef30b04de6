package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// WorkflowHead is one workflow's chain head at a time (an anchor line of
// serve --audit-anchor). The database-wide head (Head) detects that
// events are gone; a workflow head names the workflow that lost them: the
// database extends it when the workflow's chain still holds event Events
// with hash Hash, or when the workflow was pruned with at least Events
// events (with head Hash when exactly as many).
type WorkflowHead struct {
	At         time.Time
	WorkflowID string
	Events     int64
	Hash       string
}

// String is the head as an anchor line writes it after the time:
// "workflow WORKFLOW_ID EVENTS:HASH".
func (h WorkflowHead) String() string {
	return fmt.Sprintf("workflow %s %d:%s", h.WorkflowID, h.Events, h.Hash)
}

// MaxAnchorWorkflows bounds the workflow heads RecentWorkflowHeads returns,
// so each write of serve --audit-anchor is bounded however many workflows
// changed; the database-wide head covers the others.
const MaxAnchorWorkflows = 64

var workflowHeadRE = regexp.MustCompile(`^workflow (\S{1,128}) ([0-9]{1,18}):([0-9a-f]{64})$`)

// IsWorkflowHeadLine reports whether an anchor line holds a workflow head
// (its token after the time starts with "workflow ").
func IsWorkflowHeadLine(s string) bool {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "workflow ") {
		return true
	}
	_, rest, _ := strings.Cut(s, " ")
	return strings.HasPrefix(rest, "workflow ")
}

// ParseWorkflowHead parses an anchor line "TIME workflow WORKFLOW_ID
// EVENTS:HASH" (or the same without the time).
func ParseWorkflowHead(s string) (WorkflowHead, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxAnchorLine {
		return WorkflowHead{}, fmt.Errorf("%w: longer than %d bytes", ErrBadAnchor, MaxAnchorLine)
	}
	var h WorkflowHead
	if !strings.HasPrefix(s, "workflow ") {
		at, rest, _ := strings.Cut(s, " ")
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return WorkflowHead{}, fmt.Errorf("%w: time %q is not RFC 3339", ErrBadAnchor, at)
		}
		h.At, s = t, rest
	}
	m := workflowHeadRE.FindStringSubmatch(s)
	if m == nil || !validIdentifier(m[1]) {
		return WorkflowHead{}, fmt.Errorf("%w: %q is not \"workflow WORKFLOW_ID EVENTS:HASH\"", ErrBadAnchor, s)
	}
	h.WorkflowID = m[1]
	h.Events, _ = strconv.ParseInt(m[2], 10, 64)
	h.Hash = m[3]
	if h.Events == 0 {
		return WorkflowHead{}, fmt.Errorf("%w: %q: a workflow head names at least one event", ErrBadAnchor, s)
	}
	return h, nil
}

// RecentWorkflowHeads returns the heads of h's workflows changed at or
// after sinceMS (server time), the most recently changed first, at most
// MaxAnchorWorkflows, from one snapshot.
func RecentWorkflowHeads(ctx context.Context, h History, sinceMS int64) ([]WorkflowHead, error) {
	var out []WorkflowHead
	if err := h.Link(ctx, ""); err != nil {
		return nil, fmt.Errorf("read workflow heads: %w", err)
	}
	err := h.Snapshot(ctx, func(rd tgdriver.Reads) error {
		wfs, err := rd.Workflows(ctx)
		if err != nil {
			return err
		}
		SortByRecency(wfs)
		out = out[:0]
		for _, w := range wfs {
			if w.UpdatedAtMS < sinceMS || len(out) == MaxAnchorWorkflows {
				break
			}
			if w.EventCount > 0 && validIdentifier(w.WorkflowID) { // a line ParseWorkflowHead reads back
				out = append(out, WorkflowHead{At: time.UnixMilli(w.UpdatedAtMS).UTC(), WorkflowID: w.WorkflowID, Events: w.EventCount, Hash: w.HeadHash})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the workflow heads: %w", err)
	}
	return out, nil
}

// CheckWorkflowAnchor returns nil if the database of h extends anchored,
// else an error matching ErrAnchorNotExtended that names the workflow and
// the events it lost. It does not verify the chain (Verify does: a chain
// that verifies and holds the anchored event with its hash holds every
// event before it).
func CheckWorkflowAnchor(ctx context.Context, h History, anchored WorkflowHead) error {
	var reason string
	if err := h.Link(ctx, anchored.WorkflowID); err != nil {
		return fmt.Errorf("check the anchor of workflow %s: %w", anchored.WorkflowID, err)
	}
	err := h.Snapshot(ctx, func(rd tgdriver.Reads) error {
		reason = ""
		hash, ok, err := rd.EventHashAt(ctx, anchored.WorkflowID, anchored.Events)
		if err != nil {
			return err
		}
		if ok {
			if hash != anchored.Hash {
				reason = fmt.Sprintf("event %d of workflow %s has hash %s, the anchor %s (the chain was rewritten)", anchored.Events, anchored.WorkflowID, hash, anchored.Hash)
			}
			return nil
		}
		// Gone: pruned with at least as many events, or lost.
		var pruned bool
		err = rd.AuditEntries(ctx, func(a tgdriver.AuditRow) error {
			if a.Kind != EntryPrune || a.WorkflowID != anchored.WorkflowID {
				return nil
			}
			var d struct {
				Events int64  `json:"event_count"`
				Head   string `json:"head_hash"`
			}
			if err := jsonUnmarshalString(a.Detail, &d); err != nil {
				return fmt.Errorf("%w: audit entry %d detail: %v", ErrBrokenChain, a.Seq, err)
			}
			if d.Events > anchored.Events || d.Events == anchored.Events && d.Head == anchored.Hash {
				pruned = true
			}
			return nil
		})
		if err != nil || pruned {
			return err
		}
		have := int64(0)
		if w, err := rd.Workflow(ctx, anchored.WorkflowID); err == nil {
			have = w.EventCount
		} else if !errors.Is(err, tgdriver.ErrNoRows) {
			return err
		}
		switch {
		case have == 0:
			reason = fmt.Sprintf("workflow %s is gone (no events, no prune), the anchor recorded %d events: all %d are gone", anchored.WorkflowID, anchored.Events, anchored.Events)
		default:
			reason = fmt.Sprintf("workflow %s holds %d events, the anchor recorded %d: events %d to %d of workflow %s are gone (a dropped tail, a lost WAL, or an older copy restored)",
				anchored.WorkflowID, have, anchored.Events, have+1, anchored.Events, anchored.WorkflowID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("check the workflow anchor: %w", err)
	}
	return notExtended(anchored, anchored.At, reason)
}

var identifierRE = regexp.MustCompile(limits.IdentifierPattern)

// validIdentifier reports whether s is a workflow id the store accepts
// (taskgraph.ValidIdentifier).
func validIdentifier(s string) bool { return identifierRE.MatchString(s) }

// SortByRecency orders workflow rows the most recently changed first, ties
// by id: the order of RecentWorkflowHeads and of the store's recent
// workflows.
func SortByRecency(wfs []tgdriver.WorkflowRow) {
	slices.SortFunc(wfs, func(a, b tgdriver.WorkflowRow) int {
		if c := cmp.Compare(b.UpdatedAtMS, a.UpdatedAtMS); c != 0 {
			return c
		}
		return strings.Compare(a.WorkflowID, b.WorkflowID)
	})
}
