package dashboard

import (
	"math"
	"testing"
	"time"
)

// The time axis keeps its labels at least 50 px apart whatever
// --dashboard-trend-interval makes of the window (360 samples): 30 s
// samples (a 3 h window) once got 19 labels 28 px apart, an hour's 2,161.
func TestTrendChart_XTicksSpacedAtAnyInterval(t *testing.T) {
	now := time.Unix(100000, 0)
	for _, interval := range []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, time.Hour, 24 * time.Hour} {
		window := trendCapacity * interval
		pts := []trendPoint{
			{At: now.Add(-interval), RenewsPerMin: 1, Threshold: 1, CacheHitRatio: math.NaN(), CommitMs: math.NaN()},
			{At: now, RenewsPerMin: 1, Threshold: 1, CacheHitRatio: math.NaN(), CommitMs: math.NaN()},
		}
		for _, c := range dashboardTrends(pts, now, window) {
			if len(c.XTicks) < 2 {
				t.Fatalf("interval %v: %d x labels", interval, len(c.XTicks))
			}
			for i := 1; i < len(c.XTicks); i++ {
				if gap := c.XTicks[i-1].Pos - c.XTicks[i].Pos; gap < 50 {
					t.Fatalf("interval %v (window %v): %d x labels, %q and %q only %.1f px apart",
						interval, window, len(c.XTicks), c.XTicks[i-1].Label, c.XTicks[i].Label, gap)
				}
			}
		}
	}
}
