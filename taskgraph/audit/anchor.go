package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Head is the database-wide head of the audit trail at a moment: the
// audit chain's entry count and head hash and the number of events stored.
// Kept outside the database (an anchor), it lets CheckAnchor detect a
// database that was truncated or rolled back since: one whose audit chain
// no longer holds that entry, or which holds fewer events than then, the
// events of workflows pruned since counted in.
type Head struct {
	At      time.Time
	Entries int64
	Events  int64
	Hash    string
}

// String is the head's token, ENTRIES:EVENTS:HASH, as `audit head` prints it
// and `audit verify --expect` takes it.
func (h Head) String() string {
	return fmt.Sprintf("%d:%d:%s", h.Entries, h.Events, h.Hash)
}

// ErrBadAnchor matches a head token or anchor line that does not parse.
var ErrBadAnchor = errors.New("invalid audit head")

// ErrAnchorNotExtended matches the error CheckAnchor returns when the
// database does not extend an anchored head.
var ErrAnchorNotExtended = errors.New("the database does not extend the anchored audit head")

var headToken = regexp.MustCompile(`^([0-9]{1,18}):([0-9]{1,18}):([0-9a-f]{64}|)$`)

// MaxAnchorLine bounds one line of an anchor file.
const MaxAnchorLine = 256

// ParseHead parses a head token (ENTRIES:EVENTS:HASH) or an anchor line
// (an RFC 3339 time, a space, the token).
func ParseHead(s string) (Head, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxAnchorLine {
		return Head{}, fmt.Errorf("%w: longer than %d bytes", ErrBadAnchor, MaxAnchorLine)
	}
	var h Head
	if at, tok, ok := strings.Cut(s, " "); ok {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return Head{}, fmt.Errorf("%w: time %q is not RFC 3339", ErrBadAnchor, at)
		}
		h.At, s = t, strings.TrimSpace(tok)
	}
	m := headToken.FindStringSubmatch(s)
	if m == nil {
		return Head{}, fmt.Errorf("%w: %q is not ENTRIES:EVENTS:HASH (decimal counts, a 64-digit lower-case hex hash)", ErrBadAnchor, s)
	}
	h.Entries, _ = strconv.ParseInt(m[1], 10, 64)
	h.Events, _ = strconv.ParseInt(m[2], 10, 64)
	h.Hash = m[3]
	if (h.Entries == 0) != (h.Hash == "") {
		return Head{}, fmt.Errorf("%w: %q: the hash is empty exactly when there are no entries", ErrBadAnchor, s)
	}
	return h, nil
}

// CurrentHead returns the database-wide head of hist now, from one
// snapshot.
func CurrentHead(ctx context.Context, hist History) (Head, error) {
	var h Head
	if err := hist.Link(ctx, ""); err != nil {
		return h, fmt.Errorf("read the audit head: %w", err)
	}
	err := hist.Snapshot(ctx, func(rd tgdriver.Reads) error {
		n, hash, _, err := rd.AuditHead(ctx)
		if err != nil {
			return err
		}
		ev, err := rd.EventCount(ctx)
		if err != nil {
			return err
		}
		h = Head{At: hist.Now().UTC(), Entries: n, Hash: hash, Events: ev}
		return nil
	})
	if err != nil {
		return Head{}, fmt.Errorf("read the audit head: %w", err)
	}
	return h, nil
}

// CheckAnchor returns nil if the database of h extends anchored, a head
// taken earlier: its audit chain holds entry anchored.Entries with hash
// anchored.Hash, and the events stored now plus those of workflows pruned
// after that entry are at least anchored.Events. Otherwise the error matches
// ErrAnchorNotExtended and says what is missing. It does not verify the
// chains themselves (Verify does).
func CheckAnchor(ctx context.Context, h History, anchored Head) error {
	var reason string
	if err := h.Link(ctx, ""); err != nil {
		return fmt.Errorf("check the anchor: %w", err)
	}
	err := h.Snapshot(ctx, func(rd tgdriver.Reads) error {
		reason = ""
		var found bool
		var pruned, n int64
		err := rd.AuditEntries(ctx, func(a tgdriver.AuditRow) error {
			n++
			if a.Seq == anchored.Entries {
				found = a.Hash == anchored.Hash
				if !found {
					reason = fmt.Sprintf("audit entry %d has hash %s, the anchor %s (the audit chain was rewritten)", a.Seq, a.Hash, anchored.Hash)
				}
			}
			if a.Seq > anchored.Entries && a.Kind == EntryPrune {
				var d struct {
					Events int64 `json:"event_count"`
				}
				if err := jsonUnmarshalString(a.Detail, &d); err != nil {
					return fmt.Errorf("%w: audit entry %d detail: %v", ErrBrokenChain, a.Seq, err)
				}
				pruned += d.Events
			}
			return nil
		})
		if err != nil {
			return err
		}
		if reason != "" {
			return nil
		}
		if anchored.Entries > 0 && !found {
			reason = fmt.Sprintf("the audit chain has %d entries, the anchor names entry %d (the database was truncated or an older copy restored)", n, anchored.Entries)
			return nil
		}
		ev, err := rd.EventCount(ctx)
		if err != nil {
			return err
		}
		if ev+pruned < anchored.Events {
			reason = fmt.Sprintf("%d events are stored (%d more were pruned since the anchor), the anchor counted %d: %d events are gone (a dropped tail, a lost WAL, or an older copy restored)", ev, pruned, anchored.Events, anchored.Events-ev-pruned)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("check the audit anchor: %w", err)
	}
	return notExtended(anchored, anchored.At, reason)
}

// notExtended is nil when reason is empty, else the ErrAnchorNotExtended
// error naming the anchored head (taken at at, when known) and reason.
func notExtended(anchored fmt.Stringer, at time.Time, reason string) error {
	if reason == "" {
		return nil
	}
	when := ""
	if !at.IsZero() {
		when = " of " + at.UTC().Format(time.RFC3339)
	}
	return fmt.Errorf("%w: anchor %s%s: %s", ErrAnchorNotExtended, anchored, when, reason)
}

func jsonUnmarshalString(s string, v any) error { return json.Unmarshal([]byte(s), v) }
