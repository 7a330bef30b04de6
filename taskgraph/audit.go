package taskgraph

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Hash format versions of events and of the audit chain (see MCP.md, "Audit
// trail format").
const (
	// HashV1 is the format of events written before migration 0003:
	// sha256(prev_hash + "\n" + encoding/json of eight fields).
	HashV1 = 1
	// HashV2 is the format of every event written since: sha256 of the RFC
	// 8785 canonical JSON of an object that also covers the actor, the
	// digests of the content the event changed and the task state it leaves.
	HashV2 = 2
)

// Actor kinds: who caused an event.
const (
	ActorWorker    = "worker"    // the holder of a claim, or a claimant
	ActorOperator  = "operator"  // an operator command (requeue, skip, abort, prune)
	ActorRequestor = "requestor" // a protocol request (MCP tasks/cancel)
	ActorSweeper   = "sweeper"   // the server's lease sweeper
	ActorServer    = "server"    // the store itself (expiries in passing, lease shifts)
	ActorSubmitter = "submitter" // the creator of a task
)

// Actor is who caused an event: a kind, a name (the worker's owner, the
// operator's name; "" when there is none) and the authenticated principal of
// the request (PrincipalFrom), "" when none.
type Actor struct {
	Kind      string
	Name      string
	Principal string
}

// Audit chain entry kinds (the database-wide chain).
const (
	// AuditSwitch is the first entry: the database moved to hash format 2.
	AuditSwitch = "hash_v2"
	// AuditAdopt records a workflow that existed at the switch, with its head.
	AuditAdopt = "adopt"
	// AuditCreate records a workflow's creation.
	AuditCreate = "create"
	// AuditPrune records a workflow's removal by prune, with its final head.
	AuditPrune = "prune"
)

// actorOf is the actor of w's operation, with the principal of its context.
func (w *wtx) actorOf() Actor {
	a := w.actor
	if a.Kind == "" {
		a.Kind = ActorServer
	}
	a.Principal = PrincipalFrom(w.ctx)
	return a
}

// as sets the actor of w's operation and returns w.
func (w *wtx) as(kind, name string) *wtx {
	w.actor = Actor{Kind: kind, Name: name}
	return w
}

// --- canonical JSON (RFC 8785) for the values the store hashes ---

// jcsString appends s as an RFC 8785 string: only '"', '\\' and control
// characters are escaped (the short forms where JSON has them, else
// \u00xx); everything else is written as UTF-8. Invalid UTF-8 becomes
// U+FFFD, so the output is always valid I-JSON.
func jcsString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	start := 0 // s[start:i] is copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || n != 1 {
				i += n
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jcsAppend appends v in canonical form. It takes the types the store's
// event details and states are built from: string, bool, nil, integers
// (within ±2^53, written as decimal digits as RFC 8785 does), []string,
// json.RawMessage already canonical, and map[string]any (members sorted by
// key; the store's keys are ASCII, where UTF-16 order is byte order); and
// what encoding/json decodes into with UseNumber ([]any, json.Number, which
// must be an integer), for recanonical.
func jcsAppend(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return jcsString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return jcsInt(b, int64(x))
	case int64:
		return jcsInt(b, x)
	case json.Number: // as decoded with UseNumber: an integer, or refused
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s is not an integer", x)
		}
		return jcsInt(b, n)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = jcsAppend(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case []string:
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = jcsString(b, s)
		}
		return append(b, ']'), nil
	case json.RawMessage:
		return append(b, x...), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jcsString(b, k)
			b = append(b, ':')
			var err error
			if b, err = jcsAppend(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("%w: canonical JSON of %T is not supported", errInternal, v)
}

func jcsInt(b []byte, n int64) ([]byte, error) {
	if n > 1<<53 || n < -(1<<53) {
		return nil, fmt.Errorf("%w: integer %d is beyond what RFC 8785 represents exactly", errInternal, n)
	}
	return strconv.AppendInt(b, n, 10), nil
}

// recanonical re-encodes the JSON text s in canonical form, for checking
// that a stored detail, state or content is canonical: numbers must be
// integers, as everything the store writes is.
func recanonical(s string) ([]byte, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return jcsAppend(nil, v)
}

func sha256Of(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// taskStateJSON is the canonical JSON of the task state an event leaves:
// state, owner, generation, attempts and the digests of result and error
// (null when absent). Verify compares it with the stored row.
func taskStateJSON(state, owner string, generation int64, attempts int, result string, hasResult bool, errText string) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"attempts":`...)
	b = strconv.AppendInt(b, int64(attempts), 10)
	b = append(b, `,"error_sha256":`...)
	if errText == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, sha256Of(errText)...)
		b = append(b, '"')
	}
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, generation, 10)
	b = append(b, `,"owner":`...)
	b = jcsString(b, owner)
	b = append(b, `,"result_sha256":`...)
	if !hasResult {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, sha256Of(result)...)
		b = append(b, '"')
	}
	b = append(b, `,"state":`...)
	b = jcsString(b, state)
	return append(b, '}')
}

// contentJSON is the canonical JSON of the digests of the content an event
// of kind changed: the payload at create, the result at complete, the error
// at fail, retry and expire, the reason of an operator or request.
func contentJSON(kind string, r *row, detail map[string]any) []byte {
	key, val := "", ""
	switch kind {
	case EventCreate:
		key, val = "payload_sha256", string(r.Payload)
	case EventComplete:
		key, val = "result_sha256", string(r.Result)
	case EventFail, EventRetry:
		key, val = "error_sha256", r.Error
	case EventExpire:
		if r.State == StateFailed { // the last attempt's lapse records an error
			key, val = "error_sha256", r.Error
		}
	default:
		if reason, ok := detail["reason"].(string); ok {
			key, val = "reason_sha256", reason
		}
	}
	if key == "" {
		return []byte("{}")
	}
	b := make([]byte, 0, 90)
	b = append(b, '{', '"')
	b = append(b, key...)
	b = append(b, `":"`...)
	b = append(b, sha256Of(val)...)
	return append(b, '"', '}')
}

// eventObjectV2 is the canonical JSON that a v2 event's hash covers; detail,
// state and content must already be canonical.
func eventObjectV2(e Event, detail, state, content []byte) []byte {
	return appendEventObjectV2(make([]byte, 0, 320+len(detail)+len(state)+len(content)), e, detail, state, content)
}

// appendEventObjectV2 appends eventObjectV2 of e to b.
func appendEventObjectV2[T string | []byte](b []byte, e Event, detail, state, content T) []byte {
	b = append(b, `{"actor":{"kind":`...)
	b = jcsString(b, e.Actor.Kind)
	b = append(b, `,"name":`...)
	b = jcsString(b, e.Actor.Name)
	b = append(b, `,"principal":`...)
	b = jcsString(b, e.Actor.Principal)
	b = append(b, `},"at_ms":`...)
	b = strconv.AppendInt(b, e.At.UnixMilli(), 10)
	b = append(b, `,"content":`...)
	b = append(b, content...)
	b = append(b, `,"detail":`...)
	b = append(b, detail...)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, e.Generation, 10)
	b = append(b, `,"kind":`...)
	b = jcsString(b, e.Kind)
	b = append(b, `,"owner":`...)
	b = jcsString(b, e.Owner)
	b = append(b, `,"prev_hash":`...)
	b = jcsString(b, e.PrevHash)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"state":`...)
	b = append(b, state...)
	b = append(b, `,"task_id":`...)
	b = jcsString(b, e.TaskID)
	b = append(b, `,"v":2,"workflow_id":`...)
	b = jcsString(b, e.WorkflowID)
	return append(b, '}')
}

func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// eventHashV2 checks that e's detail, state and content are canonical and
// returns the hash of its v2 object.
func eventHashV2(e Event) (string, error) {
	if err := checkCanonicalV2(string(e.Detail), string(e.State), string(e.Content)); err != nil {
		return "", err
	}
	return hashHex(eventObjectV2(e, e.Detail, e.State, e.Content)), nil
}

// checkCanonicalV2 returns an error matching errNotCanonical unless a v2
// event's detail, task state and content are canonical JSON.
func checkCanonicalV2(detail, state, content string) error {
	parts := [3]string{detail, state, content}
	for i, name := range [3]string{"detail", "task state", "content"} {
		if isCanonicalFastString(parts[i]) {
			continue
		}
		c, err := recanonical(parts[i])
		if err != nil {
			return fmt.Errorf("%w: event %s is not canonical JSON: %v", errNotCanonical, name, err)
		}
		if string(c) != parts[i] {
			return fmt.Errorf("%w: event %s is not in RFC 8785 canonical form", errNotCanonical, name)
		}
	}
	return nil
}

// errNotCanonical marks a stored v2 field that is not canonical JSON: the
// event was edited (the store writes only canonical text).
var errNotCanonical = errors.New("not canonical")

// auditObject is the canonical JSON that an audit chain entry's hash covers.
func auditObject(a tgdriver.AuditRow) []byte {
	b := make([]byte, 0, 200+len(a.Detail))
	b = append(b, `{"at_ms":`...)
	b = strconv.AppendInt(b, a.AtMS, 10)
	b = append(b, `,"detail":`...)
	b = append(b, a.Detail...)
	b = append(b, `,"kind":`...)
	b = jcsString(b, a.Kind)
	b = append(b, `,"prev_hash":`...)
	b = jcsString(b, a.PrevHash)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, a.Seq, 10)
	b = append(b, `,"v":2,"workflow_id":`...)
	b = jcsString(b, a.WorkflowID)
	return append(b, '}')
}

