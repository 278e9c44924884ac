package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// A parked read that ends by its wait (or its client leaving) lets its
// document's watcher go once no read is left: documents named by clients
// that never change (an unknown application) would otherwise each keep a
// goroutine and an entry of the lot for good (the watcher deletes its
// entry as it returns).
func TestBlocking_ParkedReadsThatEndLeaveNoWatcher(t *testing.T) {
	ts, s := newPushServer(t)
	register(t, ts.URL, "A", "a-1")
	const n = 50
	done := make(chan struct{}, n)
	for i := range n {
		go func() {
			do(t, "GET", ts.URL+"/eureka/apps/NOPE"+strconv.Itoa(i)+"?index=0&wait=100ms", "", "")
			done <- struct{}{}
		}()
	}
	for range n {
		<-done
	}
	waitParked(t, s, 0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.lot.mu.Lock()
		keys := len(s.lot.keys)
		s.lot.mu.Unlock()
		if keys == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d documents still watched after every parked read ended", keys)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A wait shorter than the time it takes to park (a nanosecond) still ends
// the read: its timer starts once the read is in the lot.
func TestBlocking_TinyWaitStillEnds(t *testing.T) {
	ts, s := newPushServer(t)
	register(t, ts.URL, "A", "a-1")
	_, _, hdr := do(t, "GET", ts.URL+"/eureka/apps/A", "", "")
	at := hdr.Get(IndexHeader)
	client := &http.Client{Timeout: 3 * time.Second}
	for i := range 50 {
		resp, err := client.Get(ts.URL + "/eureka/apps/A?index=" + at + "&wait=1ns")
		if err != nil {
			t.Fatalf("read %d with wait=1ns did not end: %v (waiting: %d)", i, err, s.Waiting())
		}
		resp.Body.Close()
	}
}

// A parked read refused when the gate closes (cp mode) answers as serve
// refuses the same read: 503, no body, the reason in X-Heureka-Error.
func TestBlocking_ParkedRefusalIsAnsweredAsServeAnswersIt(t *testing.T) {
	g := &gateCluster{fakeCluster: &fakeCluster{fsm: fsm.New(0, nil)}, durable: fsm.New(0, nil)}
	g.ready.Store(true)
	g.once.Store(true)
	g.mode.Store("cp")
	ts, s := startTestServer(t, DefaultConfig(), g, nil)
	register(t, ts.URL, "A", "a-1")
	_, _, hdr := do(t, "GET", ts.URL+"/eureka/apps/A", "", "", "Accept", "application/json")
	got := async(t, ts.URL+"/eureka/apps/A?index="+hdr.Get(IndexHeader))
	waitParked(t, s, 1)
	g.ready.Store(false)
	register(t, ts.URL, "A", "a-2")
	a := <-got
	code, body, shdr := do(t, "GET", ts.URL+"/eureka/apps/A", "", "", "Accept", "application/json")
	if code != 503 || body != "" || shdr.Get("X-Heureka-Error") == "" {
		t.Fatalf("serve: %d %q X-Heureka-Error=%q", code, body, shdr.Get("X-Heureka-Error"))
	}
	if a.code != 503 || a.body != "" || a.hdr.Get("X-Heureka-Error") == "" {
		t.Fatalf("parked answer: %d body=%q X-Heureka-Error=%q; serve answers %d body=%q",
			a.code, a.body, a.hdr.Get("X-Heureka-Error"), code, body)
	}
}

// A blocking ?after= delta read outlasts the server's read and write
// timeouts, as every other blocking read does.
func TestRegions_DeltaAfterOutlastsServerTimeouts(t *testing.T) {
	_, ts := newShortTimeoutServer(t)
	register(t, ts.URL, "A", "a-1")
	got := getAlone(ts.URL + "/eureka/apps/delta?after=0&index=1&wait=2s")
	time.Sleep(500 * time.Millisecond) // past both timeouts
	register(t, ts.URL, "A", "a-2")
	if a := <-got; a.code != 200 || !strings.Contains(a.body, "<instanceId>a-2</instanceId>") {
		t.Fatalf("after the change: %d %q %v", a.code, a.body, a.hdr)
	}
}

// A ?after= delta read on a node whose gate is closed since it started is
// answered from the durable state, never from the partly replayed FSM.
func TestRegions_DeltaAfterNeverFromPartlyReplayedFSM(t *testing.T) {
	g := &gateCluster{fakeCluster: &fakeCluster{fsm: fsm.New(0, nil)}, durable: durableWithI1(t)}
	ts, _ := startTestServer(t, DefaultConfig(), g, nil)
	code, body, _ := do(t, "GET", ts.URL+"/eureka/apps/delta?consistency=stale", "", "", "Accept", "application/json")
	if code != 200 || !strings.Contains(body, `"i1"`) {
		t.Fatalf("stale delta: %d %s", code, body)
	}
	code, body, hdr := do(t, "GET", ts.URL+"/eureka/apps/delta?after=0&consistency=stale", "", "", "Accept", "application/json")
	if code != 200 || !strings.Contains(body, `"i1"`) {
		t.Fatalf("stale ?after= delta answered from the partly replayed FSM: %d stale=%q %s", code, hdr.Get("X-Heureka-Stale"), body)
	}
	g.lost.Store(true) // ap without quorum, as a region follower reads it
	code, body, hdr = do(t, "GET", ts.URL+"/eureka/apps/delta?after=0", "", "", "Accept", "application/json")
	if code != 200 || !strings.Contains(body, `"i1"`) {
		t.Fatalf("ap ?after= delta without quorum from the partly replayed FSM: %d stale=%q %s", code, hdr.Get("X-Heureka-Stale"), body)
	}
}

// A blocking read answered from the durable state keeps out of the cache,
// which must never be filled from a partly replayed FSM, and waits (a
// client repeating it is not answered at once every time).
func TestReadGate_BlockingStaleReadKeepsOutOfTheCacheAndWaits(t *testing.T) {
	g := &gateCluster{fakeCluster: &fakeCluster{fsm: fsm.New(0, nil)}, durable: fsm.New(0, nil)}
	ts, s := startTestServer(t, DefaultConfig(), g, nil)
	start := time.Now()
	code, _, _ := do(t, "GET", ts.URL+"/eureka/apps?consistency=stale&index=0&wait=300ms", "", "", "Accept", "application/json")
	if code != 200 {
		t.Fatalf("blocking stale read: %d", code)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("a blocking read of the durable state answered after %v, before its wait", took)
	}
	if st := s.CacheStats(); st.ReadWriteKeys != 0 || st.ReadOnlyKeys != 0 || st.Builds != 0 {
		t.Fatalf("the cache was used before the gate opened: %+v", st)
	}
}

// The compact and full documents share a URL: Vary names the header that
// picks between them, so a shared cache in front keeps them apart.
func TestServe_VaryNamesXEurekaAccept(t *testing.T) {
	ts, _ := newTestServer(t)
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-1"))
	_, compact, hdr := do(t, "GET", ts.URL+"/eureka/apps", "", "", "Accept", "application/json", "X-Eureka-Accept", "compact")
	_, full, _ := do(t, "GET", ts.URL+"/eureka/apps", "", "", "Accept", "application/json")
	if compact == full {
		t.Fatal("compact and full documents are the same")
	}
	if !strings.Contains(strings.ToLower(hdr.Get("Vary")), "x-eureka-accept") {
		t.Fatalf("Vary %q: the answer depends on X-Eureka-Accept", hdr.Get("Vary"))
	}
}

// The v1 rewrite of statuses leaves a metadata entry named status alone.
func TestEureka_V1RewriteLeavesMetadataAlone(t *testing.T) {
	ts, _ := newTestServer(t)
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-1"))
	if code, _, _ := do(t, "PUT", ts.URL+"/eureka/apps/svc/i-1/metadata?status=UNKNOWN&ipAddr=x", "", ""); code != 200 {
		t.Fatalf("metadata: %d", code)
	}
	_, v1, _ := do(t, "GET", ts.URL+"/eureka/v1/apps/svc", "", "")
	if !strings.Contains(v1, "</ipAddr><status>UNKNOWN</status>") {
		t.Fatalf("v1 xml rewrote the metadata entry status=UNKNOWN:\n%s", v1)
	}
	if strings.Count(v1, "<status>UP</status>") != 1 {
		t.Fatalf("v1 xml lost the instance's own status:\n%s", v1)
	}
}

// A path under an instance that names no subresource is no endpoint (404),
// whatever the method; 405 is for known paths asked with another method.
func TestEureka_UnknownInstanceSubresourceIs404(t *testing.T) {
	ts, _ := newTestServer(t)
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-1"))
	for _, m := range []string{"GET", "PUT", "POST"} {
		if code, body, _ := do(t, m, ts.URL+"/eureka/apps/svc/i-1/bogus", "", ""); code != 404 {
			t.Errorf("%s /apps/svc/i-1/bogus: %d %s", m, code, body)
		}
	}
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/apps/svc/i-1/status", "", ""); code != 405 {
		t.Errorf("GET of the status subresource: %d, want 405", code)
	}
}

// An instance's cache key keeps its application and id apart: with strict
// input off an application's name may hold a slash.
func TestServe_InstanceKeyKeepsAppAndIDApart(t *testing.T) {
	ts, _ := newTestServer(t) // StrictInput off
	body := strings.Replace(instanceJSON("A", "B/x"), `"hostName":"h-B/x"`, `"hostName":"h"`, 1)
	mustRegister(t, ts.URL, "A", body)
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/apps/A/B%2Fx", "", "", "Accept", "application/json"); code != 200 {
		t.Fatalf("GET /apps/A/B%%2Fx: %d", code)
	}
	if code, got, _ := do(t, "GET", ts.URL+"/eureka/apps/A%2FB/x", "", "", "Accept", "application/json"); code != 404 {
		t.Fatalf("GET /apps/A%%2FB/x (no application A/B): %d %s", code, got)
	}
}

// An instance read answered from the durable state (the gate closed since
// the node started) is not judged by the partly replayed FSM's leases,
// whose renewals may not be replayed yet: here every lease in the FSM
// looks an hour old.
func TestReadGate_InstanceFromTheDurableStateIgnoresTheFSMsLeases(t *testing.T) {
	g := &gateCluster{fakeCluster: &fakeCluster{fsm: durableWithI1(t)}, durable: durableWithI1(t)}
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return time.Now().Add(time.Hour) }
	ts, _ := startTestServer(t, cfg, g, nil)
	for _, path := range []string{"/eureka/apps/GATE/i1", "/eureka/instances/i1"} {
		code, body, hdr := do(t, "GET", ts.URL+path+"?consistency=stale", "", "", "Accept", "application/json")
		if code != 200 || !strings.Contains(body, `"i1"`) || hdr.Get("X-Heureka-Stale") != "true" {
			t.Errorf("GET %s from the durable state: %d %s", path, code, body)
		}
	}
	g.ready.Store(true)
	g.once.Store(true)
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/apps/GATE/i1", "", "", "Accept", "application/json"); code != 404 {
		t.Errorf("gate open, lease expired in the FSM: %d, want 404", code)
	}
}
