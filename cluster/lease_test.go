package cluster

import (
	"testing"
	"time"
)

func TestLease_Arithmetic(t *testing.T) {
	// An unset interval is Eureka's 30 s: two renewals a minute.
	for ri, want := range map[int32]float64{0: 2, -1: 2, 30: 2, 1: 60, 10: 6} {
		if got := renewalsPerMin(ri); got != want {
			t.Errorf("renewalsPerMin(%d) = %v, want %v", ri, got, want)
		}
	}
	for _, tc := range []struct {
		expected float64
		pct      float64
		want     int64
	}{{20, 0.85, 17}, {2, 0.85, 1}, {0, 0.85, 0}, {600, 0.85, 510}, {100, 1, 100}} {
		if got := renewalThreshold(tc.expected, tc.pct); got != tc.want {
			t.Errorf("threshold(%v, %v) = %d, want %d", tc.expected, tc.pct, got, tc.want)
		}
	}
	for _, tc := range []struct {
		enabled        bool
		renews, thr    int64
		wantPreserving bool
	}{
		{true, 18, 17, false}, {true, 17, 17, true}, {true, 0, 17, true},
		{false, 0, 17, false}, {true, 0, 0, false},
	} {
		if got := selfPreserving(tc.enabled, tc.renews, tc.thr); got != tc.wantPreserving {
			t.Errorf("selfPreserving(%v, %d, %d) = %v", tc.enabled, tc.renews, tc.thr, got)
		}
	}
	for _, tc := range []struct {
		size int
		pct  float64
		want int
	}{{100, 0.85, 15}, {10, 0.85, 2}, {1, 0.85, 1}, {0, 0.85, 0}, {7, 1, 0}} {
		if got := evictionCap(tc.size, tc.pct); got != tc.want {
			t.Errorf("evictionCap(%d, %v) = %d, want %d", tc.size, tc.pct, got, tc.want)
		}
	}
}

