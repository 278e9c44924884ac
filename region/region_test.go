package region

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// fsmCluster applies region updates straight to an FSM.
type fsmCluster struct {
	mu      sync.Mutex
	f       *fsm.FSM
	idx     uint64
	entries int
	refuse  error
}

func (c *fsmCluster) ReadRegion(name string, fn func(fsm.RemoteRegion, bool)) {
	c.f.Read(func(r *fsm.Registry) { fn(r.RemoteRegion(name)) })
}

func (c *fsmCluster) ApplyRegion(_ context.Context, b *fsm.RegionUpdateBody) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse != nil {
		return c.refuse
	}
	e, err := fsm.Encode(fsm.CmdRegionUpdate|fsm.CmdIgnoreUnknown, b)
	if err != nil {
		return err
	}
	_ = fsm.Stamp(e, time.Now().UnixMilli())
	c.idx++
	c.entries++
	if res := c.f.Apply(&raft.Log{Index: c.idx, Type: raft.LogCommand, Data: e}); res != nil {
		return res.(error)
	}
	return nil
}

func (c *fsmCluster) copyOf(name string) (ids []string, st fsm.RegionStatus) {
	c.ReadRegion(name, func(rr fsm.RemoteRegion, ok bool) {
		if !ok {
			return
		}
		st = rr.Status
		rr.Copy.Range(func(e *fsm.Entry) { ids = append(ids, e.ID+":"+e.Instance.Status) })
	})
	sort.Strings(ids)
	return ids, st
}

// fakeEureka serves an eureka-server's /apps and /apps/delta in JSON.
type fakeEureka struct {
	mu sync.Mutex
	// instances are id -> status, all of application APP.
	instances map[string]string
	// delta lists "id:ACTION" items; hash overrides the delta's hash.
	delta []string
	hash  string
	down  bool
	full  int
	// noDelta answers the delta 403, as eureka-server with disable-delta.
	noDelta bool
}

func instanceJSON(id, status, action string) string {
	return fmt.Sprintf(`{"instanceId":%q,"hostName":"h-%s","app":"APP","ipAddr":"10.1.0.1","status":%q,"overriddenStatus":"UNKNOWN",`+
		`"port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},"countryId":1,`+
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
		`"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90,"registrationTimestamp":1,"lastRenewalTimestamp":1,"evictionTimestamp":0,"serviceUpTimestamp":1},`+
		`"vipAddress":"app","lastUpdatedTimestamp":"2","lastDirtyTimestamp":"2","actionType":%q}`, id, id, status, action)
}

func (e *fakeEureka) hashLocked() string {
	counts := map[string]int{}
	for _, s := range e.instances {
		counts[s]++
	}
	return fsm.HashCode(counts)
}

