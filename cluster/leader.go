package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/opapi"
)

// LeaseStatus is the leader's view of leases and self-preservation (a
// wire type of /v1/status, defined in opapi).
type LeaseStatus = opapi.LeaseStatus

// leaseKeeper is the leader's lease bookkeeping: renewal rate, the moment
// leadership began (for grace), the lease deadlines, and eviction totals.
type leaseKeeper struct {
	n    *Node
	rate *rateCounter

	mu          sync.Mutex
	leaderSince int64
	evicted     uint64
	// lastExpired is how many expired leases the last pass found.
	lastExpired int
	// window charges evictions against the cap per evictionSpan, however
	// many passes the deadlines and the eviction interval run in it.
	window evictionWindow

	// tracking is set while run is running; changes to the registry then
	// mark the instances they changed dirty so their deadlines are
	// scheduled (dirtyApps: every instance of an application, for a change
	// that names no instance).
	tracking  atomic.Bool
	dirtyMu   sync.Mutex
	dirty     map[fsm.KeyBody]struct{}
	dirtyApps map[string]bool
	allDirty  bool

	// looks counts the keeper's looks at the registry's leases (passes
	// and deadline checks), each a scan of what it looks at.
	looks atomic.Int64
}

// minPassGap spaces eviction passes triggered by deadlines: expiries close
// together are evicted in one batch, and a pass (a registry scan) runs at
// most a few times a second.
const minPassGap = 250 * time.Millisecond

// scheduleEvery is how often the instances changed meanwhile have their
// deadlines scheduled, in one registry read per tick.
const scheduleEvery = 100 * time.Millisecond

// retryEvictAfter is when a lease that expired but was not evicted
// (self-preservation, the cap, a failed apply) is looked at again.
const retryEvictAfter = time.Second

// preservedPassEvery is how often a full pass runs while self-preservation
// holds: how fresh the expired count in the lease status is then. Until
// then, deadlines that come due are left in the heap and the lease
// numbers are looked at again (no scan) every retryEvictAfter; the
// eviction interval's pass runs too. Before, every expired lease was
// retried a second later, each retry a scan of the registry and a list of
// every expired lease: with a million leases expired behind
// self-preservation (clients cut off from the registry), two scans and
// tens of MB of garbage a second on the leader, for nothing.
const preservedPassEvery = 10 * time.Second

func newLeaseKeeper(n *Node) *leaseKeeper {
	k := &leaseKeeper{n: n, rate: newRateCounter(n.cfg.Lease.RenewalRateWindow),
		window: evictionWindow{span: evictionSpan(n.cfg.Lease)},
		dirty:  map[fsm.KeyBody]struct{}{}, dirtyApps: map[string]bool{}}
	n.Observe(k.onChange)
	return k
}

// onChange runs for every applied change: it only notes which instances
// changed, the keeper's goroutine schedules their deadlines. Only the
// changed instances: a registration into an application of thousands
// costs one deadline, so the leader's work per write does not grow with
// the application (renewals are not changes here: a renewed lease is
// rescheduled when its old deadline comes, see dueExpired).
func (k *leaseKeeper) onChange(c fsm.Change) {
	if !k.tracking.Load() || c.Empty() || c.Region != "" {
		return // a remote region's copy holds no lease of this cluster
	}
	k.dirtyMu.Lock()
	switch {
	case c.All:
		k.allDirty = true
	case len(c.Keys) == 0:
		for _, a := range c.Apps {
			k.dirtyApps[a] = true
		}
	default:
		for _, key := range c.Keys {
			k.dirty[key] = struct{}{}
		}
	}
	k.dirtyMu.Unlock()
}

// evaluate scans the registry at now for the leases that expired (an
// eviction pass) and returns them with the lease numbers, which then count
// them. The scan allocates nothing per instance: at a million instances it
// is the pass's whole cost.
func (k *leaseKeeper) evaluate(now time.Time) (LeaseStatus, []fsm.ExpiredLease) {
	k.mu.Lock()
	since := k.leaderSince
	k.mu.Unlock()
	k.looks.Add(1)
	pending := k.n.renew.pendingTimes()
	nowMs := now.UnixMilli()
	var expired []fsm.ExpiredLease
	k.n.fsm.Read(func(r *fsm.Registry) {
		r.Range(func(e *fsm.Entry) {
			// A pending renewal only moves the lease later, so its key
			// is looked up for a lease that expired without it.
			if leaseExpired(e.RenewedAt(), e.DurationMs(), since, nowMs) &&
				(len(pending) == 0 || leaseExpired(max(e.RenewedAt(), pending[renewKey{e.App, e.ID}]), e.DurationMs(), since, nowMs)) {
				expired = append(expired, fsm.ExpiredLeaseOf(e))
			}
		})
	})
	k.mu.Lock()
	k.lastExpired = len(expired)
	k.mu.Unlock()
	return k.status(now), expired
}

