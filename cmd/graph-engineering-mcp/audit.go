package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:        "audit",
		Usage:       "check the tamper-evident event history",
		Description: `Every transition is recorded in a per-workflow hash chain of events.`,
		Subcommands: []*cli.Command{auditVerifyCommand(), auditHeadCommand(), auditExportCommand()},
		Action:      groupAction,
	}
}

func auditVerifyCommand() *cli.Command {
	return &cli.Command{
		Name:      "verify",
		Usage:     "verify every workflow's event hash chain",
		UsageText: "graph-engineering-mcp audit verify [--anchor FILE] [--expect HEAD] [--json] [--database PATH]",
		Description: `Recomputes each workflow's hash chain from the stored events: every event's
hash from its content and the previous hash, sequence numbers without gaps,
and the chain head the workflow records; checks the database-wide audit
chain (every workflow's creation and prune) against the stored workflows;
and checks every task row against the state its last event left and its
payload against its create event. It reads one consistent snapshot, so it
is safe while a server writes.

With --anchor FILE (heads appended by serve --audit-anchor) or --expect HEAD
(a head printed by audit head) it also fails unless the database extends
every such head: a dropped tail, a lost WAL or an older copy restored. The
workflow heads serve --audit-anchor writes beside the database-wide ones
are checked first, so the error names the workflow that lost events.

Exits 0 and prints how many workflows and events verified when all is well;
exits 1 naming the first broken link (workflow, sequence number, event id and
what is wrong) when an event was edited, removed or inserted behind the
store's back.

Example:
   graph-engineering-mcp audit verify`,
		Flags: []cli.Flag{databaseFlag(), jsonFlag(),
			&cli.StringFlag{Name: "anchor", Usage: "fail unless the database extends every head in `FILE` (one per line, as serve --audit-anchor writes)"},
			&cli.StringSliceFlag{Name: "expect", Usage: "fail unless the database extends `HEAD` (ENTRIES:EVENTS:HASH, as audit head prints; repeatable)"},
		},
		Action: leafAction(nil, auditVerifyAction),
	}
}

// verifyJSON is the --json output of audit verify.
type verifyJSON struct {
	OK           bool  `json:"ok"`
	Workflows    int   `json:"workflows"`
	Events       int64 `json:"events"`
	Tasks        int64 `json:"tasks"`
	AuditEntries int64 `json:"audit_entries"`
	V1Events     int64 `json:"v1_events"`
	Anchors      int   `json:"anchors_checked"`
	// WorkflowAnchors counts the workflow heads of --anchor checked (the
	// latest of each workflow).
	WorkflowAnchors int         `json:"workflow_anchors_checked,omitempty"`
	Broken          *brokenJSON `json:"broken,omitempty"`
	Anchor          string      `json:"anchor_error,omitempty"`
}

// brokenJSON is the first link of the history that does not verify.
type brokenJSON struct {
	WorkflowID string `json:"workflow_id"`
	Seq        int64  `json:"seq"`
	EventID    int64  `json:"event_id"`
	TaskID     string `json:"task_id,omitempty"`
	AuditSeq   int64  `json:"audit_seq,omitempty"`
	Reason     string `json:"reason"`
}