// AuditEntryHash computes the hash of an audit chain entry from its fields
// and PrevHash (see MCP.md, "Audit trail format").
func AuditEntryHash(a tgdriver.AuditRow) (string, error) {
	if !isCanonicalFastString(a.Detail) {
		c, err := recanonical(a.Detail)
		if err != nil || string(c) != a.Detail {
			return "", fmt.Errorf("%w: audit entry %d detail is not canonical JSON", errNotCanonical, a.Seq)
		}
	}
	return hashHex(auditObject(a)), nil
}

// appendAudit records an entry of the database-wide chain. It locks the
// audit head (after any workflow row this operation locked); on a database
// whose chain is empty it first records the switch to hash format 2 and
// adopts every workflow that exists, with its head.
func (w *wtx) appendAudit(kind, workflowID string, detail map[string]any) error {
	count, head, err := w.tx.LockAuditHead(w.ctx)
	if err != nil {
		return err
	}
	if count == 0 {
		if count, head, err = w.auditGenesis(workflowID); err != nil {
			return err
		}
	}
	if kind == "" {
		return nil
	}
	_, err = w.putAudit(count, head, kind, workflowID, detail)
	return err
}

// auditGenesis writes the first entries of an empty audit chain: the switch,
// then one adopt entry per existing workflow except skip (a workflow this
// very operation is creating).
func (w *wtx) auditGenesis(skip string) (int64, string, error) {
	heads, err := w.tx.Workflows(w.ctx)
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
	head, err := w.putAudit(0, "", AuditSwitch, "", map[string]any{"hash_version": HashV2, "workflows": len(adopt), "events": events})
	if err != nil {
		return 0, "", err
	}
	count := int64(1)
	for _, h := range adopt {
		if head, err = w.putAudit(count, head, AuditAdopt, h.WorkflowID, map[string]any{"event_count": h.EventCount, "head_hash": h.HeadHash}); err != nil {
			return 0, "", err
		}
		count++
	}
	return count, head, nil
}

