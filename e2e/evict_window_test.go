package e2e

// The eviction cap per renewal-rate window (docs/leases.md, "The eviction
// cap"): at a short --eviction-interval a burst of silence must not erode
// the registry faster than the renewal rate can show it.

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/opapi"
)

// leaderLeases polls the leader's lease numbers until it answers (a status
// request may fail while the machine is busy).
func leaderLeases(t *testing.T, leader *Node) opapi.LeaseStatus {
	t.Helper()
	var ls opapi.LeaseStatus
	WaitFor(t, 10*time.Second, func() bool {
		var ok bool
		ls, ok = leases(t, leader)
		return ok
	}, "lease status from the leader "+leader.ID)
	return ls
}

// TestEvictionCapHoldsPerRateWindow reproduces the case that showed the
// registry eroding at a short eviction interval: nine instances with 3 s
// leases, --eviction-interval 1s and the default one-minute renewal-rate
// window; six fall silent at once. Capping each pass (eureka-server's
// rule, and heureka's before) evicted 2, 2, 1 and 1 in consecutive seconds
// while the one-minute rate had not dropped yet, leaving 3 of 9 after
// 10 s. With the cap per window, cap(9) = 9 − ⌊9 × 0.85⌋ = 2 are evicted
// when the leases expire and the other four expired leases wait for the
// window to pass; before it does, the rate shows the silence and
// self-preservation holds them. The end state, for as long as the six stay
// silent: 7 listed, 4 of them expired, 2 evicted in all, self-preservation
// on.
func TestEvictionCapHoldsPerRateWindow(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: []string{"--eviction-interval", "1s"}})
	leader := c.WaitLeader(t, 10*time.Second)
	keys := registerMany(t, c.Nodes, "EROSION", 9, shortLease(3))
	// Renew at the declared 1 s interval: the threshold assumes it.
	r := startRenewer(t, c.Nodes, keys, time.Second, 3)

	// The leader's rate counter extrapolates while it is younger than the
	// window; a young one would see the silence at once and hide the
	// erosion behind self-preservation. 25 s of history keeps the rate
	// above the threshold (459 for 9 instances) when the leases expire:
	// (25 × 9 + 3 × 3) × 60 / 28 ≈ 501 a minute.
	WaitFor(t, 60*time.Second, func() bool {
		ls, ok := leases(t, leader)
		return ok && ls.From == leader.ID && time.Since(time.UnixMilli(ls.LeaderSinceMs)) >= 25*time.Second &&
			ls.Instances == 9 && ls.RenewsLastMin > ls.Threshold
	}, "25 s of renewals counted by the leader")
	ls := leaderLeases(t, leader)
	t.Logf("before the silence: renews_last_min=%d threshold=%d", ls.RenewsLastMin, ls.Threshold)

	r.pause(keys[:6]...)
	paused := time.Now()
	fewest := 9
	for time.Since(paused) < 10*time.Second {
		if ls, ok := leases(t, leader); ok && ls.Instances < fewest {
			fewest = ls.Instances
			t.Logf("%5.1fs after the silence: %d listed, %d expired, %d evicted, self-preservation %v",
				time.Since(paused).Seconds(), ls.Instances, ls.Expired, ls.EvictedTotal, ls.SelfPreservationActive)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ls = leaderLeases(t, leader)
	if fewest < 7 {
		t.Fatalf("%d of 9 left within 10 s of six falling silent (%d evicted): the cap, 2 for 9 instances, "+
			"must hold per renewal-rate window, not per eviction interval", fewest, 9-fewest)
	}
	if ls.EvictedTotal == 0 && ls.SelfPreservationActive {
		t.Fatalf("self-preservation engaged before the leases expired (renews_last_min=%d threshold=%d): "+
			"the test did not reach the cap it is about", ls.RenewsLastMin, ls.Threshold)
	}
	if ls.Instances != 7 || ls.EvictedTotal != 2 || ls.Expired != 4 {
		t.Fatalf("10 s after the silence: %d listed, %d evicted, %d expired; want 7, 2 and 4 (the cap for 9 is 2)",
			ls.Instances, ls.EvictedTotal, ls.Expired)
	}

	// The window drops the renewals from before the silence: with 7 listed
	// the threshold is ⌊7 × 60 × 0.85⌋ = 357 and the rate falls towards
	// 3 × 60 = 180 (below 357 about 26 s after the silence). Self-preservation
	// then holds the four, also after the evictions leave the window.
	WaitFor(t, 50*time.Second, func() bool {
		ls, ok := leases(t, leader)
		if ok && ls.Instances < 7 {
			t.Fatalf("%.1fs after the silence %d listed: evicted past the cap", time.Since(paused).Seconds(), ls.Instances)
		}
		return ok && ls.SelfPreservationActive
	}, "self-preservation on")
	ls = leaderLeases(t, leader)
	t.Logf("%.1fs after the silence: self-preservation on, renews_last_min=%d threshold=%d",
		time.Since(paused).Seconds(), ls.RenewsLastMin, ls.Threshold)
	if ls.Instances != 7 || ls.EvictedTotal != 2 || ls.Expired != 4 || ls.Threshold != 357 {
		t.Fatalf("end state: %d listed, %d evicted, %d expired, threshold %d; want 7, 2, 4 and 357",
			ls.Instances, ls.EvictedTotal, ls.Expired, ls.Threshold)
	}
	// What clients read agrees (a linearizable read on a follower).
	other := c.Followers(leader)[0]
	code, body, _ := Do(t, "GET", other.URL("/eureka/apps/EROSION?consistency=linearizable"), nil, "Accept", "application/json")
	if got := strings.Count(string(body), `"instanceId"`); code != http.StatusOK || got != 7 {
		t.Fatalf("%s lists %d EROSION instances (status %d), want 7", other.ID, got, code)
	}
}

// TestEvictionResumesEachRateWindow: with self-preservation off and a 6 s
// renewal-rate window, six of nine silent instances are evicted at the
// pace of the window, each time at most the cap of the registry then
// (2, 2, 1, 1), however often the 1 s eviction interval and the retries
// run passes.
func TestEvictionResumesEachRateWindow(t *testing.T) {
	const window = 6 * time.Second
	c := StartCluster(t, 3, Options{ExtraArgs: []string{"--eviction-interval", "1s",
		"--renewal-rate-window", window.String(), "--enable-self-preservation=false"}})
	leader := c.WaitLeader(t, 10*time.Second)
	keys := registerMany(t, c.Nodes, "RESUME", 9, shortLease(3))
	r := startRenewer(t, c.Nodes, keys, time.Second, 3)
	time.Sleep(2 * time.Second)
	r.pause(keys[:6]...)
	paused := time.Now()

	// Each change of the count, grouped into bursts: a window's evictions
	// may come as more than one change (leases renewed a few ms apart
	// expire in different passes), and a new burst starts one window after
	// the last one started, less 2 s for the polling and for applies slowed
	// by a busy machine. Capping each pass evicts again a second later,
	// inside one burst.
	type burst struct {
		start      time.Time
		from, left int
	}
	var bursts []burst
	last := 9
	for last > 3 && time.Since(paused) < 60*time.Second {
		if ls, ok := leases(t, leader); ok && ls.Instances != last {
			now := time.Now()
			if len(bursts) == 0 || now.Sub(bursts[len(bursts)-1].start) >= window-2*time.Second {
				bursts = append(bursts, burst{start: now, from: last})
			}
			bursts[len(bursts)-1].left = ls.Instances
			last = ls.Instances
			t.Logf("%5.1fs after the silence: %d listed", time.Since(paused).Seconds(), last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var left []int
	for i, b := range bursts {
		left = append(left, b.left)
		if capped := b.from - (b.from*85)/100; b.from-b.left > capped {
			t.Errorf("burst %d evicted %d of %d within one %v window, cap %d", i+1, b.from-b.left, b.from, window, capped)
		}
	}
	if want := []int{7, 5, 4, 3}; !slices.Equal(left, want) {
		t.Fatalf("left after each window: %v, want %v (the cap of 9, 7, 5 and 4, one a window)", left, want)
	}
}
