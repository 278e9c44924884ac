package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// visibleWithin registers one instance through writer and returns, per
// node, how long after the 204 the instance showed up in that node's
// GET /eureka/apps (polled every 5 ms, bounded by limit).
func visibleWithin(t *testing.T, nodes []*Node, writer *Node, id string, limit time.Duration) map[string]time.Duration {
	t.Helper()
	RegisterJSON(t, writer.BaseURL(), "STALE", id, nil)
	acked := time.Now()
	out := map[string]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, nd := range nodes {
		wg.Add(1)
		go func(nd *Node) {
			defer wg.Done()
			for time.Since(acked) < limit {
				if ok, err := present(nd, "STALE/"+id); err == nil && ok {
					mu.Lock()
					out[nd.ID] = time.Since(acked)
					mu.Unlock()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}(nd)
	}
	wg.Wait()
	return out
}

// TestCacheStalenessBound: with a 100 ms readOnly refresh interval a
// registration is visible in every node's cached reads within 300 ms; with
// the default 30 s interval within the interval plus one build.
func TestCacheStalenessBound(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		bound    time.Duration
		samples  int
	}{
		{"100ms", 100 * time.Millisecond, 300 * time.Millisecond, 5},
		{"default-30s", 30 * time.Second, 30*time.Second + 500*time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.interval != 30*time.Second {
				args = []string{"--response-cache-update-interval", tc.interval.String()}
			}
			c := StartCluster(t, 3, Options{ExtraArgs: args})
			c.WaitLeader(t, 10*time.Second)
			RegisterJSON(t, c.Nodes[0].BaseURL(), "STALE", "warm", nil)
			for _, nd := range c.Nodes { // warm every node's readOnly level
				WaitFor(t, tc.interval+5*time.Second, func() bool {
					ok, err := present(nd, "STALE/warm")
					return err == nil && ok
				}, "warm-up on "+nd.ID)
			}
			var worst time.Duration
			for i := 0; i < tc.samples; i++ {
				seen := visibleWithin(t, c.Nodes, c.Nodes[i%3], fmt.Sprint("i-", i), tc.bound+2*time.Second)
				for _, nd := range c.Nodes {
					d, ok := seen[nd.ID]
					if !ok {
						t.Fatalf("sample %d: not visible on %s within %s", i, nd.ID, tc.bound+2*time.Second)
					}
					worst = max(worst, d)
				}
			}
			t.Logf("interval %s: worst visibility %s over %d samples × 3 nodes (bound %s)", tc.interval, worst.Round(time.Millisecond), tc.samples, tc.bound)
			if worst > tc.bound {
				t.Fatalf("a change took %s to reach cached reads, bound %s", worst, tc.bound)
			}
		})
	}
}
