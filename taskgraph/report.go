package taskgraph

import (
	"context"
	"errors"
	"fmt"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/workreport"
)

// A worker's report on its attempt (package workreport), under the names
// the store's callers use.
type (
	// Report is what the holder of a claim says about its attempt.
	Report = workreport.Report
	// Progress is how far an attempt is.
	Progress = workreport.Progress
	// Usage is what work cost: tokens and money.
	Usage = workreport.Usage
)

// Bounds of a worker's report (see package workreport).
const (
	MaxStatusMessageBytes = workreport.MaxStatusMessageBytes
	MaxProgressValue      = workreport.MaxProgressValue
	MaxUsageTokens        = workreport.MaxUsageTokens
	MaxUsageCostUSD       = workreport.MaxUsageCostUSD
)

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
	if !ok || rep.Empty() {
		return nil
	}
	return &rep
}

// CheckReport returns an error matching ErrInvalid, naming the field and
// its rule, unless rep is within bounds (workreport.Check).
func CheckReport(rep Report) error {
	var fe *workreport.FieldError
	if err := workreport.Check(rep); errors.As(err, &fe) {
		return invalid(fe.Field, "%s", fe.Rule)
	} else if err != nil {
		return err
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

// reportArgs adds rep to a holder write's request arguments (a retry must
// repeat it), withReport to an event's detail (workreport.With).
var reportArgs, withReport = workreport.With, workreport.With

// setReport adds rep, made by generation gen, to set: the task's report
// for the current attempt and its usage, replacing the earlier ones.
func (w *wtx) setReport(set *tgdriver.TaskSet, rep *Report, gen int64) error {
	if rep == nil {
		return nil
	}
	m := rep.Detail()
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
	rep, err := workreport.Decode(text)
	if err != nil {
		return nil, fmt.Errorf("%w: task %s has an unreadable report: %v", errInternal, taskID, err)
	}
	return rep, nil
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