// status is the lease numbers at now without a registry scan: the
// registry keeps its instances counted by lease shape, and the expired
// leases are those the last eviction pass found (a pass runs at every
// lease's deadline and every eviction interval). Status, metrics and the
// dashboard's trends ask for it every few seconds on every node; a scan
// each time held the FSM's read lock for a second at a million instances,
// and every write and renewal queued behind the writer that waited for it.
func (k *leaseKeeper) status(now time.Time) LeaseStatus {
	cfg := k.n.cfg.Lease
	k.mu.Lock()
	since, evicted, expired := k.leaderSince, k.evicted, k.lastExpired
	k.mu.Unlock()
	var shapes []fsm.LeaseShapeCount
	k.n.fsm.Read(func(r *fsm.Registry) { shapes = r.LeaseShapes() })
	var expected float64
	var count int
	maxGrace := since
	for _, sh := range shapes {
		expected += renewalsPerMin(sh.RenewalIntervalSecs) * float64(sh.Instances)
		count += sh.Instances
		maxGrace = max(maxGrace, since+sh.DurationMs())
	}
	st := LeaseStatus{
		SelfPreservationEnabled: cfg.SelfPreservation,
		RenewsLastMin:           k.rate.perMinute(now),
		Threshold:               renewalThreshold(expected, cfg.RenewalPercentThreshold),
		ExpectedRenewsPerMin:    expected,
		Instances:               count,
		Expired:                 expired,
		EvictedTotal:            evicted,
		LeaderSinceMs:           since,
		GraceUntilMs:            maxGrace,
		From:                    k.n.cfg.NodeID,
	}
	st.SelfPreservationActive = selfPreserving(cfg.SelfPreservation, st.RenewsLastMin, st.Threshold)
	return st
}

// startGrace gives every lease a full duration of grace from now: a new
// leader's, or a restore's, whose leases were renewed on another clock.
func (k *leaseKeeper) startGrace(now time.Time) {
	k.mu.Lock()
	k.leaderSince = now.UnixMilli()
	k.mu.Unlock()
}

// run evicts expired leases while this node leads: at their deadlines,
// which it tracks in a heap, and in a full pass every eviction interval
// (Eureka's schedule, now only the upper bound).
func (k *leaseKeeper) run(stop <-chan struct{}) {
	now := time.Now()
	k.startGrace(now)
	k.mu.Lock()
	k.lastExpired = 0
	k.window.reset()
	k.mu.Unlock()
	k.rate.start(now)
	defer k.rate.clear()
	dl := newDeadlines()
	k.tracking.Store(true)
	defer k.tracking.Store(false)
	k.dirtyMu.Lock()
	k.allDirty = true
	k.dirtyMu.Unlock()
	k.scheduleDirty(dl)

	scan := time.NewTicker(k.n.cfg.Lease.EvictionInterval)
	defer scan.Stop()
	changed := time.NewTicker(scheduleEvery)
	defer changed.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wasActive := false
	// preserving: self-preservation held at the last look (preservedPassEvery).
	preserving := false
	var lastPass, lastLook time.Time
	pass := func(now time.Time) {
		lastPass = now
		st, expired := k.evaluate(now)
		preserving, lastLook = st.SelfPreservationActive, now
		if st.SelfPreservationActive != wasActive {
			wasActive = st.SelfPreservationActive
			k.n.log.Warn("self-preservation changed", "active", wasActive,
				"renews_last_min", st.RenewsLastMin, "threshold", st.Threshold)
		}
		if st.SelfPreservationActive || len(expired) == 0 {
			k.retryLater(dl, expired, now)
			return
		}
		left := k.evict(expired, st.Instances)
		k.mu.Lock()
		k.lastExpired = len(left) // the evicted ones are gone
		k.mu.Unlock()
		k.retryLater(dl, left, now)
	}
	for {
		wait := time.Hour
		switch at, ok := dl.next(); {
		case preserving: // an instant, not a wait: the loop comes round every scheduleEvery
			wait = max(time.Until(lastLook.Add(retryEvictAfter)), 0)
		case ok:
			due := time.UnixMilli(at + 1)
			wait = max(time.Until(due), time.Until(lastPass.Add(minPassGap)), 0)
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return
		case <-changed.C:
			k.scheduleDirty(dl)
		case now := <-scan.C:
			pass(now)
		case now := <-timer.C:
			if preserving { // the lease numbers only, no scan
				lastLook = now
				preserving = k.status(now).SelfPreservationActive
			}
			switch {
			case preserving && now.Sub(lastPass) >= preservedPassEvery:
				pass(now) // the expired count, kept fresh
			case preserving: // due deadlines wait in the heap
			case k.dueExpired(dl, now):
				pass(now)
			}
		}
	}
}

