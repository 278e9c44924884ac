package cluster

import (
	"math"
	"sync"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// Lease arithmetic, kept pure so it can be table-tested. The rules are in
// docs/design.md, "Leases":
//   - a lease expires one duration after its last renewal (eureka-server
//     adds the duration twice; heureka does not);
//   - a leader grants every lease a full duration of grace from the moment
//     it took office, since renewals may have died with the old leader;
//   - self-preservation stops eviction while renewals per minute are at or
//     below the threshold derived from the actual registry;
//   - one pass evicts at most (1 − threshold) of the registry.

// LeaseConfig holds the eviction and self-preservation settings.
type LeaseConfig struct {
	EvictionInterval        time.Duration
	RenewalPercentThreshold float64
	SelfPreservation        bool
	// RenewalRateWindow is the window renewals are counted over; the count
	// is scaled to a per-minute rate. Eureka uses one minute.
	RenewalRateWindow time.Duration
}

// DefaultLeaseConfig returns Eureka's defaults.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{EvictionInterval: 60 * time.Second, RenewalPercentThreshold: 0.85,
		SelfPreservation: true, RenewalRateWindow: time.Minute}
}

// renewalsPerMin is what one instance renewing every ri seconds promises:
// 60/ri renewals a minute (Eureka's default interval when ri is not set).
// The registry's expected rate is the sum over its instances.
func renewalsPerMin(ri int32) float64 {
	if ri <= 0 {
		ri = fsm.DefaultRenewalIntervalSecs
	}
	return 60 / float64(ri)
}

// renewalThreshold is the renewals per minute at or below which
// self-preservation engages.
func renewalThreshold(expectedPerMin, pct float64) int64 {
	return int64(math.Floor(expectedPerMin * pct))
}

// selfPreserving reports whether eviction must stop.
func selfPreserving(enabled bool, renewsPerMin, threshold int64) bool {
	return enabled && threshold > 0 && renewsPerMin <= threshold
}

// evictionCap is how many leases one pass may evict: size − ⌊size·pct⌋.
func evictionCap(size int, pct float64) int {
	return size - int(math.Floor(float64(size)*pct))
}

// leaseExpired reports whether a lease last renewed at lastRenewal (epoch
// ms, the later of the log's and the leader's pending view) with duration
// durMs has expired at now, for a leader in office since leaderSince.
func leaseExpired(lastRenewal, durMs, leaderSince, now int64) bool {
	return now > max(lastRenewal, leaderSince)+durMs
}

// rateCounter counts events in one-second buckets over a window.
type rateCounter struct {
	mu      sync.Mutex
	window  int // seconds
	buckets []int64
	secs    []int64 // which second each bucket holds
	started int64   // unix second the counter started
}

func newRateCounter(window time.Duration) *rateCounter {
	w := max(int(window/time.Second), 1)
	// One bucket more than the window: the current second, which is still
	// filling, must not overwrite the oldest second of the full window.
	return &rateCounter{window: w, buckets: make([]int64, w+1), secs: make([]int64, w+1)}
}

func (c *rateCounter) reset(now time.Time) {
	c.mu.Lock()
	clear(c.buckets)
	clear(c.secs)
	c.started = now.Unix()
	c.mu.Unlock()
}

func (c *rateCounter) add(now time.Time, n int64) {
	s := now.Unix()
	i := int(s % int64(len(c.buckets)))
	c.mu.Lock()
	if c.secs[i] != s {
		c.secs[i], c.buckets[i] = s, 0
	}
	c.buckets[i] += n
	c.mu.Unlock()
}

// perMinute is the count over the last full window (excluding the current
// second), scaled to a minute; while the counter is younger than the
// window, the observed part is extrapolated.
func (c *rateCounter) perMinute(now time.Time) int64 {
	cur := now.Unix()
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum int64
	for i, s := range c.secs {
		if s < cur && s >= cur-int64(c.window) {
			sum += c.buckets[i]
		}
	}
	span := min(int64(c.window), cur-c.started)
	if span <= 0 {
		return 0
	}
	return sum * 60 / span
}
