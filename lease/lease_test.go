package lease

import (
	"errors"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want time.Duration
		err  bool
	}{
		{0, DefaultDuration, false},
		{MinDuration, MinDuration, false},
		{MaxDuration, MaxDuration, false},
		{MinDuration - time.Millisecond, 0, true},
		{MaxDuration + time.Millisecond, 0, true},
		{-time.Second, 0, true},
	} {
		got, err := Duration(tc.in)
		if tc.err {
			if !errors.Is(err, ErrDurationOutOfRange) {
				t.Errorf("Duration(%v) err = %v, want ErrDurationOutOfRange", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Duration(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestTokenUniqueAndLong(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) < 22 { // 128 bits in base64url is 22 characters
			t.Fatalf("token %q is shorter than 128 bits", tok)
		}
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
}

func TestCheck(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	live := Current{State: "claimed", Held: true, Owner: "a", Generation: 3, TokenHash: HashToken("tok"), ExpiresAt: now.Add(time.Second)}
	good := Holder{TaskID: "t", Owner: "a", Generation: 3, Token: "tok"}
	if err := Check(live, good, now); err != nil {
		t.Fatalf("live claim rejected: %v", err)
	}
	mod := func(f func(*Current, *Holder)) (Current, Holder) {
		c, h := live, good
		f(&c, &h)
		return c, h
	}
	for _, tc := range []struct {
		name string
		f    func(*Current, *Holder)
		at   time.Time
		want Reason
	}{
		{"terminal", func(c *Current, _ *Holder) { c.Terminal, c.Held, c.State = true, false, "cancelled" }, now, ReasonTerminal},
		{"superseded", func(c *Current, _ *Holder) { c.Generation = 4 }, now, ReasonSuperseded},
		{"unknown generation", func(_ *Current, h *Holder) { h.Generation = 9 }, now, ReasonUnknownGen},
		{"not held", func(c *Current, _ *Holder) { c.Held, c.State, c.Owner = false, "pending", "" }, now, ReasonNotHeld},
		{"wrong owner", func(_ *Current, h *Holder) { h.Owner = "b" }, now, ReasonWrongOwner},
		{"wrong token", func(_ *Current, h *Holder) { h.Token = "nope" }, now, ReasonWrongToken},
		{"expired at the instant", func(*Current, *Holder) {}, now.Add(time.Second), ReasonLeaseExpired},
		{"expired later", func(*Current, *Holder) {}, now.Add(time.Hour), ReasonLeaseExpired},
	} {
		c, h := mod(tc.f)
		err := Check(c, h, tc.at)
		var se *StaleClaimError
		if !errors.Is(err, ErrStaleClaim) || !errors.As(err, &se) || se.Reason != tc.want {
			t.Errorf("%s: got %v, want reason %q", tc.name, err, tc.want)
		}
	}
}

func TestManualClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewManualClock(start)
	if got := c.Advance(1500 * time.Millisecond); !got.Equal(start.Add(1500 * time.Millisecond)) {
		t.Fatalf("Advance = %v", got)
	}
	if !c.Now().Equal(start.Add(1500 * time.Millisecond)) {
		t.Fatalf("Now = %v", c.Now())
	}
}

// Advance moves the wall and monotonic readings; Step moves only the wall.
func TestManualClockStepAndElapsed(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewManualClock(start)
	c.Advance(2 * time.Second)
	c.Step(-time.Hour)
	c.Step(10 * time.Minute)
	if got, want := c.Now(), start.Add(2*time.Second-50*time.Minute); !got.Equal(want) {
		t.Fatalf("Now = %v, want %v", got, want)
	}
	if got := c.Elapsed(); got != 2*time.Second {
		t.Fatalf("Elapsed = %v, want 2s (steps of the wall clock do not move it)", got)
	}
	m := NewSystemMonotonic()
	if a, b := m.Elapsed(), m.Elapsed(); a < 0 || b < a {
		t.Fatalf("SystemMonotonic went backwards: %v then %v", a, b)
	}
}