// deadlineOf is when a lease expires for this leader (epoch ms).
func (k *leaseKeeper) deadlineOf(e *fsm.Entry, pending map[renewKey]int64, since int64) int64 {
	last := max(e.RenewedAt(), pending[renewKey{e.App, e.ID}])
	return max(last, since) + e.DurationMs()
}

// scheduleDirty schedules the deadlines of the instances changed since the
// last call (all of them after a restore or at the start of leadership)
// and returns how many instances it looked at.
func (k *leaseKeeper) scheduleDirty(dl *deadlines) int {
	k.dirtyMu.Lock()
	all, keys, apps := k.allDirty, k.dirty, k.dirtyApps
	if !all && len(keys) == 0 && len(apps) == 0 {
		k.dirtyMu.Unlock()
		return 0
	}
	k.allDirty, k.dirty, k.dirtyApps = false, map[fsm.KeyBody]struct{}{}, map[string]bool{}
	k.dirtyMu.Unlock()
	k.mu.Lock()
	since := k.leaderSince
	k.mu.Unlock()
	pending := k.n.renew.pendingTimes()
	looked := 0
	k.n.fsm.Read(func(r *fsm.Registry) {
		add := func(e *fsm.Entry) {
			looked++
			dl.schedule(e.App, k.deadlineOf(e, pending, since))
		}
		if all {
			r.Range(add)
			return
		}
		for key := range keys {
			if e := r.Get(key.App, key.ID); e != nil {
				add(e) // a cancelled one leaves its application's schedule when it comes due
			}
		}
		for app := range apps {
			r.RangeApp(app, add)
		}
	})
	return looked
}

// dueExpired takes the applications whose deadline passed, looks at their
// instances' leases, schedules each application again at the earliest
// deadline among them and reports whether any lease really expired.
func (k *leaseKeeper) dueExpired(dl *deadlines, now time.Time) bool {
	apps := dl.popDue(now.UnixMilli())
	if len(apps) == 0 {
		return false
	}
	k.looks.Add(1)
	k.mu.Lock()
	since := k.leaderSince
	k.mu.Unlock()
	pending := k.n.renew.pendingTimes()
	nowMs := now.UnixMilli()
	retryAt := nowMs + retryEvictAfter.Milliseconds() // in case the pass leaves an expired one
	expired := false
	k.n.fsm.Read(func(r *fsm.Registry) {
		for _, app := range apps {
			// One item for the application at its earliest deadline, not
			// one for each instance earlier than the ones before it.
			earliest, held := int64(0), false
			r.RangeApp(app, func(e *fsm.Entry) {
				at := k.deadlineOf(e, pending, since)
				if nowMs > at {
					expired = true
					at = retryAt
				}
				if !held || at < earliest {
					earliest, held = at, true
				}
			})
			if held {
				dl.schedule(app, earliest)
			}
		}
	})
	return expired
}

// retryLater schedules expired leases a pass did not evict.
func (k *leaseKeeper) retryLater(dl *deadlines, left []fsm.ExpiredLease, now time.Time) {
	at := now.Add(retryEvictAfter).UnixMilli()
	for _, kb := range left {
		dl.schedule(kb.App, at)
	}
}

