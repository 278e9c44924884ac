package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Remote regions (docs/regions.md) on 127.0.0.1: two heureka clusters,
// east and west, three nodes each, and a three-peer eureka-server ring,
// legacy. East copies west and legacy; its regions= reads merge them.

// regionLease keeps the test's instances registered for the whole test
// without heartbeats.
var regionLease = map[string]any{"leaseInfo": map[string]any{"renewalIntervalInSecs": 30, "durationInSecs": 900}}

// regionsRead is GET /eureka/apps (or /apps/delta) with ?regions=, JSON.
func regionsRead(base, path, regions string) (int, Apps, http.Header, error) {
	code, body, hdr, err := TryDo("GET", base+"/eureka/"+path+"?regions="+regions, nil, "Accept", "application/json")
	if err != nil || code != http.StatusOK {
		return code, Apps{}, hdr, err
	}
	a, err := ParseApps(body)
	return code, a, hdr, err
}

// hashOf is Eureka's reconcile hash of what a document lists.
func hashOf(a Apps) string {
	counts := map[string]int{}
	for _, in := range a.Instances {
		counts[in.Status]++
	}
	return statusHash(counts)
}

func serviceURLs(nodes []*Node) string {
	var urls []string
	for _, nd := range nodes {
		urls = append(urls, nd.BaseURL()+"/eureka/")
	}
	return strings.Join(urls, ",")
}