func (w *wtx) putAudit(count int64, head, kind, workflowID string, detail map[string]any) (string, error) {
	d, err := jcsAppend(nil, detail)
	if err != nil {
		return "", err
	}
	a := tgdriver.AuditRow{Seq: count + 1, Kind: kind, WorkflowID: workflowID, AtMS: w.nowMS, Detail: string(d), PrevHash: head}
	a.Hash = hashHex(auditObject(a))
	if err := w.tx.AppendAudit(w.ctx, a); err != nil {
		if errors.Is(err, tgdriver.ErrChainMoved) {
			return "", fmt.Errorf("%w: the audit head moved while entry %d was appended: %v", errInternal, a.Seq, err)
		}
		return "", fmt.Errorf("append audit entry: %w", err)
	}
	return a.Hash, nil
}

// ensureAudit starts the audit chain of a database that has none (at Open,
// so that the switch to hash format 2 is recorded before anything else).
func (s *Store) ensureAudit(ctx context.Context) error {
	return s.do(ctx, func(w *wtx) error { return w.appendAudit("", "", nil) })
}

// ExportEvent returns e as one line of `audit export` (canonical JSON, no
// newline). At HashV2 the line is the hashed object with "hash" added; at
// HashV1 it holds the hashed fields, the stored detail text as the string
// "detail_json" (format 1 hashes those exact bytes), "v":1 and "hash".
func ExportEvent(e Event) ([]byte, error) {
	m := map[string]any{"at_ms": e.At.UnixMilli(), "generation": e.Generation, "hash": e.Hash, "kind": e.Kind,
		"owner": e.Owner, "prev_hash": e.PrevHash, "seq": e.Seq, "task_id": e.TaskID, "workflow_id": e.WorkflowID}
	if e.HashVersion >= HashV2 {
		// Stored text is written as it is (canonical unless tampered with,
		// which a verifier then reports).
		m["v"] = e.HashVersion
		m["actor"] = map[string]any{"kind": e.Actor.Kind, "name": e.Actor.Name, "principal": e.Actor.Principal}
		m["detail"], m["state"], m["content"] = e.Detail, e.State, e.Content
	} else {
		m["v"] = HashV1
		m["detail_json"] = string(e.Detail)
	}
	return jcsAppend(nil, m)
}

// ExportAuditEntry returns a as one line of `audit export`: the hashed
// object with "hash" added and "chain":"audit" to tell it from events.
func ExportAuditEntry(a tgdriver.AuditRow) ([]byte, error) {
	return jcsAppend(nil, map[string]any{"chain": "audit", "at_ms": a.AtMS, "detail": json.RawMessage(a.Detail), "kind": a.Kind,
		"prev_hash": a.PrevHash, "seq": a.Seq, "v": HashV2, "workflow_id": a.WorkflowID, "hash": a.Hash})
}

// ExportAudit writes `audit export` to w from one consistent snapshot: every
// event of every workflow in chain order (workflows by id), then every entry
// of the audit chain, one line each (see ExportEvent, ExportAuditEntry).
func (s *Store) ExportAudit(ctx context.Context, w io.Writer) error {
	if err := s.linkAll(ctx); err != nil {
		return fmt.Errorf("export the audit trail: %w", err)
	}
	return s.drv.Snapshot(ctx, func(rd tgdriver.Reads) error {
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
		for _, h := range heads {
			if err := rd.WorkflowEvents(ctx, h.WorkflowID, func(er tgdriver.EventRow) error {
				return line(ExportEvent(toEvent(er)))
			}); err != nil {
				return err
			}
		}
		return rd.AuditEntries(ctx, func(a tgdriver.AuditRow) error { return line(ExportAuditEntry(a)) })
	})
}
