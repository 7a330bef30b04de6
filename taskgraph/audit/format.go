package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
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

// EventCreate is the kind of a task's first event, whose detail records the
// columns fixed at the task's creation and whose content the digest of its
// payload (the verifier checks the stored task against both).
const EventCreate = "create"

// Audit chain entry kinds (the database-wide chain).
const (
	// EntrySwitch is the first entry: the database moved to hash format 2.
	EntrySwitch = "hash_v2"
	// EntryAdopt records a workflow that existed at the switch, with its head.
	EntryAdopt = "adopt"
	// EntryCreate records a workflow's creation.
	EntryCreate = "create"
	// EntryPrune records a workflow's removal by prune, with its final head.
	EntryPrune = "prune"
	// EntryPause records a pause of claiming, with its operator and reason.
	EntryPause = "pause"
	// EntryResume records the end of a pause, with its operator and reason.
	EntryResume = "resume"
	// EntryLimit records an operator's change of a concurrency key's
	// limit (database-wide: it names no workflow).
	EntryLimit = "limit"
)

// ErrNotCanonical marks a stored v2 field that is not canonical JSON (the
// event was edited: the store writes only canonical text), or an unknown
// hash version.
var ErrNotCanonical = errors.New("not canonical")

// Sha256Hex is the lower-case hex SHA-256 digest of s, as the format records
// digests of content.
func Sha256Hex(s string) string {
	return hashHex([]byte(s))
}

// hashHex is the lowercase hexadecimal SHA-256 of b, encoded into an array
// and copied once into the string (hex.EncodeToString allocates twice): a
// write hashes each event it appends several times.
func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	var x [2 * sha256.Size]byte
	hex.Encode(x[:], h[:])
	return string(x[:])
}

// TaskStateJSON is the canonical JSON of the task state an event leaves:
// state, owner, generation, attempts and the digests of result and error
// (null when absent). The verifier compares it with the stored row.
func TaskStateJSON(state, owner string, generation int64, attempts int, result string, hasResult bool, errText string) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"attempts":`...)
	b = strconv.AppendInt(b, int64(attempts), 10)
	b = append(b, `,"error_sha256":`...)
	if errText == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, Sha256Hex(errText)...)
		b = append(b, '"')
	}
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, generation, 10)
	b = append(b, `,"owner":`...)
	b = jcs.AppendString(b, owner)
	b = append(b, `,"result_sha256":`...)
	if !hasResult {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, Sha256Hex(result)...)
		b = append(b, '"')
	}
	b = append(b, `,"state":`...)
	b = jcs.AppendString(b, state)
	return append(b, '}')
}

// DigestJSON is the canonical JSON of an event's content: {} when key is
// "", else {key: the digest of val}.
func DigestJSON(key, val string) []byte {
	if key == "" {
		return []byte("{}")
	}
	b := make([]byte, 0, 90)
	b = append(b, '{', '"')
	b = append(b, key...)
	b = append(b, `":"`...)
	b = append(b, Sha256Hex(val)...)
	return append(b, '"', '}')
}

// ContentJSON is the canonical JSON of the digests of the content an
// event of kind changed (DigestJSON): the payload at create, the result
// at complete, the error at fail and retry, and at expire when the lapse
// failed the task (state "failed"); else the reason in detail, if any.
// The store passes the task as the event leaves it.
func ContentJSON(kind, state, payload, result, errText string, detail map[string]any) []byte {
	key, val := "", ""
	switch kind {
	case EventCreate:
		key, val = "payload_sha256", payload
	case "complete":
		key, val = "result_sha256", result
	case "fail", "retry":
		key, val = "error_sha256", errText
	case "expire":
		if state == "failed" { // the last attempt's lapse records an error
			key, val = "error_sha256", errText
		}
	default:
		if reason, ok := detail["reason"].(string); ok {
			key, val = "reason_sha256", reason
		}
	}
	return DigestJSON(key, val)
}

// appendEventObject appends the canonical JSON that a v2 event's hash
// covers; e's detail, task state and content must already be canonical.
func appendEventObject(b []byte, e *tgdriver.EventRow) []byte {
	b = append(b, `{"actor":{"kind":`...)
	b = jcs.AppendString(b, e.ActorKind)
	b = append(b, `,"name":`...)
	b = jcs.AppendString(b, e.ActorName)
	b = append(b, `,"principal":`...)
	b = jcs.AppendString(b, e.ActorPrincipal)
	b = append(b, `},"at_ms":`...)
	b = strconv.AppendInt(b, e.AtMS, 10)
	b = append(b, `,"content":`...)
	b = append(b, e.Content...)
	b = append(b, `,"detail":`...)
	b = append(b, e.Detail...)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, e.Generation, 10)
	b = append(b, `,"kind":`...)
	b = jcs.AppendString(b, e.Kind)
	b = append(b, `,"owner":`...)
	b = jcs.AppendString(b, e.Owner)
	b = append(b, `,"prev_hash":`...)
	b = jcs.AppendString(b, e.PrevHash)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"state":`...)
	b = append(b, e.TaskState...)
	b = append(b, `,"task_id":`...)
	b = jcs.AppendString(b, e.TaskID)
	b = append(b, `,"v":2,"workflow_id":`...)
	b = jcs.AppendString(b, e.WorkflowID)
	return append(b, '}')
}