func auditVerifyAction(c *cli.Context, _ []string) error {
	var anchors []taskgraph.AuditHead
	var wfAnchors []taskgraph.WorkflowHead
	if path := c.String("anchor"); path != "" {
		var err error
		if anchors, wfAnchors, err = readAnchors(path); err != nil {
			return err
		}
		wfAnchors = latestWorkflowHeads(wfAnchors)
	}
	for _, x := range c.StringSlice("expect") {
		h, err := taskgraph.ParseAuditHead(x)
		if err != nil {
			return usagef("--expect: %v", err)
		}
		anchors = append(anchors, h)
	}
	return withReadOnlyStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		rep, err := s.VerifyHistory(ctx)
		if err != nil && !errors.Is(err, taskgraph.ErrBrokenChain) {
			return fmt.Errorf("verify history: %w", err)
		}
		if rep.Broken == nil && err != nil {
			return fmt.Errorf("verify history: %w", err)
		}
		var anchorErr error
		checked, wfChecked := 0, 0
		// Workflow heads first: a failing one names the workflow that lost
		// events, where a database-wide head only counts them.
		for _, h := range wfAnchors {
			if rep.Broken != nil {
				break
			}
			if anchorErr = s.CheckWorkflowAnchor(ctx, h); anchorErr != nil {
				break
			}
			wfChecked++
		}
		if rep.Broken == nil && anchorErr == nil {
			for _, h := range anchors {
				if anchorErr = s.CheckAnchor(ctx, h); anchorErr != nil {
					break
				}
				checked++
			}
		}
		if anchorErr != nil && !errors.Is(anchorErr, taskgraph.ErrAnchorNotExtended) {
			return anchorErr
		}
		if c.Bool("json") {
			out := verifyJSON{OK: rep.Broken == nil && anchorErr == nil, Workflows: rep.Workflows, Events: rep.Events, Tasks: rep.Tasks,
				AuditEntries: rep.AuditEntries, V1Events: rep.V1Events, Anchors: checked, WorkflowAnchors: wfChecked}
			if b := rep.Broken; b != nil {
				out.Broken = &brokenJSON{WorkflowID: b.WorkflowID, Seq: b.Seq, EventID: b.EventID, TaskID: b.TaskID, AuditSeq: b.AuditSeq, Reason: b.Reason}
			}
			if anchorErr != nil {
				out.Anchor = anchorErr.Error()
			}
			if err := writeJSON(c.App.Writer, out); err != nil {
				return err
			}
		}
		if b := rep.Broken; b != nil {
			where := fmt.Sprintf("workflow %s, event seq %d (event id %d)", b.WorkflowID, b.Seq, b.EventID)
			switch {
			case b.AuditSeq > 0:
				where = fmt.Sprintf("audit entry %d", b.AuditSeq)
			case b.TaskID != "":
				where = fmt.Sprintf("workflow %s, task %s", b.WorkflowID, b.TaskID)
				if b.Seq > 0 {
					where += fmt.Sprintf(" (event seq %d)", b.Seq)
				}
			case b.WorkflowID == "":
				where = "the audit chain's head"
			case b.Seq == 0:
				where = fmt.Sprintf("workflow %s, chain head", b.WorkflowID)
			}
			return fmt.Errorf("%w: first broken link at %s: %s", taskgraph.ErrBrokenChain, where, b.Reason)
		}
		if anchorErr != nil {
			return anchorErr
		}
		if c.Bool("json") {
			return nil
		}
		msg := fmt.Sprintf("history verified: %d workflow(s), %d event(s), every hash chain intact", rep.Workflows, rep.Events)
		if len(anchors) > 0 {
			msg += fmt.Sprintf("; extends %d anchored head(s)", checked)
		}
		if wfChecked > 0 {
			msg += fmt.Sprintf(" and %d workflow head(s)", wfChecked)
		}
		_, err = fmt.Fprintln(c.App.Writer, msg)
		return err
	})
}

func auditHeadCommand() *cli.Command {
	return &cli.Command{
		Name:      "head",
		Usage:     "print the database-wide audit head, to keep outside the database",
		UsageText: "graph-engineering-mcp audit head [--json] [--database PATH]",
		Description: `Prints the time and the database-wide head of the audit trail as
ENTRIES:EVENTS:HASH (the audit chain's entry count, the number of events
stored, the audit chain's head hash). Keep it anywhere; later,
audit verify --expect HEAD fails unless the database extends it.

Example:
   graph-engineering-mcp audit head`,
		Flags:  []cli.Flag{databaseFlag(), jsonFlag()},
		Action: leafAction(nil, auditHeadAction),
	}
}

func auditHeadAction(c *cli.Context, _ []string) error {
	return withReadOnlyStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		h, err := s.AuditHead(ctx)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, map[string]any{"at": h.At.UTC().Format(time.RFC3339Nano), "entries": h.Entries, "events": h.Events, "hash": h.Hash, "head": h.String()})
		}
		_, err = io.WriteString(c.App.Writer, anchorLine(h))
		return err
	})
}

func auditExportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write every event and audit entry as JSON Lines",
		UsageText: "graph-engineering-mcp audit export [--database PATH] > audit.jsonl",
		Description: `Writes one canonical JSON object (RFC 8785) per line: every event of every
workflow in chain order, then every entry of the database-wide audit chain,
in the format MCP.md describes ("Audit trail format"), from one consistent
snapshot. scripts/audit-verify.py recomputes every hash from it.

Example:
   graph-engineering-mcp audit export > audit.jsonl && python3 scripts/audit-verify.py audit.jsonl`,
		Flags:  []cli.Flag{databaseFlag()},
		Action: leafAction(nil, auditExportAction),
	}
}

func auditExportAction(c *cli.Context, _ []string) error {
	return withReadOnlyStore(c, func(ctx context.Context, s *taskgraph.Store) error {
		w := bufio.NewWriterSize(c.App.Writer, 1<<16)
		if err := s.ExportAudit(ctx, w); err != nil {
			return err
		}
		return w.Flush()
	})
}

func init() {
	registerCommands(func() []*cli.Command { return []*cli.Command{auditCommand()} })
}
