package e2e

// Eviction at the deadline: with default flags (self-preservation
// off for the test) an instance with a 3 s lease that stops renewing is gone
// from another node's reads within 5 s of its last renewal: the leader
// evicts at the lease's deadline, not at the next 60 s scan, and the cached
// reads follow the commit (the readOnly cache refreshed on every commit; with
// only the 30 s timer refresh the second half of this test fails).

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestLeaseGoneWithinBoundDefaultFlags(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: []string{"--enable-self-preservation=false"}})
	leader := c.WaitLeader(t, 10*time.Second)
	keys := registerMany(t, c.Nodes, "DEADLINE", 5, shortLease(3))
	r := startRenewer(t, c.Nodes, keys, 500*time.Millisecond, 2)
	other := c.Followers(leader)[0]
	// Touch the cached documents first, as clients do, so that the check
	// below sees what the cache serves.
	for _, nd := range c.Nodes {
		WaitFor(t, 10*time.Second, func() bool {
			ok, err := present(nd, keys[2])
			return err == nil && ok
		}, keys[2]+" listed on "+nd.ID)
	}
	time.Sleep(2 * time.Second)
	victim := keys[2]
	r.pause(victim)
	lastAck := r.lastRenewal(victim)
	const bound = 5 * time.Second

	// The eviction itself: an uncached (linearizable) read on another node.
	id := victim[strings.Index(victim, "/")+1:]
	WaitFor(t, 2*bound, func() bool {
		code, body, _, err := TryDo("GET", other.URL("/eureka/apps/DEADLINE?consistency=linearizable"), nil, "Accept", "application/json")
		return err == nil && code == http.StatusOK && !strings.Contains(string(body), `"`+id+`"`)
	}, victim+" evicted (linearizable read on "+other.ID+")")
	evicted := time.Since(lastAck)
	t.Logf("evicted %v after the last renewal (linearizable read on %s)", evicted.Round(time.Millisecond), other.ID)
	if evicted > bound {
		t.Errorf("eviction took %v after the last renewal, bound %v", evicted, bound)
	}

	// What clients see: the cached GET /eureka/apps on another node.
	WaitFor(t, 40*time.Second, func() bool {
		ok, err := present(other, victim)
		return err == nil && !ok
	}, victim+" gone from the cached reads of "+other.ID)
	gone := time.Since(lastAck)
	t.Logf("gone from %s's cached reads %v after the last renewal", other.ID, gone.Round(time.Millisecond))
	if gone > bound {
		t.Errorf("cached reads on %s dropped the silent instance %v after its last renewal, bound %v", other.ID, gone, bound)
	}
}
