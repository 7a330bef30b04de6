package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// ExportEvent returns e as one line of `audit export` (canonical JSON, no
// newline). At HashV2 the line is the hashed object with "hash" added; at
// HashV1 it holds the hashed fields, the stored detail text as the string
// "detail_json" (format 1 hashes those exact bytes), "v":1 and "hash".
func ExportEvent(e *tgdriver.EventRow) ([]byte, error) {
	m := map[string]any{"at_ms": e.AtMS, "generation": e.Generation, "hash": e.Hash, "kind": e.Kind,
		"owner": e.Owner, "prev_hash": e.PrevHash, "seq": e.Seq, "task_id": e.TaskID, "workflow_id": e.WorkflowID}
	if e.HashVersion >= HashV2 {
		// Stored text is written as it is (canonical unless tampered with,
		// which a verifier then reports).
		m["v"] = e.HashVersion
		m["actor"] = map[string]any{"kind": e.ActorKind, "name": e.ActorName, "principal": e.ActorPrincipal}
		m["detail"], m["state"], m["content"] = json.RawMessage(e.Detail), json.RawMessage(e.TaskState), json.RawMessage(e.Content)
	} else {
		m["v"] = HashV1
		m["detail_json"] = e.Detail
	}
	return jcs.Append(nil, m)
}

// ExportEntry returns a as one line of `audit export`: the hashed object
// with "hash" added and "chain":"audit" to tell it from events.
func ExportEntry(a tgdriver.AuditRow) ([]byte, error) {
	return jcs.Append(nil, map[string]any{"chain": "audit", "at_ms": a.AtMS, "detail": json.RawMessage(a.Detail), "kind": a.Kind,
		"prev_hash": a.PrevHash, "seq": a.Seq, "v": HashV2, "workflow_id": a.WorkflowID, "hash": a.Hash})
}

// Export writes `audit export` to w from one consistent snapshot of h:
// every event of every workflow in chain order (workflows by id), then
// every entry of the audit chain, one line each (see ExportEvent,
// ExportEntry).
func Export(ctx context.Context, h History, w io.Writer) error {
	if err := h.Link(ctx, ""); err != nil {
		return fmt.Errorf("export the audit trail: %w", err)
	}
	return h.Snapshot(ctx, func(rd tgdriver.Reads) error {
		heads, err := rd.Workflows(ctx)
		if err != nil {
			return err
		}
		line := func(b []byte, err error) error {
			if err != nil {
				return err
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return fmt.Errorf("write the export: %w", err)
			}
			return nil
		}
		for _, hd := range heads {
			if err := rd.WorkflowEvents(ctx, hd.WorkflowID, func(er tgdriver.EventRow) error {
				return line(ExportEvent(&er))
			}); err != nil {
				return err
			}
		}
		return rd.AuditEntries(ctx, func(a tgdriver.AuditRow) error { return line(ExportEntry(a)) })
	})
}
