package taskgraph

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkEventEncoding compares the CPU cost of encoding and hashing one
// complete event in hash format 1 (encoding/json) and 2 (the canonical
// append encoder, with the task state and content digests).
func BenchmarkEventEncoding(b *testing.B) {
	detail := map[string]any{"result_sha256": sha256Hex([]byte(`{"ok":true}`)), "arrived_at_ms": int64(1764547200000)}
	r := &row{}
	r.TaskID, r.WorkflowID, r.State, r.Generation, r.Attempts = "01ARZ3NDEKTSV4RRFFQ69G5FAV", "wf", StateCompleted, 1, 1
	r.Result = json.RawMessage(`{"ok":true}`)
	at := time.UnixMilli(1764547200000)
	prev := "c37a4ddf3b7bf6841777b92c168e08ffe99801a0b52af30e1e85320023fd0bb7"
	b.Run("v1", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			d, _ := json.Marshal(detail)
			e := Event{WorkflowID: r.WorkflowID, Seq: 2, TaskID: r.TaskID, Kind: EventComplete, Owner: "w1", Generation: 1, At: at, Detail: d, PrevHash: prev}
			if _, err := EventHash(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("v2", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			d, _ := canonicalJSON(make([]byte, 0, 128), detail)
			state := taskStateJSON(string(r.State), r.Owner, r.Generation, r.Attempts, string(r.Result), true, r.Error)
			content := contentJSON(EventComplete, r, detail)
			e := Event{WorkflowID: r.WorkflowID, Seq: 2, TaskID: r.TaskID, Kind: EventComplete, Owner: "w1", Generation: 1, At: at, Detail: d, PrevHash: prev,
				HashVersion: HashV2, Actor: Actor{Kind: ActorWorker, Name: "w1"}}
			_ = hashHex(eventObjectV2(e, d, state, content))
		}
	})
}
