package tgsqlite

import (
	"context"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// TestRoutingQueries: claim-next, the wake-up count and the due lookups see
// a claim's capabilities and only due tasks; the guarded update promotes a
// due task only once it is due.
func TestRoutingQueries(t *testing.T) {
	d := openTest(t, Options{}, tgdriver.Hooks{})
	ctx := context.Background()
	var later int64
	write(t, d, func(tx tgdriver.Tx) error {
		gpu := newTask("wf", "gpu")
		gpu.Requires, gpu.Priority = "cuda gpu", 5
		g := addTask(t, tx, gpu)
		p := addTask(t, tx, newTask("wf", "plain"))
		l := newTask("wf", "later")
		l.DueAtMS, l.Priority = 9000, 10
		later = addTask(t, tx, l)
		for _, tc := range []struct {
			caps []string
			want int64
		}{{nil, p}, {[]string{"gpu"}, p}, {[]string{"cuda", "gpu"}, g}, {[]string{"a", "cuda", "gpu", "z"}, g}} {
			for _, wf := range []string{"", "wf"} {
				r, ok, err := tx.NextPending(ctx, wf, tc.caps)
				if err != nil || !ok || r.Seq != tc.want {
					t.Errorf("NextPending(%q, %v) = %d %v %v, want %d", wf, tc.caps, r.Seq, ok, err, tc.want)
				}
			}
		}
		if refs, err := tx.DueTasks(ctx, 8999, 10); err != nil || len(refs) != 0 {
			t.Errorf("DueTasks(8999) = %+v %v", refs, err)
		}
		if refs, err := tx.DueTasks(ctx, 9000, 10); err != nil || len(refs) != 1 || refs[0].Seq != later {
			t.Errorf("DueTasks(9000) = %+v %v", refs, err)
		}
		promote := tgdriver.TaskSet{DueAtMS: tgdriver.Val(int64(0)), UpdatedAtMS: 1}
		if _, ok, err := tx.UpdateTask(ctx, later, promote, tgdriver.TaskGuard{States: []string{"pending"}, DueByMS: tgdriver.Val(int64(8999))}); ok || err != nil {
			t.Errorf("promotion before due: %v %v", ok, err)
		}
		r, ok, err := tx.UpdateTask(ctx, later, promote, tgdriver.TaskGuard{States: []string{"pending"}, DueByMS: tgdriver.Val(int64(9000))})
		if !ok || err != nil || r.DueAtMS != 0 {
			t.Errorf("promotion when due: %+v %v %v", r, ok, err)
		}
		if r, ok, err := tx.NextPending(ctx, "", nil); err != nil || !ok || r.Seq != later {
			t.Errorf("NextPending after promotion = %d %v %v, want %d", r.Seq, ok, err, later)
		}
		return nil
	})
	r := d.Reads()
	for _, tc := range []struct {
		wf   string
		caps []string
		want int
	}{{"", nil, 2}, {"", []string{"gpu", "cuda"}, 3}, {"wf", []string{"cuda"}, 2}, {"other", []string{"gpu"}, 0}} {
		if n, err := r.CountClaimable(ctx, tc.wf, tc.caps, 10); err != nil || n != tc.want {
			t.Errorf("CountClaimable(%q, %v) = %d, %v; want %d", tc.wf, tc.caps, n, err, tc.want)
		}
	}
	if _, ok, err := r.NextDue(ctx); err != nil || ok {
		t.Fatalf("NextDue after promotion: %v %v", ok, err)
	}
}
