package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// ErrEncode matches the error of AppendEntry when an entry's detail does
// not encode or hash: a fault of the caller, never of the database.
var ErrEncode = errors.New("audit entry does not encode")

// AppendEntry records an entry of kind (for workflowID, "" for the whole
// database) of the database-wide chain in tx, at server time nowMS. It
// locks the audit head (the caller locks any workflow row first); on a
// database whose chain is empty it first records the switch to hash
// format 2 (EntrySwitch) and adopts every workflow that exists, with its
// head (EntryAdopt), except workflowID when tx is creating it. An empty
// kind only starts the chain. A head that moved under the lock matches
// tgdriver.ErrChainMoved.
func AppendEntry(ctx context.Context, tx tgdriver.Tx, nowMS int64, kind, workflowID string, detail map[string]any) error {
	count, head, err := tx.LockAuditHead(ctx)
	if err != nil {
		return err
	}
	if count == 0 {
		if count, head, err = genesis(ctx, tx, nowMS, workflowID); err != nil {
			return err
		}
	}
	if kind == "" {
		return nil
	}
	_, err = putEntry(ctx, tx, nowMS, count, head, kind, workflowID, detail)
	return err
}

// genesis writes the first entries of an empty chain: the switch, then one
// adopt entry per existing workflow except skip (a workflow the very
// operation is creating).
func genesis(ctx context.Context, tx tgdriver.Tx, nowMS int64, skip string) (int64, string, error) {
	heads, err := tx.Workflows(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("read workflows for the audit chain: %w", err)
	}
	var events int64
	adopt := heads[:0:0]
	for _, h := range heads {
		if h.WorkflowID == skip && h.EventCount == 0 {
			continue
		}
		adopt = append(adopt, h)
		events += h.EventCount
	}
	head, err := putEntry(ctx, tx, nowMS, 0, "", EntrySwitch, "", map[string]any{"hash_version": HashV2, "workflows": len(adopt), "events": events})
	if err != nil {
		return 0, "", err
	}
	count := int64(1)
	for _, h := range adopt {
		if head, err = putEntry(ctx, tx, nowMS, count, head, EntryAdopt, h.WorkflowID, map[string]any{"event_count": h.EventCount, "head_hash": h.HeadHash}); err != nil {
			return 0, "", err
		}
		count++
	}
	return count, head, nil
}

func putEntry(ctx context.Context, tx tgdriver.Tx, nowMS, count int64, head, kind, workflowID string, detail map[string]any) (string, error) {
	d, err := jcs.Append(nil, detail)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrEncode, err)
	}
	a := tgdriver.AuditRow{Seq: count + 1, Kind: kind, WorkflowID: workflowID, AtMS: nowMS, Detail: string(d), PrevHash: head}
	if a.Hash, err = EntryHash(a); err != nil {
		return "", fmt.Errorf("%w: %v", ErrEncode, err)
	}
	if err := tx.AppendAudit(ctx, a); err != nil {
		if errors.Is(err, tgdriver.ErrChainMoved) {
			return "", fmt.Errorf("the audit head moved while entry %d was appended: %w", a.Seq, err)
		}
		return "", fmt.Errorf("append audit entry: %w", err)
	}
	return a.Hash, nil
}
