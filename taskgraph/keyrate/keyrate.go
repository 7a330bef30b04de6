package keyrate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Limit is the limit of a concurrency key. The zero Limit limits
// nothing.
type Limit struct {
	// MaxClaimed caps the key's tasks claimed at once (0..MaxKeyClaimed;
	// 0 is no cap).
	MaxClaimed int
	// Rate claims at most per RateInterval (0..MaxKeyRate; 0 is no rate):
	// in any interval of RateInterval of server time, at most Rate claims
	// of the key's tasks are granted.
	Rate         int
	RateInterval time.Duration
}

// String says what the limit allows.
func (l Limit) String() string {
	var parts []string
	if l.MaxClaimed > 0 {
		parts = append(parts, fmt.Sprintf("at most %d claimed at once", l.MaxClaimed))
	}
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("at most %d claims per %s", l.Rate, l.RateInterval))
	}
	if len(parts) == 0 {
		return "no limit"
	}
	return strings.Join(parts, ", ")
}

// Check returns a *rules.ValidationError unless l is within bounds;
// prefix starts the names of its fields in errors ("concurrency_" at
// create, "" for an operator's limit).
func (l Limit) Check(prefix string) error {
	if l.MaxClaimed < 0 || l.MaxClaimed > limits.MaxKeyClaimed {
		return rules.Invalid(prefix+"max_claimed", "must be between 0 (no cap) and %d (got %d)", limits.MaxKeyClaimed, l.MaxClaimed)
	}
	if l.Rate < 0 || l.Rate > limits.MaxKeyRate {
		return rules.Invalid(prefix+"rate", "must be between 0 (no rate) and %d claims per interval (got %d)", limits.MaxKeyRate, l.Rate)
	}
	if l.Rate == 0 && l.RateInterval != 0 {
		return rules.Invalid(prefix+"rate_interval_ms", "applies only with a rate (got an interval of %v and no rate)", l.RateInterval)
	}
	if l.Rate > 0 && (l.RateInterval < time.Millisecond || l.RateInterval > limits.MaxKeyRateInterval || l.RateInterval%time.Millisecond != 0) {
		return rules.Invalid(prefix+"rate_interval_ms", "must be a whole number of milliseconds between 1 and %d with a rate (got %v)", limits.MaxKeyRateInterval.Milliseconds(), l.RateInterval)
	}
	return nil
}

// WithLimit returns key row k under limit l: the recent claim times it
// keeps cut to the rate, when the rate next allows a claim, and the count
// a cap needs: claimed, the key's claimed tasks (counted under the lock of
// the limit's change), when l has a cap, else 0 (a key without a cap
// keeps no count).
func WithLimit(k tgdriver.KeyRow, l Limit, claimed int) tgdriver.KeyRow {
	k.MaxClaimed, k.RateCount, k.RateIntervalMS = l.MaxClaimed, l.Rate, l.RateInterval.Milliseconds()
	k.Claimed = 0
	if l.MaxClaimed > 0 {
		k.Claimed = claimed
	}
	recent := parseRecent(k.RecentMS)
	if k.RateCount == 0 {
		recent = nil
	} else if len(recent) > k.RateCount {
		recent = recent[len(recent)-k.RateCount:]
	}
	k.RecentMS, k.RateOpenAtMS = formatRecent(recent), rateOpenAt(recent, k.RateCount, k.RateIntervalMS)
	return k
}

func parseRecent(s string) []int64 {
	if s == "" {
		return nil
	}
	f := strings.Fields(s)
	out := make([]int64, 0, len(f))
	for _, x := range f {
		if v, err := strconv.ParseInt(x, 10, 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func formatRecent(v []int64) string {
	var b strings.Builder
	for i, x := range v {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(x, 10))
	}
	return b.String()
}

// rateOpenAt is when a key with the claim times recent allows the next
// claim by its rate: once the oldest of its last rate claims is an
// interval old; 0 when it allows one now.
func rateOpenAt(recent []int64, rate int, intervalMS int64) int64 {
	if rate == 0 || len(recent) < rate {
		return 0
	}
	return recent[len(recent)-rate] + intervalMS
}

// TakeSlot decides a claim of key k at server time atMS: the key as the
// claim leaves it, or ok false with, when the rate is what refuses it,
// the time it allows the next claim. The rate is exact over any window:
// a claim is granted only when fewer than Rate claims of the key lie in
// the interval that ends at it. Claim times never go back (a transaction
// that took its time before another's committed claim counts from that
// claim's time).
func TakeSlot(k tgdriver.KeyRow, atMS int64) (nk tgdriver.KeyRow, ok bool, openAtMS int64) {
	if k.MaxClaimed > 0 && k.Claimed >= k.MaxClaimed {
		return k, false, 0
	}
	var recent []int64
	if k.RateCount > 0 {
		recent = parseRecent(k.RecentMS)
		if n := len(recent); n > 0 && atMS < recent[n-1] {
			atMS = recent[n-1]
		}
		i := 0
		for i < len(recent) && recent[i] <= atMS-k.RateIntervalMS {
			i++
		}
		recent = recent[i:]
		if len(recent) >= k.RateCount {
			return k, false, recent[len(recent)-k.RateCount] + k.RateIntervalMS
		}
		recent = append(recent, atMS)
	}
	if k.MaxClaimed > 0 {
		k.Claimed++ // no count is kept while uncapped (tgdriver.KeyRow.Claimed)
	}
	k.RecentMS, k.RateOpenAtMS = formatRecent(recent), rateOpenAt(recent, k.RateCount, k.RateIntervalMS)
	return k, true, 0
}

// Key is a concurrency key as stored: its limit and its claims now.
type Key struct {
	Key   string
	Limit Limit
	// Claimed counts the key's tasks claimed now while the key has a cap;
	// it is 0 for a key without one (no count is kept, so that its claims
	// do not wait for one another).
	Claimed int
	// NextClaimableAt, when not zero, is when the rate allows the next
	// claim of the key.
	NextClaimableAt time.Time
	UpdatedAt       time.Time
	// UpdatedBy is the operator who set the limit last; "" when it was
	// set at create (or never).
	UpdatedBy string
}

// KeyOf is the key a driver's row holds.
func KeyOf(k tgdriver.KeyRow) Key {
	out := Key{Key: k.Key, Claimed: k.Claimed, UpdatedAt: msTime(k.UpdatedAtMS), UpdatedBy: k.UpdatedBy,
		Limit: Limit{MaxClaimed: k.MaxClaimed, Rate: k.RateCount, RateInterval: time.Duration(k.RateIntervalMS) * time.Millisecond}}
	if k.RateOpenAtMS > 0 {
		out.NextClaimableAt = msTime(k.RateOpenAtMS)
	}
	return out
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// Refusal says why a claim of key k was refused: its rate, when openAtMS
// (when the rate allows the next claim) is set, else its cap.
func Refusal(k tgdriver.KeyRow, openAtMS int64) string {
	if openAtMS > 0 {
		return fmt.Sprintf("concurrency key %s granted its %d claims per %v: the next is claimable at %s",
			k.Key, k.RateCount, time.Duration(k.RateIntervalMS)*time.Millisecond, msTime(openAtMS).Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("concurrency key %s has its maximum of %d tasks claimed; one is claimable when a claim of the key ends", k.Key, k.MaxClaimed)
}

// Detail is limit l as the audit chain records it.
func Detail(l Limit) map[string]any {
	return map[string]any{"max_claimed": l.MaxClaimed, "rate": l.Rate, "rate_interval_ms": l.RateInterval.Milliseconds()}
}
