package audit

import (
	"encoding/json"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// BenchmarkEventEncoding compares the CPU cost of encoding and hashing one
// complete event in hash format 1 (encoding/json) and 2 (the canonical
// append encoder, with the task state and content digests).
func BenchmarkEventEncoding(b *testing.B) {
	detail := map[string]any{"result_sha256": Sha256Hex(`{"ok":true}`), "arrived_at_ms": int64(1764547200000)}
	const result = `{"ok":true}`
	prev := "c37a4ddf3b7bf6841777b92c168e08ffe99801a0b52af30e1e85320023fd0bb7"
	e := tgdriver.EventRow{WorkflowID: "wf", TaskID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Kind: "complete", Owner: "w1", Generation: 1, AtMS: 1764547200000}
	b.Run("v1", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			d, _ := json.Marshal(detail)
			e := e
			e.Detail, e.Seq, e.PrevHash, e.HashVersion = string(d), 2, prev, HashV1
			if _, err := EventHash(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("v2", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			d, _ := jcs.Append(make([]byte, 0, 128), detail)
			e := e
			e.Detail, e.HashVersion, e.ActorKind, e.ActorName = string(d), HashV2, "worker", "w1"
			e.TaskState = string(TaskStateJSON("completed", "", 1, 1, result, true, ""))
			e.Content = string(DigestJSON("result_sha256", result))
			Link(&e, prev, 2)
		}
	})
}
