package dashboard

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestTrendSamplerRatesFromCounters(t *testing.T) {
	s := newTrendSampler(4, 10*time.Second, nil)
	t0 := time.Unix(1000, 0)
	s.sample(t0, trendReading{RenewsPerMin: 100, Threshold: 85, Registrations: 10, Cancels: 2, CacheHits: 50, CacheMisses: 50})
	if got := s.points(); len(got) != 0 {
		t.Fatalf("first reading gave %d points, want only a baseline", len(got))
	}
	s.sample(t0.Add(30*time.Second), trendReading{RenewsPerMin: 40, Threshold: 85, Registrations: 16, Cancels: 2,
		CacheHits: 80, CacheMisses: 60, CommitMsSum: 30, CommitCount: 10})
	p := s.points()[0]
	if p.RenewsPerMin != 40 || p.Threshold != 85 {
		t.Errorf("gauges %v / %v, want 40 / 85", p.RenewsPerMin, p.Threshold)
	}
	if p.RegistrationsPerMin != 12 || p.CancelsPerMin != 0 {
		t.Errorf("6 registrations in 30 s = %v/min, 0 cancels = %v/min; want 12 and 0", p.RegistrationsPerMin, p.CancelsPerMin)
	}
	if p.CacheHitRatio != 75 {
		t.Errorf("30 hits and 10 misses: ratio %v, want 75", p.CacheHitRatio)
	}
	if p.CommitMs != 3 {
		t.Errorf("10 commits in 30 ms: %v ms each, want 3", p.CommitMs)
	}
	// No reads and no commits in an interval: no value, not zero.
	s.sample(t0.Add(40*time.Second), trendReading{Registrations: 16, CacheHits: 80, CacheMisses: 60, CommitMsSum: 30, CommitCount: 10})
	if p := s.points()[1]; !math.IsNaN(p.CacheHitRatio) || !math.IsNaN(p.CommitMs) {
		t.Errorf("idle interval: ratio %v commit %v, want NaN", p.CacheHitRatio, p.CommitMs)
	}
}

func TestTrendSamplerRingIsBounded(t *testing.T) {
	s := newTrendSampler(3, time.Second, nil)
	t0 := time.Unix(0, 0)
	for i := 0; i <= 10; i++ {
		s.sample(t0.Add(time.Duration(i)*time.Second), trendReading{RenewsPerMin: float64(i)})
	}
	got := s.points()
	if len(got) != 3 || got[0].RenewsPerMin != 8 || got[2].RenewsPerMin != 10 {
		t.Errorf("ring holds %+v, want the last three samples (8, 9, 10) oldest first", got)
	}
	if s.span() != 3*time.Second {
		t.Errorf("span %s", s.span())
	}
}

func TestTrendSamplerTicks(t *testing.T) {
	n := 0
	s := newTrendSampler(10, 5*time.Millisecond, func() trendReading { n++; return trendReading{RenewsPerMin: 1} })
	s.start()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.points()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	s.close()
	if len(s.points()) < 2 {
		t.Fatalf("%d points after %d readings", len(s.points()), n)
	}
}

func TestRenewalChartShowsTheDropBelowThreshold(t *testing.T) {
	now := time.Unix(10000, 0)
	var pts []trendPoint
	for i := 0; i < 20; i++ {
		renews := 1200.0
		if i >= 15 {
			renews = 600
		}
		pts = append(pts, trendPoint{At: now.Add(time.Duration(i-19) * 10 * time.Second), RenewsPerMin: renews, Threshold: 1020,
			CacheHitRatio: math.NaN(), CommitMs: math.NaN()})
	}
	charts := dashboardTrends(pts, now, time.Hour)
	if len(charts) != 4 || charts[0].ID != "trend-renewals" {
		t.Fatalf("charts %+v", charts)
	}
	lines := map[string]trendLine{}
	for _, l := range charts[0].Lines {
		lines[l.Series] = l
	}
	if r := lines["renews"]; r.Last != "600" || r.Max != "1200" || r.N != 20 {
		t.Errorf("renewals line %+v", r)
	}
	if b := lines["below"]; b.N != 5 || len(b.Polylines) != 1 {
		t.Errorf("below-threshold overlay %+v, want the last 5 points", b)
	}
	// The newest point sits at the right edge of the plot.
	if p := lines["renews"].Polylines[0]; !strings.HasPrefix(strings.Fields(p)[19], pixel(float64(chartW-chartRight))+",") {
		t.Errorf("points %q do not end at x=%d", p, chartW-chartRight)
	}
	if c := charts[2]; len(c.Lines[0].Polylines) != 0 || c.Lines[0].Last != "" {
		t.Errorf("cache chart with no values: %+v", c.Lines[0])
	}
	for _, c := range charts {
		for i := 1; i < len(c.XTicks); i++ {
			if c.XTicks[i-1].Pos-c.XTicks[i].Pos < 50 {
				t.Errorf("%s: x labels %v and %v closer than 50 px", c.ID, c.XTicks[i-1], c.XTicks[i])
			}
		}
	}
}

func TestAgoLabel(t *testing.T) {
	for d, want := range map[time.Duration]string{30 * time.Second: "30s", time.Minute: "1m", 90 * time.Second: "1m30s",
		10 * time.Minute: "10m", time.Hour: "1h", 0: "0s"} {
		if got := agoLabel(d); got != want {
			t.Errorf("agoLabel(%s) = %q, want %q", d, got, want)
		}
	}
}