func (e *fakeEureka) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var items []string
	hash := e.hashLocked()
	switch r.URL.Path {
	case "/eureka/apps":
		e.full++
		for id, s := range e.instances {
			items = append(items, instanceJSON(id, s, "ADDED"))
		}
	case "/eureka/apps/delta":
		if e.noDelta {
			http.Error(w, "delta disabled", http.StatusForbidden)
			return
		}
		for _, d := range e.delta {
			id, action, _ := strings.Cut(d, ":")
			items = append(items, instanceJSON(id, e.instances[id], action))
		}
		if e.hash != "" {
			hash = e.hash
		}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"applications":{"versions__delta":"1","apps__hashcode":%q,"application":[{"name":"APP","instance":[%s]}]}}`,
		hash, strings.Join(items, ","))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The syncer of an eureka-server region: a full copy staged in chunks,
// deltas applied, a delta whose hash the copy does not reach taking a
// full copy again, an outage marked while the copy stays, and the first
// URL that answers used.
func TestSyncer_EurekaRegion(t *testing.T) {
	remote := &fakeEureka{instances: map[string]string{"a": "UP", "b": "UP", "c": "DOWN"}}
	ts := httptest.NewServer(remote)
	defer ts.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // a URL nobody answers, listed first

	c := &fsmCluster{f: fsm.New(0, nil)}
	cfg := Config{Remotes: []Remote{{Name: "legacy", URLs: []string{dead.URL + "/eureka/", ts.URL + "/eureka/"}}},
		FetchInterval: 50 * time.Millisecond, RetryDelay: 20 * time.Millisecond, Chunk: 2}
	s := New(cfg, c, nil)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { s.Run(stop); close(done) }()
	defer func() { close(stop); <-done }()

	waitFor(t, "the first copy", func() bool { ids, st := c.copyOf("legacy"); return len(ids) == 3 && st.Loaded && st.Reachable })
	if _, st := c.copyOf("legacy"); st.Kind != KindEureka || st.Source != ts.URL+"/eureka/" {
		t.Fatalf("status %+v, want an eureka region served by the second URL", st)
	}

	// A delta: b goes down, d is added, a is deleted.
	remote.mu.Lock()
	remote.instances["b"], remote.instances["d"] = "DOWN", "UP"
	delete(remote.instances, "a")
	remote.delta = []string{"b:MODIFIED", "d:ADDED", "a:DELETED"}
	fulls := remote.full
	remote.mu.Unlock()
	want := []string{"b:DOWN", "c:DOWN", "d:UP"}
	waitFor(t, "the delta applied", func() bool { ids, _ := c.copyOf("legacy"); return strings.Join(ids, " ") == strings.Join(want, " ") })
	remote.mu.Lock()
	if remote.full != fulls {
		t.Errorf("a delta that reaches the region's hash took a full fetch")
	}
	// The region changes without a delta saying so: the hash tells.
	remote.instances["e"] = "UP"
	remote.delta = nil
	remote.mu.Unlock()
	waitFor(t, "a reconcile after a hash mismatch", func() bool { ids, _ := c.copyOf("legacy"); return len(ids) == 4 })
	if s.Stats()["legacy"].Reconciles == 0 {
		t.Error("no reconcile counted")
	}
	// eureka-server's queue lists every change: an instance added and
	// cancelled between two fetches comes twice, and must not stay.
	remote.mu.Lock()
	remote.instances["f"] = "UP"
	remote.delta = []string{"f:ADDED", "f:DELETED"}
	remote.mu.Unlock()
	time.Sleep(200 * time.Millisecond) // a few fetch intervals
	remote.mu.Lock()
	delete(remote.instances, "f")
	remote.mu.Unlock()
	time.Sleep(200 * time.Millisecond)
	if ids, _ := c.copyOf("legacy"); len(ids) != 4 {
		t.Fatalf("after an add and a cancel in one delta: %v", ids)
	}

	// The region goes away: the copy stays, marked.
	remote.mu.Lock()
	remote.down = true
	remote.mu.Unlock()
	waitFor(t, "the outage marked", func() bool { _, st := c.copyOf("legacy"); return !st.Reachable && st.Error != "" })
	if ids, st := c.copyOf("legacy"); len(ids) != 4 || !st.Loaded {
		t.Fatalf("copy during the outage: %v %+v", ids, st)
	}
	remote.mu.Lock()
	remote.down = false
	remote.mu.Unlock()
	waitFor(t, "the region back", func() bool { _, st := c.copyOf("legacy"); return st.Reachable && st.Error == "" })
}

// A refused write (no quorum) leaves the copy as it was and is retried.
func TestSyncer_RefusedWriteRetried(t *testing.T) {
	remote := &fakeEureka{instances: map[string]string{"a": "UP"}}
	ts := httptest.NewServer(remote)
	defer ts.Close()
	c := &fsmCluster{f: fsm.New(0, nil), refuse: fmt.Errorf("no quorum")}
	s := New(Config{Remotes: []Remote{{Name: "w", URLs: []string{ts.URL + "/eureka/"}}}, FetchInterval: 50 * time.Millisecond,
		RetryDelay: 10 * time.Millisecond}, c, nil)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { s.Run(stop); close(done) }()
	defer func() { close(stop); <-done }()
	time.Sleep(100 * time.Millisecond)
	if ids, _ := c.copyOf("w"); len(ids) != 0 {
		t.Fatalf("a refused write left %v", ids)
	}
	c.mu.Lock()
	c.refuse = nil
	c.mu.Unlock()
	waitFor(t, "the copy after the log accepts writes again", func() bool { ids, _ := c.copyOf("w"); return len(ids) == 1 })
}

func TestParseRemote(t *testing.T) {
	r, err := ParseRemote("West=http://a:1/eureka,https://b:2/eureka/")
	if err != nil || r.Name != "west" || strings.Join(r.URLs, " ") != "http://a:1/eureka/ https://b:2/eureka/" {
		t.Fatalf("got %+v %v", r, err)
	}
	for _, bad := range []string{"", "west", "=http://a/", "west=", "west=ftp://a/", "we st=http://a/", "west=http://"} {
		if _, err := ParseRemote(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := ParseRemotes([]string{"w=http://a/", "W=http://b/"}); err == nil {
		t.Error("a region given twice parsed")
	}
}

// An eureka-server that refuses its delta is followed by full fetches,
// and is not marked unreachable for it.
func TestSyncer_EurekaRegionWithoutDelta(t *testing.T) {
	remote := &fakeEureka{instances: map[string]string{"a": "UP"}, noDelta: true}
	ts := httptest.NewServer(remote)
	defer ts.Close()
	c := &fsmCluster{f: fsm.New(0, nil)}
	s := New(Config{Remotes: []Remote{{Name: "legacy", URLs: []string{ts.URL + "/eureka/"}}},
		FetchInterval: 30 * time.Millisecond, RetryDelay: 10 * time.Millisecond}, c, nil)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { s.Run(stop); close(done) }()
	defer func() { close(stop); <-done }()
	waitFor(t, "the first copy", func() bool { ids, _ := c.copyOf("legacy"); return len(ids) == 1 })
	remote.mu.Lock()
	remote.instances["b"] = "DOWN"
	remote.mu.Unlock()
	waitFor(t, "a change taken by a full fetch", func() bool { ids, _ := c.copyOf("legacy"); return len(ids) == 2 })
	if _, st := c.copyOf("legacy"); !st.Reachable || s.Stats()["legacy"].Failures != 0 {
		t.Fatalf("status %+v, failures %d: a refused delta is not an outage", st, s.Stats()["legacy"].Failures)
	}
}
