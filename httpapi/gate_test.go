package httpapi

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// gateCluster is a fakeCluster that has not caught up since it started:
// its FSM (what Read shows) is empty, its durable state is not.
type gateCluster struct {
	*fakeCluster
	ready, lost atomic.Bool
	// once: the gate opened before (the FSM is complete as of a loss of
	// touch); mode is the cluster's mode ("ap" unless set).
	once    atomic.Bool
	mode    atomic.Value
	durable *fsm.FSM
}

func (g *gateCluster) CaughtUpOnce() bool { return g.once.Load() }
func (g *gateCluster) Mode() string {
	if m, ok := g.mode.Load().(string); ok {
		return m
	}
	return "ap"
}

func (g *gateCluster) Ready() bool { return g.ready.Load() }
func (g *gateCluster) WaitReady(context.Context, time.Duration) bool {
	return g.ready.Load()
}
func (g *gateCluster) QuorumLost() bool { return g.lost.Load() }
func (g *gateCluster) HasQuorum() bool  { return !g.lost.Load() }
func (g *gateCluster) ReadDurable(fn func(*fsm.Registry)) {
	if g.once.Load() {
		g.Read(fn)
		return
	}
	g.durable.Read(fn)
}

// durableWithI1 is a durable state holding instance i1 of GATE.
func durableWithI1(t *testing.T) *fsm.FSM {
	t.Helper()
	durable := fsm.New(0, nil)
	entry, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: &fsm.Instance{
		InstanceID: "i1", HostName: "h1", App: "GATE", IPAddr: "10.0.0.1", Status: fsm.StatusUp, VIPAddress: "gate"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = fsm.Stamp(entry, time.Now().UnixMilli())
	durable.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: entry})
	return durable
}

func TestReadGate(t *testing.T) {
	durable := durableWithI1(t)
	g := &gateCluster{fakeCluster: &fakeCluster{fsm: fsm.New(0, nil)}, durable: durable}
	ts, s := startTestServer(t, DefaultConfig(), g, nil) // readOnly cache on, 30 s refresh

	// Closed: every registry read is a bodiless 503.
	for _, path := range []string{"/eureka/apps", "/eureka/apps/delta", "/eureka/apps/GATE", "/eureka/apps/GATE/i1",
		"/eureka/instances/i1", "/eureka/vips/gate", "/eureka/svips/gate"} {
		code, body, hdr := do(t, "GET", ts.URL+path, "", "", "Accept", "application/json")
		if code != http.StatusServiceUnavailable || body != "" || hdr.Get("Retry-After") == "" ||
			!strings.Contains(hdr.Get("X-Heureka-Error"), "catching up") {
			t.Errorf("GET %s with the gate closed: %d %q Retry-After=%q X-Heureka-Error=%q", path, code, body,
				hdr.Get("Retry-After"), hdr.Get("X-Heureka-Error"))
		}
	}
	if st := s.CacheStats(); st.ReadWriteKeys != 0 || st.ReadOnlyKeys != 0 || st.Builds != 0 {
		t.Fatalf("the cache was used before the gate opened: %+v", st)
	}

	// ?consistency=stale, or AP without quorum: the durable state, marked stale.
	code, body, hdr := do(t, "GET", ts.URL+"/eureka/apps?consistency=stale", "", "", "Accept", "application/json")
	if code != http.StatusOK || hdr.Get("X-Heureka-Stale") != "true" || !strings.Contains(body, `"i1"`) {
		t.Fatalf("stale read with the gate closed: %d stale=%q %s", code, hdr.Get("X-Heureka-Stale"), body)
	}
	g.lost.Store(true)
	code, body, hdr = do(t, "GET", ts.URL+"/eureka/apps/GATE", "", "", "Accept", "application/json")
	if code != http.StatusOK || hdr.Get("X-Heureka-Stale") != "true" || !strings.Contains(body, `"i1"`) {
		t.Fatalf("ap read without quorum, gate closed: %d stale=%q %s", code, hdr.Get("X-Heureka-Stale"), body)
	}
	if st := s.CacheStats(); st.ReadWriteKeys != 0 || st.ReadOnlyKeys != 0 {
		t.Fatalf("durable answers entered the cache: %+v", st)
	}

	// Open: reads follow the FSM through the cache.
	g.lost.Store(false)
	g.ready.Store(true)
	code, body, hdr = do(t, "GET", ts.URL+"/eureka/apps", "", "", "Accept", "application/json")
	if code != http.StatusOK || hdr.Get("X-Heureka-Stale") != "" || strings.Contains(body, `"i1"`) {
		t.Fatalf("read with the gate open: %d stale=%q %s", code, hdr.Get("X-Heureka-Stale"), body)
	}
	if st := s.CacheStats(); st.ReadOnlyKeys != 1 {
		t.Fatalf("read with the gate open did not go through the cache: %+v", st)
	}
}

