package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/opapi"
)

// leaseArgs are short lease timings: evict every 300 ms, count renewals
// over 2 s, refresh read caches every 100 ms.
var leaseArgs = []string{"--eviction-interval", "300ms", "--renewal-rate-window", "2s",
	"--response-cache-update-interval", "100ms", "--renew-batch-interval", "200ms"}

// shortLease registers with a 1 s renewal interval and a 2 s lease.
func shortLease(durationSecs int) map[string]any {
	return map[string]any{"leaseInfo": map[string]any{"renewalIntervalInSecs": 1, "durationInSecs": durationSecs}}
}

// leases is the leader's lease numbers as nd's /v1/status shows them.
func leases(t testing.TB, nd *Node) (opapi.LeaseStatus, bool) {
	st, err := nd.TryStatus()
	if err != nil || st.Leases == nil {
		return opapi.LeaseStatus{}, false
	}
	return *st.Leases, true
}

// renewer heartbeats a set of instances in the background, spreading the
// calls over the given nodes; instances can be paused and resumed.
type renewer struct {
	mu      sync.Mutex
	nodes   []*Node
	keys    []string // "APP/id"
	paused  map[string]bool
	last    map[string]time.Time // last acknowledged renewal
	fails   atomic.Int64
	stop    chan struct{}
	stopped chan struct{}
}

func startRenewer(t testing.TB, nodes []*Node, keys []string, every time.Duration, workers int) *renewer {
	r := &renewer{nodes: nodes, keys: keys, paused: map[string]bool{}, last: map[string]time.Time{},
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(r.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for round := 0; ; round++ {
			r.round(round, workers)
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
	t.Cleanup(r.Stop)
	return r
}

func (r *renewer) round(round, workers int) {
	r.mu.Lock()
	nodes := append([]*Node(nil), r.nodes...)
	var keys []string
	for _, k := range r.keys {
		if !r.paused[k] {
			keys = append(keys, k)
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	ch := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				nd := nodes[(i+round)%len(nodes)]
				code, _, _, err := TryDo("PUT", nd.URL("/eureka/apps/"+keys[i]), nil)
				if err == nil && code == http.StatusOK {
					r.mu.Lock()
					r.last[keys[i]] = time.Now()
					r.mu.Unlock()
				} else {
					r.fails.Add(1)
				}
			}
		}()
	}
	for i := range keys {
		ch <- i
	}
	close(ch)
	wg.Wait()
}

func (r *renewer) setNodes(nodes []*Node) { r.mu.Lock(); r.nodes = nodes; r.mu.Unlock() }

func (r *renewer) pause(keys ...string) {
	r.mu.Lock()
	for _, k := range keys {
		r.paused[k] = true
	}
	r.mu.Unlock()
}

func (r *renewer) resumeAll() { r.mu.Lock(); clear(r.paused); r.mu.Unlock() }

func (r *renewer) lastRenewal(key string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[key]
}

func (r *renewer) Stop() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.stopped
}

func registerMany(t testing.TB, nodes []*Node, app string, n int, extra map[string]any) []string {
	t.Helper()
	keys := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-%04d", app, i)
		keys[i] = app + "/" + id
		wg.Add(1)
		sem <- struct{}{}
		go func(i int, id string) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := TryRegisterJSON(nodes[i%len(nodes)].BaseURL(), app, id, extra); err != nil {
				errs <- err
			}
		}(i, id)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return keys
}

func present(nd *Node, key string) (bool, error) {
	apps, err := TryGetApps(nd.BaseURL())
	if err != nil {
		return false, err
	}
	_, ok := apps.ByKey()[key]
	return ok, nil
}

// TestLeaseExpiredInstanceIsEvictedEverywhere: an instance that stops
// renewing disappears from every node's reads within its lease duration plus
// the eviction interval plus one second, and the delta shows it DELETED.
func TestLeaseExpiredInstanceIsEvictedEverywhere(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: leaseArgs})
	c.WaitLeader(t, 10*time.Second)
	keys := registerMany(t, c.Nodes, "LEASE", 10, shortLease(2))
	r := startRenewer(t, c.Nodes, keys, 300*time.Millisecond, 4)
	time.Sleep(2500 * time.Millisecond) // let the renewal rate window fill
	victim := keys[3]
	r.pause(victim)
	lastAck := r.lastRenewal(victim)
	const bound = 2*time.Second + 300*time.Millisecond + time.Second
	for _, nd := range c.Nodes {
		WaitFor(t, 10*time.Second, func() bool {
			ok, err := present(nd, victim)
			return err == nil && !ok
		}, victim+" evicted on "+nd.ID)
	}
	if took := time.Since(lastAck); took > bound+500*time.Millisecond { // + the polling of three nodes
		t.Errorf("eviction took %s after the last renewal, bound %s", took, bound)
	} else {
		t.Logf("gone from every node %s after its last renewal (bound %s)", took.Round(time.Millisecond), bound)
	}
	for _, nd := range c.Nodes {
		apps := GetApps(t, nd.BaseURL())
		if len(apps.Instances) != 9 {
			t.Fatalf("%s lists %d instances, want 9 (only the silent one evicted)", nd.ID, len(apps.Instances))
		}
	}
	code, body, _ := Do(t, "GET", c.Nodes[1].URL("/eureka/apps/delta"), nil, "Accept", "application/json")
	if code != 200 || !json.Valid(body) || !containsAll(string(body), `"actionType":"DELETED"`, victim[len("LEASE/"):]) {
		t.Fatalf("delta does not show the eviction: %d %.400s", code, body)
	}
}

