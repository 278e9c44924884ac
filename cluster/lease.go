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
//   - evictions within any window of max(eviction interval, renewal-rate
//     window) total at most (1 − threshold) of the registry (eureka-server
//     caps each pass instead; docs/leases.md, "The eviction cap").

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

// evictionCap is how many leases a window may evict from a registry of
// size: size − ⌊size·pct⌋ (eureka-server's limit for one pass).
func evictionCap(size int, pct float64) int {
	return size - int(math.Floor(float64(size)*pct))
}

// evictionBudget is how many more leases may be evicted now, when the
// window already evicted spent of them from a registry that holds size.
// The cap is computed from size+spent, the registry as it would be without
// the window's evictions, so that evicting does not shrink the base of its
// own cap: within a window the registry keeps at least ⌊(size+spent)·pct⌋.
func evictionBudget(size, spent int, pct float64) int {
	return max(evictionCap(size+spent, pct)-spent, 0)
}

// evictionSpan is the window the eviction cap holds over: the renewal-rate
// window, so that no burst of silence evicts more than the cap before the
// rate (and so self-preservation) can show it, and never less than the
// eviction interval, so that heureka evicts no faster than eureka-server's
// one capped pass per interval.
func evictionSpan(c LeaseConfig) time.Duration {
	return max(c.EvictionInterval, c.RenewalRateWindow)
}

// evictionWindow remembers the evictions of the last span, to charge them
// against the cap (a sliding window: the cap holds in every span, not only
// in aligned ones). It holds one record per eviction, and evictions are at
// least a pass gap apart, so it stays small. Not safe for concurrent use.
type evictionWindow struct {
	span time.Duration
	recs []evictionRecord
}

type evictionRecord struct {
	at time.Time
	n  int
}

// spent drops the records older than the span at now and returns the
// evictions left in it. A record counts while now − at < span, so with
// one pass per span (Eureka's defaults) each pass has the full cap. Times
// carry the monotonic clock, so a wall clock step does not free the budget.
func (w *evictionWindow) spent(now time.Time) int {
	keep := w.recs[:0]
	total := 0
	for _, r := range w.recs {
		if now.Sub(r.at) < w.span {
			keep = append(keep, r)
			total += r.n
		}
	}
	clear(w.recs[len(keep):])
	w.recs = keep
	return total
}

// record charges n evictions at now.
func (w *evictionWindow) record(now time.Time, n int) {
	if n > 0 {
		w.recs = append(w.recs, evictionRecord{at: now, n: n})
	}
}

// reset forgets every eviction: a new leader starts with the budget
// unspent (docs/leases.md, "The eviction cap", on why that is safe).
func (w *evictionWindow) reset() {
	w.recs = nil
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

// start marks the beginning of a term as leader at now. Heartbeats this
// node counted before (it accepts them as soon as Raft makes it leader,
// which can be a moment before its lease keeper runs) are kept, and the
// counter's start goes back to the first of them; what an earlier term
// counted was cleared when that term ended (clear).
func (c *rateCounter) start(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.started = now.Unix()
	for i, s := range c.secs {
		if c.buckets[i] != 0 && s < c.started {
			c.started = s
		}
	}
}

// clear forgets every count: the term that made them has ended.
func (c *rateCounter) clear() {
	c.mu.Lock()
	clear(c.buckets)
	clear(c.secs)
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