// Link makes e (HashV2, its detail, task state and content canonical) the
// event after prevHash at position seq of its workflow's chain: it sets
// Seq, PrevHash and Hash.
func Link(e *tgdriver.EventRow, prevHash string, seq int64) {
	e.Seq, e.PrevHash = seq, prevHash
	b := make([]byte, 0, 320+len(e.Detail)+len(e.TaskState)+len(e.Content))
	e.Hash = hashHex(appendEventObject(b, e))
}

// v1Event fixes the hashed encoding of HashV1; fields are in key order.
type v1Event struct {
	AtMS       int64           `json:"at_ms"`
	Detail     json.RawMessage `json:"detail"`
	Generation int64           `json:"generation"`
	Kind       string          `json:"kind"`
	Owner      string          `json:"owner"`
	Seq        int64           `json:"seq"`
	TaskID     string          `json:"task_id"`
	WorkflowID string          `json:"workflow_id"`
}

// EventHash computes the chain hash of e from its fields and PrevHash, in
// e's HashVersion (0 means HashV1). At HashV2 the error matches
// ErrNotCanonical when a field is not canonical JSON or the version is
// unknown.
func EventHash(e *tgdriver.EventRow) (string, error) {
	if e.HashVersion >= HashV2 {
		if e.HashVersion != HashV2 {
			return "", fmt.Errorf("%w: unknown hash version %d", ErrNotCanonical, e.HashVersion)
		}
		if err := CheckCanonical(e.Detail, e.TaskState, e.Content); err != nil {
			return "", err
		}
		return hashHex(appendEventObject(make([]byte, 0, 320+len(e.Detail)+len(e.TaskState)+len(e.Content)), e)), nil
	}
	b, err := json.Marshal(v1Event{
		AtMS: e.AtMS, Detail: json.RawMessage(e.Detail), Generation: e.Generation, Kind: e.Kind,
		Owner: e.Owner, Seq: e.Seq, TaskID: e.TaskID, WorkflowID: e.WorkflowID,
	})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(e.PrevHash))
	h.Write([]byte{'\n'})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CheckCanonical returns an error matching ErrNotCanonical unless a v2
// event's detail, task state and content are canonical JSON.
func CheckCanonical(detail, state, content string) error {
	parts := [3]string{detail, state, content}
	for i, name := range [3]string{"detail", "task state", "content"} {
		ok, err := jcs.IsCanonical(parts[i])
		if err != nil {
			return fmt.Errorf("%w: event %s is not canonical JSON: %v", ErrNotCanonical, name, err)
		}
		if !ok {
			return fmt.Errorf("%w: event %s is not in RFC 8785 canonical form", ErrNotCanonical, name)
		}
	}
	return nil
}

// entryObject is the canonical JSON that an audit chain entry's hash covers.
func entryObject(a tgdriver.AuditRow) []byte {
	b := make([]byte, 0, 200+len(a.Detail))
	b = append(b, `{"at_ms":`...)
	b = strconv.AppendInt(b, a.AtMS, 10)
	b = append(b, `,"detail":`...)
	b = append(b, a.Detail...)
	b = append(b, `,"kind":`...)
	b = jcs.AppendString(b, a.Kind)
	b = append(b, `,"prev_hash":`...)
	b = jcs.AppendString(b, a.PrevHash)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, a.Seq, 10)
	b = append(b, `,"v":2,"workflow_id":`...)
	b = jcs.AppendString(b, a.WorkflowID)
	return append(b, '}')
}

// EntryHash computes the hash of an audit chain entry from its fields and
// PrevHash (see MCP.md, "Audit trail format").
func EntryHash(a tgdriver.AuditRow) (string, error) {
	if ok, _ := jcs.IsCanonical(a.Detail); !ok {
		return "", fmt.Errorf("%w: audit entry %d detail is not canonical JSON", ErrNotCanonical, a.Seq)
	}
	return hashHex(entryObject(a)), nil
}
