package taskgraph

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Bounds of a worker's report (see Report).
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
// heartbeat, completion or failure (WithReport): how far it is, a short
// message, and what the attempt has cost so far. Every member is optional.
// Usage is cumulative per attempt: it is the attempt's total so far, not
// an increment. A later report of the same attempt replaces the earlier
// one whole (a member it leaves out is no longer shown); a new claim of
// the task starts with no report, and the usage of the attempts before it
// stays counted in the task's and its workflow's usage (Task.TotalUsage,
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

type reportKey struct{}

// WithReport returns a context whose heartbeat, completion or failure
// (Heartbeat, Complete, Fail, FailRetryAfter) carries rep: it is checked
// (CheckReport) before anything is written, stored as the task's report
// for the current attempt in the write's own update (a heartbeat without
// one runs exactly as before), and recorded in the write's event. A write
// with a request id must repeat its report on a retry.
func WithReport(ctx context.Context, rep Report) context.Context {
	return context.WithValue(ctx, reportKey{}, rep)
}

// reportFrom returns the report ctx carries, nil when none (or an empty one).
func reportFrom(ctx context.Context) *Report {
	rep, ok := ctx.Value(reportKey{}).(Report)
	if !ok || (rep.Progress == nil && rep.StatusMessage == "" && rep.Usage == nil) {
		return nil
	}
	return &rep
}

// CheckReport returns an error matching ErrInvalid, naming the field and
// its rule, unless rep is within bounds: progress.done and progress.total
// finite, 0..MaxProgressValue, done ≤ total when total is given;
// status_message valid UTF-8 of at most MaxStatusMessageBytes;
// usage.input_tokens and usage.output_tokens 0..MaxUsageTokens,
// usage.cost_usd finite, 0..MaxUsageCostUSD.
func CheckReport(rep Report) error {
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

// checkedReport returns the report ctx carries, checked; nil when none.
func checkedReport(ctx context.Context) (*Report, error) {
	rep := reportFrom(ctx)
	if rep == nil {
		return nil, nil
	}
	if err := CheckReport(*rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// detail is the report as an event's detail member, for jcs.Append: what
// the worker said, without the generation and time the event itself
// records. Its numbers that need not be whole are canonical JSON already
// (number).
func (rep *Report) detail() map[string]any {
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
		// CheckReport let through only finite numbers, which JSON holds.
		panic(fmt.Sprintf("taskgraph: a checked report number %v is not JSON: %v", f, err))
	}
	return b
}

// reportArgs adds rep to a holder write's request arguments: a retry must
// repeat it.
func reportArgs(args map[string]any, rep *Report) map[string]any {
	if rep == nil {
		return args
	}
	if args == nil {
		args = map[string]any{}
	}
	args["report"] = rep.detail()
	return args
}

// setReport adds rep, made by generation gen, to set: the task's report
// for the current attempt and its usage, replacing the earlier ones.
func (w *wtx) setReport(set *tgdriver.TaskSet, rep *Report, gen int64) error {
	if rep == nil {
		return nil
	}
	m := rep.detail()
	m["generation"], m["at_ms"] = gen, w.nowMS
	b, err := canonicalJSON(nil, m)
	if err != nil {
		return err
	}
	set.Report = tgdriver.Val(string(b))
	var u tgdriver.Usage
	if rep.Usage != nil {
		u = tgdriver.Usage(*rep.Usage)
	}
	set.Usage = tgdriver.Val(u)
	return nil
}

// withReport adds rep to an event's detail.
func withReport(detail map[string]any, rep *Report) map[string]any {
	if rep != nil {
		detail["report"] = rep.detail()
	}
	return detail
}

// foldReport adds to a claim's set the end of the attempt before it: the
// report is cleared and its usage moves to the task's prior usage. A task
// whose last attempt reported nothing is left alone.
func foldReport(set *tgdriver.TaskSet, r *row) {
	if r.report == "" && r.usage.IsZero() {
		return
	}
	set.Report = tgdriver.Null[string]()
	set.Usage = tgdriver.Val(tgdriver.Usage{})
	set.PriorUsage = tgdriver.Val(tgdriver.Usage(r.prior.Add(r.usage)))
}

// readReport decodes a stored report ("" is none).
func readReport(taskID, text string) (*Report, error) {
	if text == "" {
		return nil, nil
	}
	var rep Report
	if err := json.Unmarshal([]byte(text), &rep); err != nil {
		return nil, fmt.Errorf("%w: task %s has an unreadable report: %v", errInternal, taskID, err)
	}
	return &rep, nil
}

// WorkflowUsage returns the usage reported by every attempt of every task
// of workflowID ("" for every workflow), from one snapshot.
func (s *Store) WorkflowUsage(ctx context.Context, workflowID string) (Usage, error) {
	if workflowID != "" {
		if err := checkIdentifier("workflow_id", workflowID); err != nil {
			return Usage{}, err
		}
	}
	var u tgdriver.Usage
	err := s.drv.Snapshot(ctx, func(rd tgdriver.Reads) error {
		var err error
		u, err = rd.WorkflowUsage(ctx, workflowID)
		return err
	})
	if err != nil {
		return Usage{}, fmt.Errorf("read the usage of workflow %q: %w", workflowID, err)
	}
	return Usage(u), nil
}