func TestLease_ExpiryAndGrace(t *testing.T) {
	const d = 90_000
	for _, tc := range []struct {
		name                   string
		last, leaderSince, now int64
		want                   bool
	}{
		{"fresh", 1000, 0, 1000 + d, false},
		{"one ms past the duration", 1000, 0, 1001 + d, true},
		{"new leader grants grace", 1000, 50_000, 1001 + d, false},
		{"grace ends one duration after taking office", 1000, 50_000, 50_001 + d, true},
		{"renewed after the election", 60_000, 50_000, 60_000 + d, false},
	} {
		if got := leaseExpired(tc.last, d, tc.leaderSince, tc.now); got != tc.want {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
}

func TestRateCounter_WindowAndExtrapolation(t *testing.T) {
	c := newRateCounter(10 * time.Second)
	t0 := time.Unix(1_000_000, 0)
	c.start(t0)
	for s := 0; s < 5; s++ {
		c.add(t0.Add(time.Duration(s)*time.Second), 10)
	}
	// 5 full seconds observed, 50 renewals: 600 a minute.
	if got := c.perMinute(t0.Add(5 * time.Second)); got != 600 {
		t.Fatalf("extrapolated: %d", got)
	}
	for s := 5; s < 20; s++ {
		c.add(t0.Add(time.Duration(s)*time.Second), 1)
	}
	// The last 10 s hold 1 each: 10 per 10 s = 60 a minute.
	if got := c.perMinute(t0.Add(20 * time.Second)); got != 60 {
		t.Fatalf("windowed: %d", got)
	}
	// Renewals in the current second do not push out the oldest full one.
	c.add(t0.Add(20*time.Second+500*time.Millisecond), 5)
	if got := c.perMinute(t0.Add(20*time.Second + 600*time.Millisecond)); got != 60 {
		t.Fatalf("with the current second filling: %d", got)
	}
	// Silence empties the window.
	if got := c.perMinute(t0.Add(60 * time.Second)); got != 0 {
		t.Fatalf("after silence: %d", got)
	}
}

// TestRateCounter_Terms: heartbeats a new leader accepted before its lease
// keeper started count for its term (the keeper starts the counter a
// moment after Raft made the node leader), and nothing counted in an
// earlier term survives its end.
func TestRateCounter_Terms(t *testing.T) {
	c := newRateCounter(60 * time.Second)
	t0 := time.Unix(1_000_000, 0)
	c.start(t0)
	c.add(t0.Add(2*time.Second), 7)
	c.clear() // the term ends
	elected := t0.Add(30 * time.Second)
	c.add(elected, 3) // accepted before the keeper runs, a second later
	c.start(elected.Add(time.Second))
	// One full second observed (the one of the 3), extrapolated: 180.
	if got := c.perMinute(elected.Add(time.Second)); got != 180 {
		t.Fatalf("heartbeats of the new term before the keeper started: %d a minute, want 180", got)
	}
	c.clear()
	c.start(elected.Add(10 * time.Second))
	if got := c.perMinute(elected.Add(11 * time.Second)); got != 0 {
		t.Fatalf("after the term ended: %d a minute, want 0", got)
	}
}

func TestEvictionBudget(t *testing.T) {
	for _, tc := range []struct {
		size, spent int
		pct         float64
		want        int
	}{
		{9, 0, 0.85, 2}, // the erosion case's registry: cap(9) = 9 − ⌊7.65⌋
		{8, 1, 0.85, 1}, // one of the two evicted: base still 9
		{7, 2, 0.85, 0}, // both evicted: the window's budget is spent
		{7, 0, 0.85, 2}, // a fresh window over the 7 left: cap(7)
		{5, 0, 0.85, 1}, // cap(5) = 5 − ⌊4.25⌋
		{4, 0, 0.85, 1}, // cap(4) = 4 − ⌊3.4⌋
		{100, 0, 0.85, 15},
		{85, 15, 0.85, 0}, // evicting does not shrink the base: not cap(85) = 13
		{90, 5, 0.85, 10}, // base 95: cap 15, 5 spent
		{20, 2, 0.85, 2},  // base 22: cap 4, 2 spent
		{10, 5, 0.85, 0},  // spent beyond the cap (cancels shrank the registry): none, not negative
		{0, 0, 0.85, 0},
		{1, 0, 0.85, 1},
		{7, 0, 1, 0},
	} {
		if got := evictionBudget(tc.size, tc.spent, tc.pct); got != tc.want {
			t.Errorf("evictionBudget(%d, %d, %v) = %d, want %d", tc.size, tc.spent, tc.pct, got, tc.want)
		}
	}
	// The invariant the budget keeps: after evicting it, the registry holds
	// at least the threshold of what it would hold without the window's
	// evictions, however the window's evictions were split into passes.
	for _, pct := range []float64{0.85, 0.5, 0.99} {
		for base := 0; base <= 300; base++ {
			size, spent := base, 0
			for pass := 0; pass < 10; pass++ {
				// Each pass evicts part of what the budget allows, the last all.
				b := evictionBudget(size, spent, pct)
				n := b
				if pass < 9 {
					n = (b + 1) / 2
				}
				size, spent = size-n, spent+n
			}
			if floor := int(float64(base) * pct); size < floor || spent != evictionCap(base, pct) {
				t.Fatalf("pct %v, base %d: %d left after %d evicted in one window, want at least %d left and the cap %d evicted",
					pct, base, size, spent, floor, evictionCap(base, pct))
			}
		}
	}
}

func TestEvictionSpan(t *testing.T) {
	for _, tc := range []struct {
		interval, window, want time.Duration
	}{
		{60 * time.Second, time.Minute, time.Minute},    // Eureka's defaults: one pass per window
		{time.Second, time.Minute, time.Minute},         // the erosion case's 1 s interval: the rate window
		{5 * time.Minute, time.Minute, 5 * time.Minute}, // never more than one cap per interval
	} {
		c := DefaultLeaseConfig()
		c.EvictionInterval, c.RenewalRateWindow = tc.interval, tc.window
		if got := evictionSpan(c); got != tc.want {
			t.Errorf("evictionSpan(interval %v, window %v) = %v, want %v", tc.interval, tc.window, got, tc.want)
		}
	}
}

func TestEvictionWindow_Sliding(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	w := evictionWindow{span: time.Minute}
	for _, tc := range []struct {
		at     float64
		record int // evicted at this time, after asking
		want   int
	}{
		{0, 2, 0}, {0, 0, 2}, {29.999, 0, 2}, {30, 1, 2}, {30, 0, 3},
		{31, 0, 3}, // a pass that evicted nothing leaves no record
		{59.999, 0, 3},
		{60, 0, 1}, // the first pass's evictions leave the window exactly one span later
		{89.999, 0, 1}, {90, 0, 0},
	} {
		if got := w.spent(at(tc.at)); got != tc.want {
			t.Errorf("spent at %vs = %d, want %d", tc.at, got, tc.want)
		}
		w.record(at(tc.at), tc.record)
	}
	if len(w.recs) != 0 {
		t.Fatalf("%d records kept after they all left the window", len(w.recs))
	}
	// Sliding, not aligned: evictions late in one minute still count early
	// in the next, so two caps cannot follow each other across a boundary.
	w.record(at(119), 2)
	if got := w.spent(at(121)); got != 2 {
		t.Fatalf("spent 2 s after a late eviction = %d, want 2", got)
	}
	w.reset()
	if got := w.spent(at(121)); got != 0 {
		t.Fatalf("spent after reset = %d, want 0", got)
	}
}

// TestEvictionBudget_ErosionCase replays the case that showed the
// registry eroding at a short eviction interval, with the pure arithmetic:
// 9 instances, 3 s leases, a pass every second, 6 silent from t = 0, their
// leases expired from t = 3 (self-preservation left out: the cap alone). Capping each pass (eureka-server's rule) leaves 3 at t = 6;
// the cap per one-minute window leaves 7 until t = 63.
func TestEvictionBudget_ErosionCase(t *testing.T) {
	const pct = 0.85
	t0 := time.Unix(1_000_000, 0)
	perPass, perWindow := 9, 9
	w := evictionWindow{span: time.Minute}
	countAt := map[int][2]int{}
	for s := 0; s <= 70; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		if s >= 3 {
			expiredPerPass, expiredPerWindow := perPass-3, perWindow-3
			perPass -= min(expiredPerPass, evictionCap(perPass, pct))
			n := min(expiredPerWindow, evictionBudget(perWindow, w.spent(now), pct))
			w.record(now, n)
			perWindow -= n
		}
		countAt[s] = [2]int{perPass, perWindow}
	}
	for s, want := range map[int][2]int{3: {7, 7}, 4: {5, 7}, 5: {4, 7}, 6: {3, 7}, 10: {3, 7}, 62: {3, 7}, 63: {3, 5}, 64: {3, 5}} {
		if got := countAt[s]; got != want {
			t.Errorf("t = %d s: %d left capping each pass, %d capping each window; want %d and %d", s, got[0], got[1], want[0], want[1])
		}
	}
}
