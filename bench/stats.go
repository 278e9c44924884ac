package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank method: the smallest value such that at least p % of the
// values are less than or equal to it. It returns 0 for an empty slice.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// Latencies summarises a set of durations.
type Latencies struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// Summarize sorts d in place and returns its count, p50, p99 and maximum.
func Summarize(d []time.Duration) Latencies {
	slices.Sort(d)
	l := Latencies{N: len(d), P50: Percentile(d, 50), P99: Percentile(d, 99)}
	if len(d) > 0 {
		l.Max = d[len(d)-1]
	}
	return l
}
