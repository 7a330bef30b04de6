package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Report is the result of checking one history.
type Report struct {
	Ops   int // operations checked (on the history's tasks)
	Tasks int // tasks with at least one operation
	// Unknown counts operations whose outcome was unknown, UnknownBy by
	// cause (the unavailable reason, "transport", the HTTP status).
	Unknown   int
	UnknownBy map[string]int
	// Illegal lists the tasks whose history is not linearizable, TimedOut
	// those the checker gave up on (neither is counted as the other).
	Illegal, TimedOut []string
	// Dir is where the history and the visualizations were kept ("" when
	// every task was linearizable and nothing was kept).
	Dir string
}

// String is the one-line summary.
func (r Report) String() string {
	causes := make([]string, 0, len(r.UnknownBy))
	for c, n := range r.UnknownBy {
		causes = append(causes, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(causes)
	s := fmt.Sprintf("%d operations (%d unknown outcomes%s) on %d tasks, %d not linearizable, %d undecided", r.Ops, r.Unknown,
		strings.TrimSuffix(": "+strings.Join(causes, ", "), ": "), r.Tasks, len(r.Illegal), len(r.TimedOut))
	if r.Dir != "" {
		s += "; history kept in " + r.Dir
	}
	return s
}

// Check checks each task's history against the model, with at most
// timeout per task. When some task is not linearizable or undecided, it
// keeps the whole recorded history (history.jsonl), the porcupine
// visualization of each such task (task-<id>.html) and a summary in a new
// folder under keepDir (the system's temporary folder when empty), named
// in the report.
func Check(ops []Op, history []porcupine.Operation, timeout time.Duration, keepDir, label string) (Report, error) {
	model := Model()
	parts := partitionByTask(history)
	rep := Report{Tasks: len(parts), UnknownBy: map[string]int{}}
	for _, op := range history {
		rep.Ops++
		if out := op.Output.(Output); out.Outcome == Unknown {
			rep.Unknown++
			rep.UnknownBy[unknownCause(out)]++
		}
	}
	type bad struct {
		id   string
		info porcupine.LinearizationInfo
	}
	var bads []bad
	single := model
	single.Partition, single.PartitionEvent = nil, nil
	for _, part := range parts {
		res, info := porcupine.CheckOperationsVerbose(single, part, timeout)
		id := part[0].Input.(Input).Task.ID
		switch res {
		case porcupine.Illegal:
			rep.Illegal = append(rep.Illegal, id)
			bads = append(bads, bad{id, info})
		case porcupine.Unknown:
			rep.TimedOut = append(rep.TimedOut, id)
			bads = append(bads, bad{id, info})
		}
	}
	sort.Strings(rep.Illegal)
	sort.Strings(rep.TimedOut)
	if len(bads) == 0 {
		return rep, nil
	}
	if keepDir == "" {
		keepDir = os.TempDir()
	}
	dir, err := os.MkdirTemp(keepDir, "faults-"+strings.ReplaceAll(label, "/", "-")+"-")
	if err != nil {
		return rep, err
	}
	rep.Dir = dir
	if err := writeHistory(filepath.Join(dir, "history.jsonl"), ops); err != nil {
		return rep, err
	}
	var summary strings.Builder
	fmt.Fprintf(&summary, "%s: %s\n", label, rep)
	for _, b := range bads {
		path := filepath.Join(dir, "task-"+b.id+".html")
		if err := porcupine.VisualizePath(single, b.info, path); err != nil {
			return rep, err
		}
		fmt.Fprintf(&summary, "task %s: %s\n", b.id, path)
		for _, op := range history {
			in := op.Input.(Input)
			if in.Task.ID == b.id {
				fmt.Fprintf(&summary, "  op %d stream %d [%s..%s] %s\n", in.Op, op.ClientId,
					time.Duration(op.Call), time.Duration(op.Return), describeOperation(in, op.Output))
			}
		}
	}
	return rep, os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary.String()), 0o644)
}

// unknownCause names why an outcome is unknown, for the report.
func unknownCause(out Output) string {
	switch {
	case out.Refusal != "":
		return out.Refusal
	case strings.HasPrefix(out.Detail, "transport"):
		return "transport"
	}
	if f := strings.Fields(out.Detail); len(f) >= 2 {
		return f[0] + " " + f[1]
	}
	return out.Detail
}

func writeHistory(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