// A node that lost touch with its leader after it had caught up: its FSM is
// complete as of the loss, but may be far behind the leader. Until it
// caught up again, an AP node answers from it marked stale and a CP node
// refuses; once it caught up, no document built while it was behind is
// served (the OnCatchUp hook resets the cache).
func TestReadGate_AfterLossOfTouch(t *testing.T) {
	reg := func(f *fsm.FSM, idx uint64, id string) {
		t.Helper()
		entry, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: &fsm.Instance{
			InstanceID: id, HostName: id, App: "GATE", IPAddr: "10.0.0.1", Status: fsm.StatusUp, VIPAddress: "gate"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = fsm.Stamp(entry, time.Now().UnixMilli())
		f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: entry})
	}
	g := &gateCluster{fakeCluster: &fakeCluster{fsm: fsm.New(0, nil)}, durable: fsm.New(0, nil)}
	reg(g.fsm, 1, "old")
	g.once.Store(true)
	ts, _ := startTestServer(t, DefaultConfig(), g, nil)

	// AP, gate closed after a loss: 200 from the FSM, marked stale, and the
	// documents then built are cached (built from the FSM, not the log).
	code, body, hdr := do(t, "GET", ts.URL+"/eureka/apps/GATE", "", "", "Accept", "application/json")
	if code != http.StatusOK || hdr.Get("X-Heureka-Stale") != "true" || !strings.Contains(body, `"old"`) {
		t.Fatalf("ap read after a loss of touch: %d stale=%q %s", code, hdr.Get("X-Heureka-Stale"), body)
	}
	// CP: refused as a node that is catching up.
	g.mode.Store("cp")
	code, _, hdr = do(t, "GET", ts.URL+"/eureka/apps/GATE", "", "", "Accept", "application/json")
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Fatalf("cp read after a loss of touch: %d Retry-After=%q", code, hdr.Get("Retry-After"))
	}
	if code, _, _ := do(t, "GET", ts.URL+"/eureka/apps/GATE?consistency=stale", "", "", "Accept", "application/json"); code != http.StatusOK {
		t.Fatalf("cp stale read after a loss of touch: %d", code)
	}
	g.mode.Store("ap")

	// The catch-up applies without change notices reaching the cache (the
	// worst case: a notice still in flight), then the gate opens.
	reg(g.fsm, 2, "new")
	g.mu.Lock()
	hooks := g.catchUp
	g.mu.Unlock()
	if len(hooks) == 0 {
		t.Fatal("the server registered no OnCatchUp hook")
	}
	for _, fn := range hooks {
		fn()
	}
	g.ready.Store(true)
	code, body, hdr = do(t, "GET", ts.URL+"/eureka/apps/GATE", "", "", "Accept", "application/json")
	if code != http.StatusOK || hdr.Get("X-Heureka-Stale") != "" || !strings.Contains(body, `"new"`) {
		t.Fatalf("first unmarked read after the catch-up: %d stale=%q %s", code, hdr.Get("X-Heureka-Stale"), body)
	}
}
