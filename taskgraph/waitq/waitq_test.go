package waitq

import "testing"

// A waiter that leaves with a wake it did not use passes it on; a wake goes
// only to a waiter that may use it.
func TestWaitQueuePassesWakesOn(t *testing.T) {
	var q Queue
	q.Init(10)
	a, other, b := q.Add("", nil), q.Add("x", nil), q.Add("wf", nil)
	q.WakeAll([]Ref{{Workflow: "wf"}})
	if len(a.ch) != 1 || len(other.ch) != 0 || len(b.ch) != 0 {
		t.Fatalf("a wake for wf reached a=%d x=%d b=%d, want only the oldest matching waiter", len(a.ch), len(other.ch), len(b.ch))
	}
	q.Remove(a) // gives up (timeout, cancel) without using it
	if len(other.ch) != 0 || len(b.ch) != 1 {
		t.Fatalf("the wake passed on reached x=%d b=%d, want b", len(other.ch), len(b.ch))
	}
	if q.Len() != 2 {
		t.Fatalf("len = %d", q.Len())
	}
	// a's wake, then b's passed on; a wake for no waiter, and one for a
	// waiter already woken, deliver nothing.
	q.WakeAll([]Ref{{Workflow: "nobody"}, {Workflow: "wf"}})
	if got := q.Delivered(); got != 2 {
		t.Fatalf("Delivered = %d, want 2", got)
	}
	q.WakeKey(Filter{Workflow: "x"}, 5)
	if got := q.Delivered(); got != 3 || len(other.ch) != 1 {
		t.Fatalf("after a wake by key of x: Delivered = %d, x holds %d; want 3 and 1", got, len(other.ch))
	}
	q.Init(2)
	if q.Add("", nil) != nil {
		t.Fatal("add beyond max registered a waiter")
	}
}

// A wake goes to a waiter whose capabilities cover the task's requires,
// even a younger one; passed on, it skips waiters that cannot take it.
func TestWaitQueueRespectsCapabilities(t *testing.T) {
	var q Queue
	q.Init(10)
	plain, gpu := q.Add("", nil), q.Add("", []string{"cuda", "gpu"})
	q.WakeAll([]Ref{{Workflow: "wf", Requires: "gpu"}})
	if len(plain.ch) != 0 || len(gpu.ch) != 1 {
		t.Fatalf("a gpu task woke plain=%d gpu=%d, want the gpu waiter", len(plain.ch), len(gpu.ch))
	}
	other := q.Add("", []string{"gpu"})
	q.Remove(gpu) // leaves without using it: the next capable waiter gets it
	if len(plain.ch) != 0 || len(other.ch) != 1 {
		t.Fatalf("the passed-on wake reached plain=%d other=%d, want other", len(plain.ch), len(other.ch))
	}
	q.Remove(other)
	if len(plain.ch) != 0 {
		t.Fatal("a gpu task's wake reached a waiter without gpu")
	}
	q.WakeAll([]Ref{{Workflow: "wf", Requires: "cuda gpu"}})
	if len(plain.ch) != 0 {
		t.Fatal("a cuda+gpu task woke a waiter without capabilities")
	}
	q.WakeAll([]Ref{{Workflow: "wf"}})
	if len(plain.ch) != 1 {
		t.Fatal("a plain task did not wake the waiter without capabilities")
	}
	// Grouped by workflow and capabilities for the cross-process lookups.
	q.Add("wf", []string{"gpu"})
	q.Add("wf", []string{"gpu"})
	fs := q.Filters()
	if len(fs) != 2 || fs[1].Workflow != "wf" || fs[1].N != 2 || len(fs[1].Caps) != 1 {
		t.Fatalf("filters = %+v", fs)
	}
}
