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
	c.reset(t0)
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
