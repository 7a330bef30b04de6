package keyrate

import (
	"errors"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

func TestTakeSlotRateIsExactOverAnyWindow(t *testing.T) {
	t.Parallel()
	k := WithLimit(tgdriver.KeyRow{Key: "k"}, Limit{Rate: 2, RateInterval: time.Second}, 3)
	if k.Claimed != 0 {
		t.Fatalf("a key with a rate and no cap keeps a count: %d", k.Claimed)
	}
	var ok bool
	var open int64
	for _, at := range []int64{1000, 1500} {
		if k, ok, _ = TakeSlot(k, at); !ok {
			t.Fatalf("claim at %d refused under a rate of 2/s", at)
		}
	}
	if _, ok, open = TakeSlot(k, 1999); ok || open != 2000 {
		t.Fatalf("third claim within the second: ok %v, open at %d; want refused until 2000", ok, open)
	}
	// No cap: no count is kept (tgdriver.KeyRow.Claimed).
	if k, ok, _ = TakeSlot(k, 2000); !ok || k.Claimed != 0 || k.RecentMS != "1500 2000" || k.RateOpenAtMS != 2500 {
		t.Fatalf("claim at 2000: ok %v, row %+v; want granted, recent [1500 2000], open at 2500", ok, k)
	}
	// A claim time before the last never counts from before it.
	if k2, ok, _ := TakeSlot(WithLimit(k, Limit{Rate: 5, RateInterval: time.Second}, 0), 10); !ok || k2.RecentMS != "1500 2000 2000" {
		t.Fatalf("claim at an earlier time: ok %v, recent %q; want counted at 2000", ok, k2.RecentMS)
	}
}

func TestTakeSlotCapAndCheck(t *testing.T) {
	t.Parallel()
	k := WithLimit(tgdriver.KeyRow{Key: "k"}, Limit{MaxClaimed: 1}, 1) // one claimed, counted under the cap's lock
	if _, ok, open := TakeSlot(k, 0); ok || open != 0 {
		t.Fatalf("a full key granted a claim (ok %v, open %d)", ok, open)
	}
	if err := (Limit{Rate: 1}).Check("concurrency_"); !errors.Is(err, rules.ErrInvalid) {
		t.Fatalf("a rate without an interval: %v, want ErrInvalid", err)
	}
	if s := (Limit{}).String(); s != "no limit" {
		t.Fatalf("zero limit says %q", s)
	}
}
