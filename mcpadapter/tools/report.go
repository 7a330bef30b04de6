package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/input"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// A worker's report (taskgraph.Report): the optional progress,
// status_message and usage of graph_task_heartbeat, graph_task_complete and
// graph_task_fail, and how tasks show it.

// The report's arguments. Their kinds check what the schema states; the
// store (taskgraph.CheckReport) checks the rest (done <= total, the bytes
// of the message), and every refusal names the field and the rule.
var (
	fProgress = field{name: "progress", kind: kindProgress, desc: "optional: how far this attempt is, {done, total} in any unit (numbers >= 0, done <= total; total optional)"}
	fStatus   = field{name: "status_message", kind: kindText, desc: fmt.Sprintf("optional: a short note on what you are doing now, shown to people watching (at most %d characters and %d bytes of UTF-8)", taskgraph.MaxStatusMessageBytes, taskgraph.MaxStatusMessageBytes)}
	fUsage    = field{name: "usage", kind: kindUsage, desc: "optional: what this attempt has cost so far, cumulative (the total, not an increment): {input_tokens, output_tokens, cost_usd}, each >= 0, default 0"}
	// reportFields are the arguments of a report.
	reportFields = []field{fProgress, fStatus, fUsage}
)

// reportNote ends the description of a tool that takes a report.
const reportNote = " Optionally report progress, status_message and usage: each report replaces this attempt's previous one whole (send every field you want shown), and usage is the attempt's total so far."

// withReport is fields with the report's arguments.
func withReport(fields ...field) []field {
	return append(fields, reportFields...)
}

// progressSchema and usageSchema are the JSON Schemas of the report's
// objects, on input and output alike.
func progressSchema() map[string]any {
	n := map[string]any{"type": "number", "minimum": 0, "maximum": taskgraph.MaxProgressValue}
	return map[string]any{"type": "object", "properties": map[string]any{"done": n, "total": n}, "required": []string{"done"}, "additionalProperties": false}
}

func usageSchema() map[string]any {
	tokens := map[string]any{"type": "integer", "minimum": 0, "maximum": int64(taskgraph.MaxUsageTokens)}
	return map[string]any{"type": "object", "properties": map[string]any{
		"input_tokens": tokens, "output_tokens": tokens,
		"cost_usd": map[string]any{"type": "number", "minimum": 0, "maximum": taskgraph.MaxUsageCostUSD},
	}, "additionalProperties": false}
}

// checkReportArg decodes and checks a report argument of kind f.kind into a.
func (a *args) checkReportArg(f field, v json.RawMessage) error {
	switch f.kind {
	case kindText:
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return argErrorf("%s must be a string", f.name)
		}
		if !utf8.ValidString(s) {
			return argErrorf("%s must be valid UTF-8", f.name)
		}
		// Counted in characters, as the schema's maxLength is (and as the
		// error text is); the store bounds the bytes.
		if n := utf8.RuneCountInString(s); n > taskgraph.MaxStatusMessageBytes {
			return argErrorf("%s must be at most %d characters and %d bytes (got %d characters)", f.name, taskgraph.MaxStatusMessageBytes, taskgraph.MaxStatusMessageBytes, n)
		}
		setArg(&a.str, f.name, s)
	case kindProgress:
		m, err := reportObject(f.name, v, "done", "total")
		if err != nil {
			return err
		}
		if _, ok := m["done"]; !ok {
			return fieldErrorf(f.name+".done", "%s.done is required", f.name)
		}
		p := &taskgraph.Progress{}
		if p.Done, err = reportNumber(f.name+".done", m["done"], taskgraph.MaxProgressValue); err != nil {
			return err
		}
		if raw, ok := m["total"]; ok {
			// done <= total is the store's rule (CheckReport): a schema
			// cannot state it, and the arguments agree with the schema.
			t, err := reportNumber(f.name+".total", raw, taskgraph.MaxProgressValue)
			if err != nil {
				return err
			}
			p.Total = &t
		}
		a.progress = p
	case kindUsage:
		m, err := reportObject(f.name, v, "input_tokens", "output_tokens", "cost_usd")
		if err != nil {
			return err
		}
		u := &taskgraph.Usage{}
		for name, dst := range map[string]*int64{"input_tokens": &u.InputTokens, "output_tokens": &u.OutputTokens} {
			raw, ok := m[name]
			if !ok {
				continue
			}
			n, err := input.Int(raw)
			if err != nil || n < 0 || n > taskgraph.MaxUsageTokens {
				return fieldErrorf(f.name+"."+name, "%s.%s must be a whole number from 0 to %d (got %s)", f.name, name, int64(taskgraph.MaxUsageTokens), input.Clip(string(raw)))
			}
			*dst = n
		}
		if raw, ok := m["cost_usd"]; ok {
			if u.CostUSD, err = reportNumber(f.name+".cost_usd", raw, taskgraph.MaxUsageCostUSD); err != nil {
				return err
			}
		}
		a.usage = u
	}
	return nil
}

