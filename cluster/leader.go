package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/opapi"
)

// LeaseStatus is the leader's view of leases and self-preservation (a
// wire type of /v1/status, defined in opapi).
type LeaseStatus = opapi.LeaseStatus

// leaseKeeper is the leader's lease bookkeeping: renewal rate, the moment
// leadership began (for grace), and eviction totals.
type leaseKeeper struct {
	n    *Node
	rate *rateCounter

	mu          sync.Mutex
	leaderSince int64
	evicted     uint64
}

func newLeaseKeeper(n *Node) *leaseKeeper {
	return &leaseKeeper{n: n, rate: newRateCounter(n.cfg.Lease.RenewalRateWindow)}
}

// evaluate scans the registry at now: which leases expired and the
// self-preservation numbers.
func (k *leaseKeeper) evaluate(now time.Time) (LeaseStatus, []fsm.KeyBody) {
	cfg := k.n.cfg.Lease
	k.mu.Lock()
	since, evicted := k.leaderSince, k.evicted
	k.mu.Unlock()
	pending := k.n.renew.pendingTimes()
	nowMs := now.UnixMilli()
	var intervals []int32
	var expired []fsm.KeyBody
	maxGrace := since
	k.n.fsm.Read(func(r *fsm.Registry) {
		r.Each(func(e *fsm.Entry) {
			intervals = append(intervals, e.Instance.RenewalIntervalSecs)
			last := max(e.LastRenewalTs, pending[e.App+"\x00"+e.ID])
			maxGrace = max(maxGrace, since+e.DurationMs())
			if leaseExpired(last, e.DurationMs(), since, nowMs) {
				expired = append(expired, fsm.KeyBody{App: e.App, ID: e.ID})
			}
		})
	})
	expected := expectedRenewalsPerMin(intervals)
	st := LeaseStatus{
		SelfPreservationEnabled: cfg.SelfPreservation,
		RenewsLastMin:           k.rate.perMinute(now),
		Threshold:               renewalThreshold(expected, cfg.RenewalPercentThreshold),
		ExpectedRenewsPerMin:    expected,
		Instances:               len(intervals),
		Expired:                 len(expired),
		EvictedTotal:            evicted,
		LeaderSinceMs:           since,
		GraceUntilMs:            maxGrace,
		From:                    k.n.cfg.NodeID,
	}
	st.SelfPreservationActive = selfPreserving(cfg.SelfPreservation, st.RenewsLastMin, st.Threshold)
	return st, expired
}

// run evicts expired leases every eviction interval while this node leads.
func (k *leaseKeeper) run(stop <-chan struct{}) {
	now := time.Now()
	k.mu.Lock()
	k.leaderSince = now.UnixMilli()
	k.mu.Unlock()
	k.rate.reset(now)
	t := time.NewTicker(k.n.cfg.Lease.EvictionInterval)
	defer t.Stop()
	wasActive := false
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			st, expired := k.evaluate(now)
			if st.SelfPreservationActive != wasActive {
				wasActive = st.SelfPreservationActive
				k.n.log.Warn("self-preservation changed", "active", wasActive,
					"renews_last_min", st.RenewsLastMin, "threshold", st.Threshold)
			}
			if st.SelfPreservationActive || len(expired) == 0 {
				continue
			}
			k.evict(expired, st.Instances)
		}
	}
}

// evict removes at most the per-pass cap of expired leases, chosen in random
// order so no application is wiped first.
func (k *leaseKeeper) evict(expired []fsm.KeyBody, size int) {
	limit := evictionCap(size, k.n.cfg.Lease.RenewalPercentThreshold)
	rand.Shuffle(len(expired), func(i, j int) { expired[i], expired[j] = expired[j], expired[i] })
	if len(expired) > limit {
		k.n.log.Warn("eviction capped", "expired", len(expired), "evicting", limit)
		expired = expired[:limit]
	}
	if len(expired) == 0 {
		return
	}
	entry, err := fsm.Encode(fsm.CmdEvict, &fsm.EvictBody{Keys: expired})
	if err == nil {
		_, err = k.n.applyLocal(entry)
	}
	if err != nil {
		k.n.log.Warn("eviction failed", "instances", len(expired), "error", err)
		return
	}
	k.mu.Lock()
	k.evicted += uint64(len(expired))
	k.mu.Unlock()
	k.n.log.Info("evicted expired leases", "instances", len(expired))
}

// LeaseStatus returns the leader's lease numbers (asking the leader when
// this node is a follower).
func (n *Node) LeaseStatus(ctx context.Context) (LeaseStatus, error) {
	if n.IsLeader() {
		st, _ := n.leases.evaluate(time.Now())
		return st, nil
	}
	addr := n.leaderHTTP()
	if addr == "" || addr == n.cfg.HTTPAdvertise {
		return LeaseStatus{}, fmt.Errorf("lease status: %w", ErrNoLeader)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url(addr, pathLeaseStatus), nil)
	if err != nil {
		return LeaseStatus{}, err
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return LeaseStatus{}, fmt.Errorf("lease status from %s: %v: %w", addr, err, ErrNoLeader)
	}
	defer resp.Body.Close()
	var st LeaseStatus
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("lease status from %s: %s: %w", addr, resp.Status, ErrNoLeader)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("lease status from %s: %w", addr, err)
	}
	return st, nil
}
