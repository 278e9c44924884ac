package dashboard

import (
	"context"
	"math"
	"sync"
	"time"
)

// The dashboard's trends come from the node's own recent history: a
// ticker samples a few numbers the node already keeps (renewal rate and
// threshold, registry change counts, cache hits, Raft commit timings) into
// fixed-size rings. Nothing is stored elsewhere; the memory is bounded by
// trendCapacity samples per series.

const (
	// trendCapacity is the number of samples kept per series: an hour at
	// the default interval.
	trendCapacity = 360
	// defaultTrendInterval is the sampling interval.
	defaultTrendInterval = 10 * time.Second
)

// trendReading is one look at the node's counters. Counters are
// cumulative (since the process started); NaN marks a gauge that could
// not be read.
type trendReading struct {
	RenewsPerMin, Threshold float64
	Registrations, Cancels  uint64
	CacheHits, CacheMisses  uint64
	// CommitMsSum and CommitCount are hashicorp/raft's commitTime histogram
	// (leader only; zero elsewhere).
	CommitMsSum float64
	CommitCount uint64
}

// readTrends reads the node's counters for the sampler.
func (d *Dashboard) readTrends() trendReading {
	r := trendReading{RenewsPerMin: math.NaN(), Threshold: math.NaN(),
		Registrations: d.registrations.Load(), Cancels: d.cancels.Load()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	ls, err := d.node.LeaseStatus(ctx)
	cancel()
	if err == nil {
		r.RenewsPerMin, r.Threshold = float64(ls.RenewsLastMin), float64(ls.Threshold)
	}
	// A read the readOnly level misses may still hit readWrite; only a
	// readWrite miss builds the document.
	cs := d.cfg.CacheStats()
	r.CacheHits, r.CacheMisses = cs.ReadOnlyHits+cs.ReadWriteHits, cs.ReadWriteMisses
	r.CommitMsSum, r.CommitCount = d.cfg.CommitTime()
	return r
}

// trendPoint is one sample of every series.
type trendPoint struct {
	At                  time.Time
	RenewsPerMin        float64
	Threshold           float64
	RegistrationsPerMin float64
	CancelsPerMin       float64
	// CacheHitRatio is in percent over the last interval.
	CacheHitRatio float64
	// CommitMs is the mean Raft commit time over the last interval.
	CommitMs float64
}

// trendSampler keeps the last capacity trendPoints in a ring.
type trendSampler struct {
	read     func() trendReading
	interval time.Duration

	mu      sync.Mutex
	ring    []trendPoint
	next    int
	full    bool
	prev    trendReading
	prevAt  time.Time
	hasPrev bool
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newTrendSampler(capacity int, interval time.Duration, read func() trendReading) *trendSampler {
	return &trendSampler{read: read, interval: interval, ring: make([]trendPoint, capacity)}
}

// start samples every interval until close.
func (t *trendSampler) start() {
	t.stop, t.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(t.done)
		tick := time.NewTicker(t.interval)
		defer tick.Stop()
		t.sample(time.Now(), t.read())
		for {
			select {
			case <-t.stop:
				return
			case now := <-tick.C:
				t.sample(now, t.read())
			}
		}
	}()
}

// close stops the ticker (if started) and waits for it; later calls do
// nothing.
func (t *trendSampler) close() {
	t.once.Do(func() {
		if t.stop != nil {
			close(t.stop)
			<-t.done
		}
	})
}

// sample turns a reading into a point: gauges as read, counters as rates
// against the previous reading. The first reading only sets the baseline.
func (t *trendSampler) sample(now time.Time, r trendReading) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, prevAt, hasPrev := t.prev, t.prevAt, t.hasPrev
	t.prev, t.prevAt, t.hasPrev = r, now, true
	if !hasPrev {
		return
	}
	minutes := now.Sub(prevAt).Minutes()
	if minutes <= 0 {
		return
	}
	perMin := func(cur, old uint64) float64 {
		if cur < old { // counter reset (restart of a source)
			return math.NaN()
		}
		return float64(cur-old) / minutes
	}
	p := trendPoint{At: now, RenewsPerMin: r.RenewsPerMin, Threshold: r.Threshold,
		RegistrationsPerMin: perMin(r.Registrations, prev.Registrations),
		CancelsPerMin:       perMin(r.Cancels, prev.Cancels),
		CacheHitRatio:       math.NaN(), CommitMs: math.NaN()}
	if r.CacheHits >= prev.CacheHits && r.CacheMisses >= prev.CacheMisses {
		if h, m := r.CacheHits-prev.CacheHits, r.CacheMisses-prev.CacheMisses; h+m > 0 {
			p.CacheHitRatio = 100 * float64(h) / float64(h+m)
		}
	}
	if r.CommitCount > prev.CommitCount && r.CommitMsSum >= prev.CommitMsSum {
		p.CommitMs = (r.CommitMsSum - prev.CommitMsSum) / float64(r.CommitCount-prev.CommitCount)
	}
	t.ring[t.next] = p
	t.next = (t.next + 1) % len(t.ring)
	if t.next == 0 {
		t.full = true
	}
}

// points returns the kept samples, oldest first.
func (t *trendSampler) points() []trendPoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.full {
		return append([]trendPoint(nil), t.ring[:t.next]...)
	}
	return append(append([]trendPoint(nil), t.ring[t.next:]...), t.ring[:t.next]...)
}

// span is how far back the ring reaches when full.
func (t *trendSampler) span() time.Duration { return time.Duration(len(t.ring)) * t.interval }