// evict removes the expired leases the eviction budget allows (the cap
// per evictionSpan, less what the span already evicted), chosen in random
// order so no application is wiped first, in one log entry. It returns the
// expired leases it left: those over the budget, those with a renewal
// waiting since the look, all of them when the entry failed, and those the
// entry kept because they changed after the look (looked at again when
// they come due).
func (k *leaseKeeper) evict(expired []fsm.ExpiredLease, size int) []fsm.ExpiredLease {
	// The window is charged and read at the clock, not at the pass's time
	// (a timer's value, older by however long the loop was busy): an
	// eviction counts from when its entry applied, which is no earlier than
	// anyone could see it, so the next span's evictions are a full span
	// after it as a client sees them, however slow the apply was.
	k.mu.Lock()
	spent := k.window.spent(time.Now())
	k.mu.Unlock()
	limit := evictionBudget(size, spent, k.n.cfg.Lease.RenewalPercentThreshold)
	rand.Shuffle(len(expired), func(i, j int) { expired[i], expired[j] = expired[j], expired[i] })
	var left []fsm.ExpiredLease
	if len(expired) > limit {
		// Warn when the cap bites; the retries that follow while earlier
		// evictions have spent the window's budget (one a second per lease
		// left) only debug-log.
		logCapped := k.n.log.Warn
		if limit == 0 && spent > 0 {
			logCapped = k.n.log.Debug
		}
		logCapped("eviction capped", "expired", len(expired), "evicting", limit,
			"evicted_in_window", spent, "window", k.window.span)
		expired, left = expired[:limit], expired[limit:]
	}
	if len(expired) == 0 {
		return left
	}
	if h := k.n.cfg.hooks; h != nil && h.beforeEvict != nil {
		h.beforeEvict(expired)
	}
	// A heartbeat the leader answered since its look waits in the renewal
	// batch, which reaches the log after this eviction: judged against the
	// registry, which still held the instance, it was answered 200. Its
	// lease is not evicted now but looked at again when it comes due; so
	// is one that changed in the registry since the look.
	expired, renewed := k.withoutRenewed(expired)
	left = append(left, renewed...)
	if len(expired) == 0 {
		return left
	}
	evicted, err := k.n.applyEviction(expired)
	// An eviction whose commit is unknown may still commit: it is charged
	// too, so that it cannot come on top of a full budget.
	if err == nil || errors.Is(err, errNotCommitted) {
		k.mu.Lock()
		k.window.record(time.Now(), evicted)
		if err == nil {
			k.evicted += uint64(evicted)
		}
		k.mu.Unlock()
	}
	if err != nil {
		k.n.log.Warn("eviction failed", "instances", len(expired), "error", err)
		return append(left, expired...)
	}
	kept := len(expired) - evicted
	k.n.log.Info("evicted expired leases", "instances", evicted, "kept_renewed", kept)
	if kept > 0 {
		k.n.fsm.Read(func(r *fsm.Registry) {
			for _, l := range expired {
				if r.Get(l.App, l.ID) != nil {
					left = append(left, l)
				}
			}
		})
	}
	return left
}

// withoutRenewed splits expired into the leases nothing touched since the
// look and those renewed or registered again since: with a renewal waiting
// in the leader's batches, or changed in the registry.
//
// The batches are asked first. A renewal leaves them only once the
// leader's registry holds it (renewBatcher.writing), so one that is in
// neither when they are asked is in the registry when it is read next.
// Asked the other way round, a batch written in between would hide its
// renewals from both, and an entry of an older release's format
// (CmdEvict, which removes whatever it names) would evict an instance
// whose heartbeat was answered 200. The newer entry checks again as it
// applies (fsm.ExpiredLease.ChangedIn), which closes what is left: a
// renewal that arrives after this check and is applied before the entry.
func (k *leaseKeeper) withoutRenewed(expired []fsm.ExpiredLease) (evict, renewed []fsm.ExpiredLease) {
	pending := k.n.renew.pendingAmong(expired)
	k.n.fsm.Read(func(r *fsm.Registry) {
		for _, l := range expired {
			e := r.Get(l.App, l.ID)
			if pending[renewKey{l.App, l.ID}] || (e != nil && l.ChangedIn(e)) {
				renewed = append(renewed, l)
			} else {
				evict = append(evict, l)
			}
		}
	})
	return evict, renewed
}

// applyEviction appends the eviction of expired and returns how many it
// evicted. Once every server reads it, the entry evicts each lease only as
// it was found expired (fsm.EvictLeasesBody); until then it evicts every
// instance it names, as older releases do.
func (n *Node) applyEviction(expired []fsm.ExpiredLease) (int, error) {
	if !n.everyServerReads(fsm.LogFormatEvictLeases) {
		keys := make([]fsm.KeyBody, len(expired))
		for i, l := range expired {
			keys[i] = fsm.KeyBody{App: l.App, ID: l.ID}
		}
		return len(expired), n.applyLocalCmd(fsm.CmdEvict, &fsm.EvictBody{Keys: keys})
	}
	err := n.applyLocalCmd(fsm.CmdEvictLeases, &fsm.EvictLeasesBody{Leases: expired})
	var kept *fsm.LeasesKept
	if errors.As(err, &kept) {
		return kept.Evicted, nil
	}
	return len(expired), err
}

// LeaseStatus returns the leader's lease numbers (asking the leader when
// this node is a follower).
func (n *Node) LeaseStatus(ctx context.Context) (LeaseStatus, error) {
	if n.IsLeader() {
		return n.leases.status(time.Now()), nil
	}
	addr := n.leaderHTTP()
	if addr == "" || addr == n.cfg.HTTPAdvertise {
		return LeaseStatus{}, fmt.Errorf("lease status: %w", ErrNoLeader)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := n.peers().LeaseStatus(ctx, addr)
	if err != nil {
		return st, fmt.Errorf("lease status from %s: %w", addr, noLeader(err))
	}
	return st, nil
}
