package e2e

// Zones inside a region as Spring Cloud uses them (docs/regions.md, "Zones
// inside a region"). One 3-node cluster; the Spring client of
// e2e/springclient is given its nodes in two zones of region east, n1 and
// n2 in zone-a (its own, the first listed) and n3 in zone-b, each through a
// recording proxy (wireTap), so that what reached which node is counted
// outside the client:
//
//   - its registration, heartbeats and registry fetches reach zone-a's
//     nodes only (the proxies' counts, and each node's
//     heureka_http_requests_total for the renew route);
//   - with zone-a's proxies closed it fails over to zone-b: its heartbeats
//     and fetches reach n3, it keeps the registry it holds, stays
//     registered and sees changes made meanwhile;
//   - Spring Cloud LoadBalancer with the zone-preference configuration
//     calls the instance of a callee in its zone (metadata zone=zone-a)
//     only, and the one in zone-b once zone-a's is cancelled.

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// zonesSpringApp is the Spring client's application name and instance id.
const zonesSpringApp, zonesSpringID = "SPRINGCLIENT", "spring-zones"

func TestSpringZones(t *testing.T) {
	skipShort(t)
	java, jar, err := javaTools()
	ToolOrSkip(t, "Spring Cloud zones", err)
	start := time.Now()
	c := StartCluster(t, 3, Options{ExtraArgs: edCacheArgs})
	c.WaitLeader(t, 15*time.Second)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	zoneA, zoneB := []*Node{n1, n2}, []*Node{n3}
	tap := startWireTap(t, c.Nodes)
	urls := func(nodes []*Node) string {
		var out []string
		for _, nd := range nodes {
			out = append(out, tap.URL(nd, "/eureka/"))
		}
		return strings.Join(out, ",")
	}

	// CALLEE: two real HTTP servers, one per zone, registered directly
	// (not through the proxies) with their zone in their metadata.
	calleeA, calleeB := startAnswerServer(t, "CALLEE", "callee-a"), startAnswerServer(t, "CALLEE", "callee-b")
	for _, x := range []struct {
		a    *answerServer
		zone string
		nd   *Node
	}{{calleeA, "zone-a", n1}, {calleeB, "zone-b", n3}} {
		reg := x.a.registration()
		reg["metadata"] = map[string]any{"zone": x.zone}
		RegisterJSON(t, x.nd.BaseURL(), x.a.app, x.a.id, reg)
	}

	spring := startSpringApp(t, "springclient-zones", java, jar,
		"--eureka.instance.instance-id="+zonesSpringID,
		"--eureka.instance.metadata-map.zone=zone-a",
		"--eureka.client.region=east",
		"--eureka.client.availability-zones.east=zone-a,zone-b",
		"--eureka.client.service-url.zone-a="+urls(zoneA),
		"--eureka.client.service-url.zone-b="+urls(zoneB),
		"--eureka.client.prefer-same-zone-eureka=true",
		"--spring.cloud.loadbalancer.configurations=zone-preference",
		// LoadBalancer caches each service's instance list 35 s by
		// default; the cancel below is to show within seconds.
		"--spring.cloud.loadbalancer.cache.ttl=1s")
	sbase, state, failf := spring.base, spring.state, spring.failf
	held := []string{"CALLEE/callee-a", "CALLEE/callee-b", zonesSpringApp + "/" + zonesSpringID}
	holds := func(s springState, keys []string) bool {
		for _, k := range keys {
			app, id, _ := strings.Cut(k, "/")
			if s.Statuses[app][id] != "UP" {
				return false
			}
		}
		return true
	}

	// (a) It registers, heartbeats and fetches through zone-a's nodes only.
	if !Eventually(2*clientTimeout, func() bool {
		for _, nd := range c.Nodes {
			if instanceStatus(nd.BaseURL(), zonesSpringApp, zonesSpringID) != "UP" {
				return false
			}
		}
		return holds(state(), held)
	}) {
		failf("the Spring client did not register UP on every node and see CALLEE (running %v)", spring.Running())
	}
	t.Logf("Spring client registered and holds %v %.1fs after the cluster was up", held, time.Since(start).Seconds())
	sumA := func(cnt wireCounts, k wireKind) int { return cnt.answered[n1.ID][k] + cnt.answered[n2.ID][k] }
	if !Eventually(clientTimeout, func() bool {
		cnt := tap.counts("spring")
		return sumA(cnt, wireHeartbeat) >= 3 && sumA(cnt, wireDelta) >= 3
	}) {
		failf("no three heartbeats and deltas through zone-a's nodes: %v", tap.counts("spring").all)
	}
	cnt := tap.counts("spring")
	t.Logf("(a) the Spring client's requests by node (zone-a: %s, %s; zone-b: %s): %v", n1.ID, n2.ID, n3.ID, cnt.all)
	if n := cnt.total(n3.ID); n != 0 {
		failf("(a) %d requests of the client reached %s, in zone-b, while zone-a answers: %v", n, n3.ID, cnt.all[n3.ID])
	}
	if sumA(cnt, wireRegister) < 1 || sumA(cnt, wireFull) < 1 {
		failf("(a) no registration or full fetch answered through zone-a's nodes: %v", cnt.answered)
	}
	// The nodes count the same: heartbeats are answered by zone-a's nodes
	// only (the test itself sends none).
	renewA, renewB := renewCount(n1)+renewCount(n2), renewCount(n3)
	t.Logf("(a) heureka_http_requests_total{route=\"eureka_renew\"}: zone-a nodes %.0f, %s %.0f", renewA, n3.ID, renewB)
	if renewA < 3 || renewB != 0 {
		failf("(a) the nodes' renew counters: zone-a %.0f, zone-b %.0f; want zone-a only", renewA, renewB)
	}

	// (b) zone-a's proxies close: the client fails over to zone-b. It
	// keeps its registry throughout, its heartbeats and fetches reach n3,
	// and it stays registered.
	for _, nd := range zoneA {
		tap.close(nd)
	}
	closed := time.Now()
	before := cnt.answered[n3.ID]
	if !Eventually(clientTimeout, func() bool {
		s := state()
		if !holds(s, held) {
			failf("(b) during the fail-over the client no longer holds %v", held)
		}
		now := tap.counts("spring").answered[n3.ID]
		return now[wireHeartbeat]-before[wireHeartbeat] >= 3 && now[wireDelta]-before[wireDelta] >= 3
	}) {
		failf("(b) with zone-a's proxies closed, no three heartbeats and deltas reached %s: %v", n3.ID, tap.counts("spring").all)
	}
	t.Logf("(b) zone-a's proxies closed: heartbeats and deltas answered through %s %.1fs later: %v",
		n3.ID, time.Since(closed).Seconds(), tap.counts("spring").answered[n3.ID])
	waitHeartbeats(t, c, zonesSpringApp, zonesSpringID)
	// A change made on a zone-a node (behind its closed proxy) reaches the
	// client through n3.
	late := startAnswerServer(t, "LATE", "late-1")
	RegisterJSON(t, n1.BaseURL(), late.app, late.id, late.registration())
	held = append(held, "LATE/late-1")
	if !Eventually(clientTimeout, func() bool { return holds(state(), held) }) {
		failf("(b) LATE/late-1, registered on %s, did not reach the client through %s", n1.ID, n3.ID)
	}
	for _, nd := range c.Nodes {
		if s := instanceStatus(nd.BaseURL(), zonesSpringApp, zonesSpringID); s != "UP" {
			failf("(b) after the fail-over the client is %q on %s, want UP", s, nd.ID)
		}
	}
	if r := renewCount(n3); r < 3 {
		failf("(b) %s answered %.0f heartbeats after the fail-over", n3.ID, r)
	}
	t.Logf("(b) the client holds %v, is UP on every node, %s answered %.0f heartbeats (client: %d fetch errors logged)",
		held, n3.ID, renewCount(n3), state().FetchErrors)

	// (c) LoadBalancer prefers CALLEE's instance in its zone, zone-a.
	calls := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			a, err := lbCall(sbase, "callee")
			if err != nil {
				a = err.Error()
			}
			got[a]++
		}
		return got
	}
	if !Eventually(clientTimeout, func() bool { _, err = lbCall(sbase, "callee"); return err == nil }) {
		failf("(c) calling callee through LoadBalancer: %v", err)
	}
	if got := calls(20); got["CALLEE callee-a"] != 20 || calleeB.answers.Load() != 0 {
		failf("(c) 20 calls to callee answered %v (callee-b answered %d in all); want callee-a, in zone-a, only", got, calleeB.answers.Load())
	}
	t.Logf("(c) callee through LoadBalancer with zone-preference: 20 of 20 calls to callee-a (zone-a); callee-b (zone-b) answered %d", calleeB.answers.Load())
	// Once callee-a is cancelled, the instance in zone-b answers.
	if code, body, _ := Do(t, http.MethodDelete, n1.URL("/eureka/apps/CALLEE/callee-a"), nil); code != http.StatusOK {
		t.Fatalf("cancel CALLEE/callee-a: %d %s", code, body)
	}
	cancelled := time.Now()
	if !Eventually(clientTimeout, func() bool { a, err := lbCall(sbase, "callee"); return err == nil && a == "CALLEE callee-b" }) {
		failf("(c) with callee-a cancelled, calls to callee never reached callee-b: %v", calls(5))
	}
	t.Logf("(c) callee-a cancelled: calls reach callee-b %.1fs later", time.Since(cancelled).Seconds())
	answersA := calleeA.answers.Load()
	if got := calls(20); got["CALLEE callee-b"] != 20 || calleeA.answers.Load() != answersA {
		failf("(c) with callee-a cancelled, 20 calls answered %v; want callee-b only", got)
	}
	t.Logf("TestSpringZones took %.1fs", time.Since(start).Seconds())
}