// missingKeys lists the keys of want that a lacks.
func missingKeys(a Apps, want []string) []string {
	have := a.ByKey()
	var out []string
	for _, k := range want {
		if _, ok := have[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

func TestRemoteRegions(t *testing.T) {
	rs := startRegions(t, "remote regions")
	east, west, legacyAddrs := rs.east, rs.west, rs.legacyAddrs

	RegisterJSON(t, west.Nodes[0].BaseURL(), "WONLY", "w-1", regionLease)
	RegisterJSON(t, west.Nodes[1].BaseURL(), "WONLY", "w-2", regionLease)
	RegisterJSON(t, west.Nodes[0].BaseURL(), "SHARED", "s-w", regionLease)
	RegisterJSON(t, east.Nodes[0].BaseURL(), "SHARED", "s-e", regionLease)
	RegisterJSON(t, east.Nodes[0].BaseURL(), "EONLY", "e-1", regionLease)
	RegisterJSON(t, "http://"+legacyAddrs[0], "LONLY", "l-1", regionLease)

	all := []string{"EONLY/e-1", "LONLY/l-1", "SHARED/s-e", "SHARED/s-w", "WONLY/w-1", "WONLY/w-2"}
	// Every east node serves the same merged registry, with the hash of
	// what it lists, and its plain /apps stays east's own.
	for _, nd := range east.Nodes {
		var got Apps
		WaitFor(t, 60*time.Second, func() bool {
			code, a, _, err := regionsRead(nd.BaseURL(), "apps", "west,legacy")
			got = a
			return err == nil && code == 200 && slices.Equal(appKeys(a), all)
		}, nd.ID+": regions=west,legacy lists every region's instances")
		if got.HashCode != hashOf(got) || got.VersionsDelta != "1" {
			t.Fatalf("%s: hash %q versions__delta %q, want %q and 1", nd.ID, got.HashCode, got.VersionsDelta, hashOf(got))
		}
		if keys := appKeys(GetApps(t, nd.BaseURL())); !slices.Equal(keys, []string{"EONLY/e-1", "SHARED/s-e"}) {
			t.Fatalf("%s: plain /apps lists %v, want east's own", nd.ID, keys)
		}
	}
	// The delta merges the regions' changes under the merged hash.
	code, delta, _, err := regionsRead(east.Nodes[1].BaseURL(), "apps/delta", "legacy,west")
	if err != nil || code != 200 {
		t.Fatalf("delta with regions: %d %v", code, err)
	}
	full := func() Apps {
		_, a, _, _ := regionsRead(east.Nodes[1].BaseURL(), "apps", "legacy,west")
		return a
	}()
	if delta.HashCode != full.HashCode || len(missingKeys(delta, all)) > 0 {
		t.Fatalf("delta with regions: hash %q (full %q), lists %v", delta.HashCode, full.HashCode, appKeys(delta))
	}
	// An application only west has falls back to west on /apps/{app}.
	if code, body, _ := Do(t, "GET", east.Nodes[2].BaseURL()+"/eureka/apps/WONLY", nil, "Accept", "application/json"); code != 200 || !strings.Contains(string(body), `"w-1"`) {
		t.Fatalf("GET /apps/WONLY on east: %d %s", code, body)
	}
	if code, _, _ := Do(t, "GET", east.Nodes[2].BaseURL()+"/eureka/apps/WONLY/w-2", nil, "Accept", "application/json"); code != 200 {
		t.Fatalf("GET /apps/WONLY/w-2 on east: %d", code)
	}

	// A change in west reaches east's regions=west reads: measured from the
	// write's acknowledgement to the east follower's blocking read.
	samples := regionChangeSamples(t, west.Nodes[0], east.Followers(east.WaitLeader(t, 10*time.Second))[0], "/eureka/apps?regions=west", 20)
	t.Logf("west change visible in east regions=west reads: %s", latencySummary(samples))

	// West entirely down: east keeps west's last copy, marked.
	for _, nd := range west.Nodes {
		nd.Stop()
	}
	westKeys := []string{"SHARED/s-w", "WONLY/w-1", "WONLY/w-2"}
	for _, nd := range east.Nodes {
		WaitFor(t, 30*time.Second, func() bool {
			code, a, hdr, err := regionsRead(nd.BaseURL(), "apps", "west")
			return err == nil && code == 200 && len(missingKeys(a, westKeys)) == 0 && hdr.Get("X-Heureka-Region-Stale") == "west"
		}, nd.ID+": west's last copy served, marked stale")
		st := nd.Status(t)
		if !st.Has("regions") {
			t.Fatalf("%s: /v1/status has no regions", nd.ID)
		}
	}

	// West back, with a change made before east reconnects: the copy
	// catches up, nothing lost and nothing resurrected.
	for _, nd := range west.Nodes {
		nd.Restart(t)
	}
	west.WaitLeader(t, 30*time.Second)
	if code, _, _ := Do(t, "DELETE", west.Nodes[0].BaseURL()+"/eureka/apps/WONLY/w-2", nil); code != 200 {
		t.Fatalf("cancel w-2 in west: %d", code)
	}
	RegisterJSON(t, west.Nodes[2].BaseURL(), "WONLY", "w-3", regionLease)
	westKeys = []string{"SHARED/s-w", "WONLY/w-1", "WONLY/w-3"}
	wantEast := []string{"EONLY/e-1", "SHARED/s-e", "SHARED/s-w", "WONLY/w-1", "WONLY/w-3"}
	for _, nd := range east.Nodes {
		WaitFor(t, 60*time.Second, func() bool {
			code, a, hdr, err := regionsRead(nd.BaseURL(), "apps", "west")
			return err == nil && code == 200 && slices.Equal(appKeys(a), wantEast) && hdr.Get("X-Heureka-Region-Stale") == ""
		}, nd.ID+": west's copy caught up after west came back")
	}

	// East killed entirely (SIGKILL) and restarted: while it comes back,
	// no regions=west answer misses a west instance or lists w-2 again.
	var bad []string
	var oks atomic.Int64
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, nd := range east.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				code, a, _, err := regionsRead(nd.BaseURL(), "apps", "west")
				if err != nil || code != 200 {
					continue // refused or down: the client keeps what it has
				}
				oks.Add(1)
				if miss := missingKeys(a, westKeys); len(miss) > 0 || a.ByKey()["WONLY/w-2"].ID != "" {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: %v (missing %v)", nd.ID, appKeys(a), miss))
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	for _, nd := range east.Nodes {
		nd.Kill()
	}
	before := oks.Load()
	for _, nd := range east.Nodes {
		if err := nd.Start(); err != nil {
			t.Fatalf("restart %s: %v", nd.ID, err)
		}
	}
	for _, nd := range east.Nodes {
		nd.waitReady(t)
	}
	east.WaitLeader(t, 30*time.Second)
	WaitFor(t, 30*time.Second, func() bool { return oks.Load() > before+30 }, "regions=west answers after the restart")
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d regions=west answers were partial or resurrected w-2 across the restart, first: %s", len(bad), bad[0])
	}

	// A change in legacy reaches east within its fetch interval.
	RegisterJSON(t, "http://"+legacyAddrs[1], "LONLY", "l-2", regionLease)
	WaitFor(t, 30*time.Second, func() bool {
		code, a, _, err := regionsRead(east.Nodes[0].BaseURL(), "apps", "legacy")
		return err == nil && code == 200 && len(missingKeys(a, []string{"LONLY/l-1", "LONLY/l-2"})) == 0
	}, "legacy's new instance in east's regions=legacy reads")
}

// regionChangeSamples flips the status of WONLY/w-1 in west n times and
// returns, for each, the time from the write's acknowledgement until a
// blocking read of path on reader (a regions=west document, or east's
// fallback document of WONLY) shows it.
func regionChangeSamples(t *testing.T, writer, reader *Node, path string, n int) []time.Duration {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var out []time.Duration
	status := []string{"OUT_OF_SERVICE", "UP"}
	for i := 0; i < n; i++ {
		want := status[i%2]
		_, _, hdr, err := TryDo("GET", reader.BaseURL()+path, nil, "Accept", "application/json")
		if err != nil {
			t.Fatal(err)
		}
		index := hdr.Get("X-Heureka-Index")
		code, _, _ := Do(t, "PUT", writer.BaseURL()+"/eureka/apps/WONLY/w-1/status?value="+want, nil)
		acked := time.Now()
		if code != 200 {
			t.Fatalf("status %s in west: %d", want, code)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, body, h, err := TryDo("GET", reader.BaseURL()+path+sep+"index="+index+"&wait=5s", nil, "Accept", "application/json")
			if err == nil && code == 200 {
				if w1Status(body) == want {
					out = append(out, time.Since(acked))
					break
				}
				index = h.Get("X-Heureka-Index")
			}
			if time.Now().After(deadline) {
				t.Fatalf("change %d (%s) not in east's %s reads after 10 s", i, want, path)
			}
		}
	}
	return out
}

// w1Status is the status of instance w-1 in a JSON document, found
// without decoding the whole document (a region of 10,000 instances would
// cost the reader more than the change takes to arrive).
func w1Status(body []byte) string {
	_, rest, ok := strings.Cut(string(body), `"instanceId":"w-1"`)
	if !ok {
		return ""
	}
	_, rest, ok = strings.Cut(rest, `"status":"`)
	if !ok {
		return ""
	}
	st, _, _ := strings.Cut(rest, `"`)
	return st
}

// latencySummary is p50, p99 and max of samples.
func latencySummary(samples []time.Duration) string {
	s := slices.Clone(samples)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(s), q(0.5).Round(time.Millisecond/10), q(0.99).Round(time.Millisecond/10), s[len(s)-1].Round(time.Millisecond/10))
}