// reportObject decodes an object argument with only the keys allowed.
func reportObject(name string, v json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	m, ok := input.Object(v)
	if !ok {
		return nil, fieldErrorf(name, "%s must be a JSON object with distinct keys among %s", name, strings.Join(allowed, ", "))
	}
	for k := range m {
		known := false
		for _, a := range allowed {
			known = known || k == a
		}
		if !known {
			return nil, fieldErrorf(name, "%s has the unknown key %q; allowed: %s", name, input.Clip(k), strings.Join(allowed, ", "))
		}
	}
	return m, nil
}

// reportNumber reads a JSON number from 0 to max.
func reportNumber(name string, raw json.RawMessage, max float64) (float64, error) {
	s := string(raw)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !json.Valid(raw) || s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) || math.IsInf(f, 0) || f < 0 || f > max {
		return 0, fieldErrorf(name, "%s must be a number from 0 to %g (got %s)", name, max, input.Clip(s))
	}
	return f, nil
}

// withReportOf is ctx carrying the call's report, when it has one, for the
// store.
func withReportOf(ctx context.Context, a *args) context.Context {
	rep := taskgraph.Report{Progress: a.progress, StatusMessage: a.str["status_message"], Usage: a.usage}
	if rep.Progress == nil && rep.StatusMessage == "" && rep.Usage == nil {
		return ctx
	}
	return taskgraph.WithReport(ctx, rep)
}

// reportJSON is a task's report on the wire (taskgraph.Report): what the
// report did not carry is left out.
type reportJSON struct {
	Generation    int64         `json:"generation"`
	ReportedAt    string        `json:"reported_at"`
	Progress      *progressJSON `json:"progress,omitempty"`
	StatusMessage *string       `json:"status_message,omitempty"`
	Usage         *usageJSON    `json:"usage,omitempty"`
}

type progressJSON struct {
	Done  float64  `json:"done"`
	Total *float64 `json:"total,omitempty"`
}

type usageJSON struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

func renderUsage(u taskgraph.Usage) usageJSON {
	return usageJSON{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: u.CostUSD}
}

// renderReport is rep on the wire, its message clipped to clip bytes (0:
// whole); nil when there is none.
func renderReport(rep *taskgraph.Report, clip int) *reportJSON {
	if rep == nil {
		return nil
	}
	out := &reportJSON{Generation: rep.Generation, ReportedAt: formatTime(time.UnixMilli(rep.AtMS))}
	if p := rep.Progress; p != nil {
		out.Progress = &progressJSON{Done: p.Done, Total: p.Total}
	}
	if rep.StatusMessage != "" {
		m := rep.StatusMessage
		if clip > 0 {
			m = input.Cut(m, clip)
		}
		out.StatusMessage = &m
	}
	if rep.Usage != nil {
		u := renderUsage(*rep.Usage)
		out.Usage = &u
	}
	return out
}

// reportSchema is the output schema of a task's report (present when
// there is one).
func reportSchema() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": false, "required": []string{"generation", "reported_at"},
		"properties": map[string]any{
			"generation":     map[string]any{"type": "integer", "minimum": 1},
			"reported_at":    map[string]any{"type": "string", "format": "date-time"},
			"progress":       progressSchema(),
			"status_message": map[string]any{"type": "string"},
			"usage":          usageOutSchema(),
		}}
}

// usageOutSchema is the schema of usage in an answer: every member present.
func usageOutSchema() map[string]any {
	s := usageSchema()
	s["required"] = []string{"cost_usd", "input_tokens", "output_tokens"}
	return s
}

// progressText is a report's progress and message as one line of text,
// "" when it has neither: "3 of 10 done: parsing files".
func progressText(rep *taskgraph.Report) string {
	if rep == nil {
		return ""
	}
	var parts []string
	if p := rep.Progress; p != nil {
		if p.Total != nil {
			parts = append(parts, fmt.Sprintf("%v of %v done", p.Done, *p.Total))
		} else {
			parts = append(parts, fmt.Sprintf("%v done", p.Done))
		}
	}
	if rep.StatusMessage != "" {
		parts = append(parts, rep.StatusMessage)
	}
	return strings.Join(parts, ": ")
}
