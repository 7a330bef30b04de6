// Package workreport is what the holder of a claim says about its attempt
// (Report: progress, a short status message, the attempt's usage so far),
// its bounds (Check), its canonical form in an event's detail (Detail,
// With) and its stored form (Decode).
// It is a leaf (jcs and the standard library), so the store and the tool
// surface share one definition; package taskgraph re-exports the types and
// bounds under their old names, stores a report in the write's own fenced
// update and folds usage across attempts (taskgraph, "Workers' reports").
//
// Invariants: a report Check accepts holds only finite numbers within its
// bounds and valid UTF-8, so Detail never fails; Detail leaves out the
// generation and time, which the event itself records.
package workreport

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
)

// Bounds of a report.
const (
	// MaxStatusMessageBytes bounds Report.StatusMessage.
	MaxStatusMessageBytes = 512
	// MaxProgressValue bounds Progress.Done and Progress.Total.
	MaxProgressValue = 1e15
	// MaxUsageTokens bounds Usage.InputTokens and Usage.OutputTokens (2^53 - 1,
	// what a JSON number carries exactly).
	MaxUsageTokens = 1<<53 - 1
	// MaxUsageCostUSD bounds Usage.CostUSD.
	MaxUsageCostUSD = 1e9
)

// Report is what the holder of a claim says about its attempt, on a
// heartbeat, completion or failure (taskgraph.WithReport): how far it is, a short
// message, and what the attempt has cost so far. Every member is optional.
// Usage is cumulative per attempt: it is the attempt's total so far, not
// an increment. A later report of the same attempt replaces the earlier
// one whole (a member it leaves out is no longer shown); a new claim of
// the task starts with no report, and the usage of the attempts before it
// stays counted in the task's and its workflow's usage (taskgraph's Task.TotalUsage,
// Store.WorkflowUsage). Every report is recorded in the detail of its
// event in the history.
type Report struct {
	Progress      *Progress `json:"progress,omitempty"`
	StatusMessage string    `json:"status_message,omitempty"`
	Usage         *Usage    `json:"usage,omitempty"`
	// Generation is the claim that made the report; At when (server
	// time, milliseconds). The store fills both.
	Generation int64 `json:"generation"`
	AtMS       int64 `json:"at_ms"`
}

// Progress is how far an attempt is: Done of Total (Total optional, in
// any unit the worker chooses: items, bytes, percent).
type Progress struct {
	Done  float64  `json:"done"`
	Total *float64 `json:"total,omitempty"`
}

// Usage is what work cost: tokens and money.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens, CostUSD: u.CostUSD + o.CostUSD}
}

// IsZero reports whether u is no usage at all.
func (u Usage) IsZero() bool { return u == Usage{} }

// FieldError names a member of a report outside its bounds and the rule
// it breaks, worded to follow the member's name ("must be ...").
type FieldError struct {
	Field, Rule string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Rule }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// Check returns a *FieldError unless rep is within bounds: progress.done and progress.total
// finite, 0..MaxProgressValue, done ≤ total when total is given;
// status_message valid UTF-8 of at most MaxStatusMessageBytes;
// usage.input_tokens and usage.output_tokens 0..MaxUsageTokens,
// usage.cost_usd finite, 0..MaxUsageCostUSD.
func Check(rep Report) error {
	if p := rep.Progress; p != nil {
		if err := checkAmount("progress.done", p.Done, MaxProgressValue); err != nil {
			return err
		}
		if p.Total != nil {
			if err := checkAmount("progress.total", *p.Total, MaxProgressValue); err != nil {
				return err
			}
			if p.Done > *p.Total {
				return invalid("progress.done", "must be at most progress.total (got %v of %v)", p.Done, *p.Total)
			}
		}
	}
	if len(rep.StatusMessage) > MaxStatusMessageBytes {
		return invalid("status_message", "must be at most %d bytes (got %d)", MaxStatusMessageBytes, len(rep.StatusMessage))
	}
	if !utf8.ValidString(rep.StatusMessage) {
		return invalid("status_message", "must be valid UTF-8")
	}
	if u := rep.Usage; u != nil {
		for _, t := range [...]struct {
			name string
			v    int64
		}{{"usage.input_tokens", u.InputTokens}, {"usage.output_tokens", u.OutputTokens}} {
			if t.v < 0 || t.v > MaxUsageTokens {
				return invalid(t.name, "must be a whole number from 0 to %d (got %d)", int64(MaxUsageTokens), t.v)
			}
		}
		if err := checkAmount("usage.cost_usd", u.CostUSD, MaxUsageCostUSD); err != nil {
			return err
		}
	}
	return nil
}

// checkAmount checks that v is a finite number from 0 to max.
func checkAmount(name string, v, max float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > max {
		return invalid(name, "must be a number from 0 to %g (got %v)", max, v)
	}
	return nil
}

// Detail is the report as an event's detail member, for jcs.Append: what
// the worker said, without the generation and time the event itself
// records. Its numbers that need not be whole are canonical JSON already
// (number). rep must have passed Check.
func (rep *Report) Detail() map[string]any {
	m := map[string]any{}
	if p := rep.Progress; p != nil {
		pm := map[string]any{"done": number(p.Done)}
		if p.Total != nil {
			pm["total"] = number(*p.Total)
		}
		m["progress"] = pm
	}
	if rep.StatusMessage != "" {
		m["status_message"] = rep.StatusMessage
	}
	if u := rep.Usage; u != nil {
		m["usage"] = map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "cost_usd": number(u.CostUSD)}
	}
	return m
}

// number is finite f as RFC 8785 writes it (as ECMAScript does: 0.0125,
// 1e-7, 3), for jcs.Append, which takes whole numbers only.
func number(f float64) json.RawMessage {
	b, err := jcs.Canonicalize(strconv.AppendFloat(nil, f, 'g', -1, 64))
	if err != nil {
		// Check let through only finite numbers, which JSON holds.
		panic(fmt.Sprintf("workreport: a checked report number %v is not JSON: %v", f, err))
	}
	return b
}

// Empty reports whether rep says nothing: no progress, status message or
// usage. The store treats an empty report as none.
func (rep Report) Empty() bool {
	return rep.Progress == nil && rep.StatusMessage == "" && rep.Usage == nil
}

// With sets m's "report" member to rep's Detail (making m when nil) and
// returns m; a nil rep leaves m as it is. The store adds a report so to a
// holder write's request arguments (a retry must repeat it) and to its
// event's detail.
func With(m map[string]any, rep *Report) map[string]any {
	if rep == nil {
		return m
	}
	if m == nil {
		m = map[string]any{}
	}
	m["report"] = rep.Detail()
	return m
}

// Decode reads a report as stored (its JSON text); "" is none (nil).
func Decode(text string) (*Report, error) {
	if text == "" {
		return nil, nil
	}
	var rep Report
	if err := json.Unmarshal([]byte(text), &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}
