package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Task is what a Handler is given: the claimed task, read-only.
type Task struct {
	TaskID     string
	WorkflowID string
	NodeID     string
	// Payload is the task's payload, a JSON object.
	Payload json.RawMessage
	// Attempt is this claim's attempt number, from 1, of MaxAttempts.
	Attempt     int
	MaxAttempts int
	// Owner and Generation identify the claim the worker holds.
	Owner      string
	Generation int64
	// Upstream holds the result of each direct dependency by node id, as
	// the claim returned them (a result the claim left out for size is read
	// whole with graph_task_inspect before the handler runs).
	Upstream map[string]json.RawMessage
	// Report records how far the work is. The worker sends the latest
	// report with its next heartbeat (only when it changed) and with the
	// completion or failure, so people watching the task (tasks/get, the
	// live view, tasks show) see it; reporting often costs nothing more.
	// Safe to call from any goroutine; nil-safe to leave uncalled.
	Report func(Progress)
}

// Progress is what a handler reports about its work so far: Done of Total
// (any unit; Total 0 means unknown) and a short Message (at most 512
// bytes). Usage, when set, is what this attempt has cost so far
// (cumulative, not an increment).
type Progress struct {
	Done, Total float64
	Message     string
	Usage       *Usage
}

// Usage is what an attempt cost: tokens and money.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// Handler does a task's work. It returns the result to store (any value that
// encodes as JSON of at most 262144 bytes) or an error to record as the
// task's failure; wrap the error with Retryable to let another attempt run.
//
// The handler must return promptly once ctx is done: ctx ends when the claim
// is lost (a heartbeat was refused, so another worker may own the task now)
// or when the shutdown grace period runs out. Whatever it returns after that
// is discarded.
type Handler func(ctx context.Context, t Task) (result any, err error)

// retryableError marks a failure that another attempt may not repeat.
type retryableError struct{ err error }

// Error implements error.
func (e retryableError) Error() string { return e.err.Error() }

// Unwrap returns the marked error.
func (e retryableError) Unwrap() error { return e.err }

// Retryable marks err as transient: the task is failed with retryable=true
// and returns to pending while it has attempts left.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return retryableError{err}
}

// IsRetryable reports whether err was marked with Retryable.
func IsRetryable(err error) bool {
	var r retryableError
	return errors.As(err, &r)
}

// echoPayload is the part of a payload the echo handler acts on; every other
// key is just echoed.
type echoPayload struct {
	// SleepMs simulates work lasting this long.
	SleepMs *int64 `json:"sleep_ms"`
	// Fail, when a string or true, makes the task fail with that message.
	Fail json.RawMessage `json:"fail"`
	// FailRetryable makes that failure retryable.
	FailRetryable bool `json:"fail_retryable"`
}

// maxSleep bounds payload.sleep_ms so a typo cannot park a worker for days.
const maxSleep = time.Hour

// Echo is the default handler. It runs no commands (a payload is data from
// whoever created the task, not code to trust). It returns
// {"echo": <payload>, "worker": <owner>} after payload.sleep_ms milliseconds,
// with "upstream": {<node id>: <result>, …} added for a task that has
// dependencies (so a downstream node's result is built from its upstream ones),
// or fails with payload.fail (a message string, or true) — retryably when
// payload.fail_retryable is true.
func Echo(ctx context.Context, t Task) (any, error) {
	var p echoPayload
	dec := json.NewDecoder(bytes.NewReader(t.Payload))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("payload: %w (sleep_ms must be an integer, fail a string or boolean, fail_retryable a boolean)", err)
	}
	if p.SleepMs != nil {
		d := time.Duration(*p.SleepMs) * time.Millisecond
		if *p.SleepMs < 0 || d > maxSleep {
			return nil, fmt.Errorf("payload.sleep_ms must be between 0 and %d (got %d)", maxSleep.Milliseconds(), *p.SleepMs)
		}
		if err := sleepReporting(ctx, t, d); err != nil {
			return nil, err
		}
	}
	if msg, fail, err := failMessage(p.Fail); err != nil {
		return nil, err
	} else if fail {
		err := errors.New(msg)
		if p.FailRetryable {
			return nil, Retryable(err)
		}
		return nil, err
	}
	out := map[string]any{"echo": t.Payload, "worker": t.Owner}
	if len(t.Upstream) > 0 {
		out["upstream"] = t.Upstream
	}
	return out, nil
}

// sleepReporting simulates d of work, reporting the milliseconds slept of
// d as progress every tenth of it (at most once every 100 ms).
func sleepReporting(ctx context.Context, t Task, d time.Duration) error {
	report := func(done time.Duration, msg string) {
		if t.Report != nil {
			t.Report(Progress{Done: float64(done.Milliseconds()), Total: float64(d.Milliseconds()), Message: msg})
		}
	}
	start := time.Now()
	report(0, "simulating work (sleep_ms)")
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(max(d/10, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-timer.C:
			report(d, "done")
			return nil
		case <-tick.C:
			report(min(time.Since(start), d), "simulating work (sleep_ms)")
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// failMessage reads payload.fail: a non-empty string is the message, true a
// generic one, false, null or absent means no failure.
func failMessage(raw json.RawMessage) (msg string, fail bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return "payload.fail requested a failure", b, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return s, true, nil
	}
	return "", false, fmt.Errorf("payload.fail must be a non-empty string or a boolean (got %s)", raw)
}
