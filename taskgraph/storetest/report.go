package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// reportTests: what a worker reports about its attempt (progress, a
// status message, usage) is stored for the attempt, recorded in the
// history, and summed per workflow over every attempt.
var reportTests = []test{
	{"HeartbeatReportShownAndRecorded", testReportHeartbeat},
	{"UsageSummedOverAttempts", testReportUsageOverAttempts},
	{"BadReportRefused", testReportRefused},
	{"RetryRepeatsReport", testReportRequestID},
}

func total(v float64) *float64 { return &v }

// A heartbeat's report is the task's until the next replaces it; a
// heartbeat without one leaves it; every report is in its event's detail;
// the history verifies.
func testReportHeartbeat(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	c := e.Claim(t, "w1", tk.TaskID, time.Minute)
	if c.Task.Report != nil {
		t.Fatalf("a fresh claim has report %+v, want none", c.Task.Report)
	}
	e.Clock.Advance(time.Second)
	rep := tg.Report{Progress: &tg.Progress{Done: 3, Total: total(10)}, StatusMessage: "parsing <files> & such",
		Usage: &tg.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: 0.0125}}
	got, err := e.S.Heartbeat(tg.WithReport(e.Ctx, rep), holder(c), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := rep
	want.Generation, want.AtMS = c.Lease.Generation, e.Clock.Now().UnixMilli()
	for _, tk := range []tg.Task{got, e.Get(t, tk.TaskID)} {
		sameJSON(t, "the stored report", want, tk.Report)
		if tk.TotalUsage != *rep.Usage {
			t.Fatalf("TotalUsage %+v, want %+v", tk.TotalUsage, *rep.Usage)
		}
	}
	// A heartbeat without a report keeps the last one.
	e.Clock.Advance(time.Second)
	if _, err := e.S.Heartbeat(e.Ctx, holder(c), time.Minute); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "the report after a bare heartbeat", want, e.Get(t, tk.TaskID).Report)
	// A later report replaces the earlier one whole.
	e.Clock.Advance(time.Second)
	later := tg.Report{Progress: &tg.Progress{Done: 7}}
	done, err := e.S.Complete(tg.WithReport(e.Ctx, later), holder(c), json.RawMessage(`{"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	later.Generation, later.AtMS = c.Lease.Generation, e.Clock.Now().UnixMilli()
	sameJSON(t, "the report after completing", later, done.Report)
	if !done.TotalUsage.IsZero() {
		t.Fatalf("the completion's report has no usage, yet TotalUsage is %+v", done.TotalUsage)
	}
	// The history: the claim, the reporting heartbeat, the bare one and
	// the completion, each report in its event's detail.
	var details []map[string]any
	for _, ev := range e.Events(t, tk.TaskID) {
		var d map[string]any
		if err := json.Unmarshal(ev.Detail, &d); err != nil {
			t.Fatal(err)
		}
		details = append(details, d)
	}
	if len(details) != 5 {
		t.Fatalf("%d events, want create, claim, two heartbeats and complete", len(details))
	}
	r1, _ := json.Marshal(details[2]["report"])
	if w := `{"progress":{"done":3,"total":10},"status_message":"parsing <files> & such","usage":{"cost_usd":0.0125,"input_tokens":1200,"output_tokens":300}}`; string(r1) != strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`).Replace(w) {
		t.Fatalf("the heartbeat's event records report %s, want %s", r1, w)
	}
	if _, ok := details[3]["report"]; ok {
		t.Fatalf("the bare heartbeat's event records a report: %v", details[3])
	}
	if r := details[4]["report"]; r == nil {
		t.Fatalf("the completion's event records no report: %v", details[4])
	}
	e.Verify(t)
}