// TestSelfPreservationStopsEviction: 60% of the renewing instances stop at
// once; self-preservation turns on, nothing is evicted, the status shows the
// numbers; when they come back it turns off.
func TestSelfPreservationStopsEviction(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: leaseArgs})
	leader := c.WaitLeader(t, 10*time.Second)
	// The lease (5 s) outlasts the rate window (2 s), as Eureka's 90 s lease
	// outlasts its one-minute window: the rate drop is seen before leases expire.
	keys := registerMany(t, c.Nodes, "SP", 10, shortLease(5))
	// Renew at the declared 1 s interval: the threshold assumes it.
	r := startRenewer(t, c.Nodes, keys, time.Second, 4)
	WaitFor(t, 10*time.Second, func() bool {
		ls, ok := leases(t, leader)
		return ok && !ls.SelfPreservationActive && ls.RenewsLastMin > ls.Threshold && ls.Threshold > 0
	}, "renewal rate above threshold")
	r.pause(keys[:6]...)
	paused := time.Now()
	WaitFor(t, 10*time.Second, func() bool {
		ls, ok := leases(t, c.Nodes[2]) // a follower shows the leader's numbers too
		return ok && ls.SelfPreservationActive
	}, "self-preservation on")
	ls, _ := leases(t, leader)
	t.Logf("self-preservation on: renews_last_min=%d threshold=%d expected=%.0f", ls.RenewsLastMin, ls.Threshold, ls.ExpectedRenewsPerMin)
	if ls.RenewsLastMin > ls.Threshold || ls.Threshold != 510 {
		t.Fatalf("numbers do not explain self-preservation: %+v (want threshold 510 = 10 × 60 × 0.85)", ls)
	}
	// Watch until the silent leases are well past expiry: nothing may go.
	deadline := paused.Add(8 * time.Second)
	for time.Now().Before(deadline) {
		for _, nd := range c.Nodes {
			if apps, err := TryGetApps(nd.BaseURL()); err == nil && len(apps.Instances) != 10 {
				t.Fatalf("%s lists %d instances during self-preservation", nd.ID, len(apps.Instances))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ls, _ := leases(t, leader); ls.EvictedTotal != 0 {
		t.Fatalf("evicted %d during self-preservation", ls.EvictedTotal)
	}
	r.resumeAll()
	WaitFor(t, 10*time.Second, func() bool {
		ls, ok := leases(t, leader)
		return ok && !ls.SelfPreservationActive
	}, "self-preservation off again")
	time.Sleep(time.Second)
	if apps := GetApps(t, leader.BaseURL()); len(apps.Instances) != 10 {
		t.Fatalf("instances that came back were evicted: %d left", len(apps.Instances))
	}
}

// TestLeaderHandoverEvictsNothing: with 1,000 instances renewing steadily,
// killing the leader evicts nothing, and neither does stopping all three
// nodes for longer than a lease and starting them again.
func TestLeaderHandoverEvictsNothing(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: leaseArgs})
	leader := c.WaitLeader(t, 10*time.Second)
	const n = 1000
	keys := registerMany(t, c.Nodes, "HANDOVER", n, shortLease(4))
	r := startRenewer(t, c.Nodes, keys, time.Second, 16)
	time.Sleep(3 * time.Second)

	leader.Kill()
	live := c.Live()
	r.setNodes(live)
	newLeader := c.WaitLeader(t, 5*time.Second)
	t.Logf("leader %s killed; %s leads", leader.ID, newLeader.ID)
	checkNoEviction(t, live, n, 6*time.Second)
	leader.Restart(t)
	r.setNodes(c.Nodes)
	c.WaitLeader(t, 10*time.Second)

	// Whole-cluster restart, down for longer than the 4 s lease.
	r.Stop()
	for _, nd := range c.Nodes {
		nd.Stop()
	}
	time.Sleep(5 * time.Second)
	for _, nd := range c.Nodes {
		nd.Restart(t)
	}
	c.WaitLeader(t, 10*time.Second)
	r2 := startRenewer(t, c.Nodes, keys, time.Second, 16)
	defer r2.Stop()
	checkNoEviction(t, c.Nodes, n, 8*time.Second)
}

func checkNoEviction(t *testing.T, nodes []*Node, want int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, nd := range nodes {
			apps, err := TryGetApps(nd.BaseURL())
			if err != nil {
				continue // a node still starting
			}
			if len(apps.Instances) != want {
				t.Fatalf("%s lists %d instances, want %d: leases were evicted", nd.ID, len(apps.Instances), want)
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, nd := range nodes {
		if ls, ok := leases(t, nd); ok && ls.EvictedTotal != 0 {
			t.Fatalf("leader evicted %d leases", ls.EvictedTotal)
		}
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
