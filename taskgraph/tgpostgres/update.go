package tgpostgres

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// errBadUpdate: an UpdateTask whose TaskSet is contradictory (a caller bug).
var errBadUpdate = errors.New("invalid task update")

// updateCache holds the text of each UpdateTask shape, keyed by a bitmask of
// which columns are set (to a value or to NULL) and which guards are tested.
// The values themselves are always parameters, so one text serves every
// update of that shape and pgx prepares it once per connection.
type updateCache struct {
	mu   sync.RWMutex
	text map[uint64]string
}

func newUpdateCache() *updateCache { return &updateCache{text: map[uint64]string{}} }

// setCol describes one settable column: its name, and how to read the Opt
// of a TaskSet (set, null, value).
type setCol struct {
	name string
	get  func(*tgdriver.TaskSet) (set, null bool, v any)
}

func opt[T any](o tgdriver.Opt[T]) (bool, bool, any) { return o.Set, o.Null, o.V }

var setCols = []setCol{
	{"state", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.State) }},
	{"owner", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.Owner) }},
	{"generation", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.Generation) }},
	{"token_hash", func(s *tgdriver.TaskSet) (bool, bool, any) {
		return s.TokenHash.Set, s.TokenHash.Null || (s.TokenHash.Set && s.TokenHash.V == nil), s.TokenHash.V
	}},
	{"lease_expires_at_ms", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.LeaseExpiresAtMS) }},
	{"lease_ms", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.LeaseMS) }},
	{"attempts", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.Attempts) }},
	{"unmet", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.Unmet) }},
	{"result", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.Result) }},
	{"error", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.Error) }},
	{"status_message", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.StatusMessage) }},
	{"cancel_cause", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.CancelCause) }},
	{"due_at_ms", func(s *tgdriver.TaskSet) (bool, bool, any) { return opt(s.DueAtMS) }},
}

// guardCol describes one equality guard.
type guardCol struct {
	name string
	get  func(*tgdriver.TaskGuard) (set, null bool, v any)
}

var guardCols = []guardCol{
	{"generation", func(g *tgdriver.TaskGuard) (bool, bool, any) { return opt(g.Generation) }},
	{"owner", func(g *tgdriver.TaskGuard) (bool, bool, any) { return opt(g.Owner) }},
	{"token_hash", func(g *tgdriver.TaskGuard) (bool, bool, any) {
		return g.TokenHash.Set, g.TokenHash.Null || (g.TokenHash.Set && g.TokenHash.V == nil), g.TokenHash.V
	}},
}

// build returns the UPDATE for seq, set and guard, with its arguments.
func (c *updateCache) build(seq int64, set tgdriver.TaskSet, guard tgdriver.TaskGuard) (string, []any, error) {
	if set.AddAttempt && set.Attempts.Set {
		return "", nil, fmt.Errorf("%w: AddAttempt and Attempts are both set; set one of them", errBadUpdate)
	}
	var key uint64
	bit := 0
	flag := func(b bool) {
		if b {
			key |= 1 << bit
		}
		bit++
	}
	args := []any{seq, set.UpdatedAtMS}
	for i := range setCols {
		s, null, v := setCols[i].get(&set)
		flag(s)
		flag(s && null)
		if s && !null {
			args = append(args, v)
		}
	}
	flag(set.AddAttempt)
	flag(len(guard.States) > 0)
	if len(guard.States) > 0 {
		args = append(args, guard.States)
	}
	for i := range guardCols {
		s, null, v := guardCols[i].get(&guard)
		flag(s)
		flag(s && null)
		if s && !null {
			args = append(args, v)
		}
	}
	flag(guard.LeaseLiveAtMS.Set)
	if guard.LeaseLiveAtMS.Set {
		args = append(args, guard.LeaseLiveAtMS.V)
	}
	flag(guard.LeaseLapsedAtMS.Set)
	if guard.LeaseLapsedAtMS.Set {
		args = append(args, guard.LeaseLapsedAtMS.V)
	}
	flag(guard.NoUnmet)
	flag(guard.DueByMS.Set)
	if guard.DueByMS.Set {
		args = append(args, guard.DueByMS.V)
	}

	c.mu.RLock()
	q, ok := c.text[key]
	c.mu.RUnlock()
	if ok {
		return q, args, nil
	}
	q = updateText(&set, &guard)
	c.mu.Lock()
	c.text[key] = q
	c.mu.Unlock()
	return q, args, nil
}

// updateText writes the statement for the shape of set and guard; its
// parameters are numbered in the order build appends the arguments.
func updateText(set *tgdriver.TaskSet, guard *tgdriver.TaskGuard) string {
	n := 2 // $1 seq, $2 updated_at_ms
	next := func() string { n++; return fmt.Sprintf("$%d", n) }
	var b strings.Builder
	b.WriteString("UPDATE tasks SET updated_at_ms = $2")
	for i := range setCols {
		s, null, _ := setCols[i].get(set)
		switch {
		case !s:
		case null:
			b.WriteString(", " + setCols[i].name + " = NULL")
		default:
			b.WriteString(", " + setCols[i].name + " = " + next())
		}
	}
	if set.AddAttempt {
		b.WriteString(", attempts = attempts + 1")
	}
	b.WriteString(" WHERE seq = $1")
	if len(guard.States) > 0 {
		b.WriteString(" AND state = ANY(" + next() + "::text[])")
	}
	for i := range guardCols {
		s, null, _ := guardCols[i].get(guard)
		switch {
		case !s:
		case null:
			b.WriteString(" AND " + guardCols[i].name + " IS NULL")
		default:
			b.WriteString(" AND " + guardCols[i].name + " = " + next())
		}
	}
	if guard.LeaseLiveAtMS.Set {
		b.WriteString(" AND lease_expires_at_ms > " + next())
	}
	if guard.LeaseLapsedAtMS.Set {
		b.WriteString(" AND lease_expires_at_ms <= " + next())
	}
	if guard.NoUnmet {
		b.WriteString(" AND unmet = 0")
	}
	if guard.DueByMS.Set {
		b.WriteString(" AND due_at_ms <= " + next())
	}
	b.WriteString(" RETURNING " + taskColumns)
	return b.String()
}