// Usage is cumulative per attempt: a new claim clears the report and keeps
// the usage of the attempt before it, so a task's and a workflow's usage
// count every attempt once.
func testReportUsageOverAttempts(t *testing.T, h Harness) {
	e := setup(t, h)
	a := e.Create(t, "wf", "a")
	b := e.Create(t, "wf", "b")
	other := e.Create(t, "other", "x")
	u := func(in, out int64, cost float64) *tg.Usage {
		return &tg.Usage{InputTokens: in, OutputTokens: out, CostUSD: cost}
	}

	c1 := e.Claim(t, "w1", a.TaskID, time.Minute)
	// Two reports of one attempt: the second replaces the first.
	if _, err := e.S.Heartbeat(tg.WithReport(e.Ctx, tg.Report{Usage: u(100, 10, 0.5)}), holder(c1), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.FailRetryAfter(tg.WithReport(e.Ctx, tg.Report{Usage: u(150, 20, 0.75), StatusMessage: "rate limited"}), holder(c1), "upstream 429", 0); err != nil {
		t.Fatal(err)
	}
	pend := e.WantState(t, a.TaskID, tg.StatePending)
	if pend.Report == nil || pend.Report.StatusMessage != "rate limited" {
		t.Fatalf("a task back to pending shows its last attempt's report: got %+v", pend.Report)
	}
	c2 := e.Claim(t, "w2", a.TaskID, time.Minute)
	if c2.Task.Report != nil {
		t.Fatalf("a new claim starts with no report, got %+v", c2.Task.Report)
	}
	if want := *u(150, 20, 0.75); c2.Task.TotalUsage != want {
		t.Fatalf("after the retry's claim TotalUsage is %+v, want the first attempt's %+v", c2.Task.TotalUsage, want)
	}
	if _, err := e.S.Complete(tg.WithReport(e.Ctx, tg.Report{Usage: u(50, 5, 0.25)}), holder(c2), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if want, got := *u(200, 25, 1), e.Get(t, a.TaskID).TotalUsage; got != want {
		t.Fatalf("TotalUsage over two attempts is %+v, want %+v", got, want)
	}
	cb := e.Claim(t, "w1", b.TaskID, time.Minute)
	if _, err := e.S.Heartbeat(tg.WithReport(e.Ctx, tg.Report{Usage: u(1, 2, 0.125)}), holder(cb), time.Minute); err != nil {
		t.Fatal(err)
	}
	cx := e.Claim(t, "w1", other.TaskID, time.Minute)
	if _, err := e.S.Heartbeat(tg.WithReport(e.Ctx, tg.Report{Usage: u(1000, 0, 0)}), holder(cx), time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		wf   string
		want tg.Usage
	}{{"wf", *u(201, 27, 1.125)}, {"other", *u(1000, 0, 0)}, {"", *u(1201, 27, 1.125)}} {
		got, err := e.S.WorkflowUsage(e.Ctx, tc.wf)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("WorkflowUsage(%q) = %+v, want %+v", tc.wf, got, tc.want)
		}
	}
	e.Verify(t)
}

// A report out of bounds is refused, naming the field and its rule, and
// nothing is written.
func testReportRefused(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	c := e.Claim(t, "w1", tk.TaskID, time.Minute)
	before := e.DB.Snapshot(t)
	for _, tc := range []struct {
		rep   tg.Report
		field string
	}{
		{tg.Report{Progress: &tg.Progress{Done: -1}}, "progress.done"},
		{tg.Report{Progress: &tg.Progress{Done: 5, Total: total(4)}}, "progress.done"},
		{tg.Report{Progress: &tg.Progress{Done: 1, Total: total(2e15)}}, "progress.total"},
		{tg.Report{StatusMessage: strings.Repeat("x", tg.MaxStatusMessageBytes+1)}, "status_message"},
		{tg.Report{StatusMessage: "\xff"}, "status_message"},
		{tg.Report{Usage: &tg.Usage{InputTokens: -1}}, "usage.input_tokens"},
		{tg.Report{Usage: &tg.Usage{OutputTokens: -5}}, "usage.output_tokens"},
		{tg.Report{Usage: &tg.Usage{CostUSD: -0.5}}, "usage.cost_usd"},
	} {
		ctx := tg.WithReport(e.Ctx, tc.rep)
		for name, call := range map[string]func() error{
			"heartbeat": func() error { _, err := e.S.Heartbeat(ctx, holder(c), time.Minute); return err },
			"complete":  func() error { _, err := e.S.Complete(ctx, holder(c), json.RawMessage(`1`)); return err },
			"fail":      func() error { _, err := e.S.Fail(ctx, holder(c), "boom", true); return err },
		} {
			err := call()
			var ve *tg.ValidationError
			if !errors.Is(err, tg.ErrInvalid) || !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("%s with %+v: got %v, want an invalid %s", name, tc.rep, err, tc.field)
			}
		}
	}
	e.Unchanged(t, before, "refused reports")
	e.WantState(t, tk.TaskID, tg.StateClaimed)
}

// A retried write with a request id must repeat its report: the same
// report replays, another is refused.
func testReportRequestID(t *testing.T, h Harness) {
	e := setup(t, h)
	tk := e.Create(t, "wf", "a")
	c := e.Claim(t, "w1", tk.TaskID, time.Minute)
	r := e.withID("hb-1")
	rep := tg.Report{Progress: &tg.Progress{Done: 1, Total: total(2)}}
	first, err := r.S.Heartbeat(tg.WithReport(r.Ctx, rep), holder(c), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(time.Second)
	again, err := r.S.Heartbeat(tg.WithReport(r.Ctx, rep), holder(c), time.Minute)
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	sameJSON(t, "the retried heartbeat", first, again)
	rep.Progress.Done = 2
	_, err = r.S.Heartbeat(tg.WithReport(r.Ctx, rep), holder(c), time.Minute)
	var ve *tg.ValidationError
	if !errors.As(err, &ve) || ve.Field != "request_id" || !strings.Contains(err.Error(), "report") {
		t.Fatalf("a retry with another report: got %v, want request_id refused naming report", err)
	}
}
