package e2e

// The readiness gate: after a restart a node never answers a
// registry read with less than it held. Each test registers rsInstances
// instances, restarts nodes with kill -9, and polls every restarted node
// every 20 ms from its first answer: a 200 must hold every instance (a 503
// is the allowed "not yet"), and a stale-marked 200 too.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

const (
	rsInstances = 1000
	rsApps      = 10
	rsPoll      = 20 * time.Millisecond
	rsServeWait = 30 * time.Second // bound for a restarted node to serve again
)

// rsRegs are the instances every restart test holds: long leases, so that
// nothing expires while the test runs.
func rsRegs() []reg {
	regs := make([]reg, 0, rsInstances)
	lease := map[string]any{"renewalIntervalInSecs": 30, "durationInSecs": 900}
	for i := range rsInstances {
		app := fmt.Sprintf("RS%02d", i%rsApps)
		regs = append(regs, reg{app: app, id: fmt.Sprintf("rs-%04d", i), extra: map[string]any{"leaseInfo": lease}})
	}
	return regs
}

// rsCount counts the instances of a JSON applications document.
func rsCount(body []byte) int { return bytes.Count(body, []byte(`"instanceId"`)) }

// rsWaitHeld waits until nd holds every instance, asking with a
// linearizable read so that no partly replicated document gets cached.
func rsWaitHeld(t *testing.T, nd *Node) {
	t.Helper()
	WaitFor(t, rsServeWait, func() bool {
		code, body, _, err := TryDo("GET", nd.URL("/eureka/apps?consistency=linearizable"), nil, "Accept", "application/json")
		return err == nil && code == http.StatusOK && rsCount(body) == rsInstances
	}, nd.ID+" holding every instance")
}

// rsPoller polls one node's GET /eureka/apps every 20 ms and records what it
// answered.
type rsPoller struct {
	nd   *Node
	want int

	mu                   sync.Mutex
	ok, stale, refused   int
	partial              []string // 200s with fewer instances than want
	other                map[int]int
	first, firstFull     time.Time
	lastRefused, started time.Time
}

func rsPoll1(nd *Node, want int) *rsPoller {
	return &rsPoller{nd: nd, want: want, other: map[int]int{}, started: time.Now()}
}

// run polls every rsPoll until stop closes.
func (p *rsPoller) run(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	tick.Every(stop, rsPoll, p.poll)
}

// poll reads the node's registry once and counts the answer.
func (p *rsPoller) poll() {
	code, body, hdr, err := TryDo("GET", p.nd.URL("/eureka/apps"), nil, "Accept", "application/json")
	if err != nil {
		return // not listening yet (or just killed)
	}
	now := time.Now()
	p.mu.Lock()
	if p.first.IsZero() {
		p.first = now
	}
	switch code {
	case http.StatusOK:
		p.ok++
		n := rsCount(body)
		stale := hdr.Get("X-Heureka-Stale") == "true"
		if stale {
			p.stale++
		}
		if n < p.want {
			p.partial = append(p.partial, fmt.Sprintf("%s +%v: 200 with %d of %d instances (stale=%v, hash %q)",
				p.nd.ID, now.Sub(p.started).Round(time.Millisecond), n, p.want, stale, rsHash(body)))
		} else if p.firstFull.IsZero() {
			p.firstFull = now
		}
	case http.StatusServiceUnavailable:
		p.refused++
		p.lastRefused = now
		if len(body) != 0 {
			p.partial = append(p.partial, fmt.Sprintf("%s: 503 with a body %.100q (fargo would decode it)", p.nd.ID, body))
		}
	default:
		p.other[code]++
	}
	p.mu.Unlock()
}

func rsHash(body []byte) string {
	i := bytes.Index(body, []byte(`"apps__hashcode":"`))
	if i < 0 {
		return ""
	}
	rest := body[i+len(`"apps__hashcode":"`):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}

// check fails the test on any partial answer and logs the counts.
func (p *rsPoller) check(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("%s: %d answers 200 (%d stale), %d refused with 503, other %v; full answer %v after the first answer",
		p.nd.ID, p.ok, p.stale, p.refused, p.other, p.firstFull.Sub(p.first).Round(time.Millisecond))
	if len(p.partial) > 0 {
		t.Errorf("%s answered with less than it held %d times; first: %v", p.nd.ID, len(p.partial), head(p.partial, 5))
	}
	if len(p.other) > 0 {
		t.Errorf("%s answered unexpected statuses %v", p.nd.ID, p.other)
	}
}

// rsWaitServing waits until nd answers a plain (cached) read with every
// instance and without the stale mark.
func rsWaitServing(t *testing.T, nd *Node) { rsWaitServingN(t, nd, rsInstances) }

func rsWaitServingN(t *testing.T, nd *Node, want int) {
	t.Helper()
	WaitFor(t, rsServeWait, func() bool {
		code, body, hdr, err := TryDo("GET", nd.URL("/eureka/apps"), nil, "Accept", "application/json")
		return err == nil && code == http.StatusOK && rsCount(body) == want && hdr.Get("X-Heureka-Stale") == ""
	}, nd.ID+" serving every instance again")
}

// rsStart starts a killed node again without waiting for it: the pollers
// see its very first answer.
func rsStart(t *testing.T, nd *Node) {
	t.Helper()
	if err := nd.Start(); err != nil {
		t.Fatalf("restart %s: %v", nd.ID, err)
	}
}

// TestRestartSingleNodeNeverPartial: a single node with 1,000 instances,
// killed and restarted, never answers 200 with fewer (default flags: the
// readOnly cache refreshes every 30 s, so an early partial answer would
// stay visible).
func TestRestartSingleNodeNeverPartial(t *testing.T) {
	c := StartCluster(t, 1, Options{})
	nd := c.WaitLeader(t, 10*time.Second)
	registerAll(t, nd.BaseURL(), rsRegs(), 16)
	rsWaitHeld(t, nd)
	for round := 1; round <= 2; round++ {
		nd.Kill()
		ps, stop := rsPollAll([]*Node{nd})
		rsStart(t, nd)
		rsWaitServing(t, nd)
		time.Sleep(time.Second) // keep polling a while after it serves
		stop()
		t.Logf("round %d", round)
		ps[0].check(t)
		var st struct {
			Ready    bool   `json:"ready"`
			ReadGate string `json:"read_gate"`
		}
		statusField(t, nd, "ready", &st.Ready)
		statusField(t, nd, "read_gate", &st.ReadGate)
		if !st.Ready || st.ReadGate != "open" {
			t.Fatalf("status after serving: ready=%v read_gate=%q, want true and open", st.Ready, st.ReadGate)
		}
	}
}

// rsCluster starts 3 nodes with 1,000 instances that every node holds.
func rsCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	c := StartCluster(t, 3, opts)
	leader := c.WaitLeader(t, 15*time.Second)
	registerAll(t, leader.BaseURL(), rsRegs(), 16)
	for _, nd := range c.Nodes {
		rsWaitHeld(t, nd)
	}
	return c
}

// rsPollAll starts a poller per node.
func rsPollAll(nodes []*Node) ([]*rsPoller, func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ps []*rsPoller
	for _, nd := range nodes {
		p := rsPoll1(nd, rsInstances)
		ps = append(ps, p)
		wg.Add(1)
		go p.run(stop, &wg)
	}
	return ps, func() { close(stop); wg.Wait() }
}

// TestRestartWholeClusterNeverPartial kills all three nodes and restarts
// them in random order, a random moment apart.
func TestRestartWholeClusterNeverPartial(t *testing.T) {
	c := rsCluster(t, Options{})
	for _, nd := range c.Nodes {
		nd.Kill()
	}
	ps, stop := rsPollAll(c.Nodes)
	order := rand.Perm(len(c.Nodes))
	for _, i := range order {
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
		rsStart(t, c.Nodes[i])
	}
	for _, nd := range c.Nodes {
		rsWaitServing(t, nd)
	}
	time.Sleep(time.Second)
	stop()
	t.Logf("restart order: %v", order)
	for _, p := range ps {
		p.check(t)
	}
}

// TestRestartRollingNeverPartial restarts one node at a time, each once it
// serves again, while every node is polled.
func TestRestartRollingNeverPartial(t *testing.T) {
	c := rsCluster(t, Options{})
	ps, stop := rsPollAll(c.Nodes)
	for _, nd := range c.Nodes {
		nd.Kill()
		time.Sleep(200 * time.Millisecond)
		rsStart(t, nd)
		rsWaitServing(t, nd)
	}
	time.Sleep(time.Second)
	stop()
	for _, p := range ps {
		p.check(t)
	}
}

// TestRestartPartitionedAP restarts a node while it is cut off from the
// other two, in AP mode: it serves its durable state marked stale (every
// instance, never a partial registry), and after healing it serves
// unmarked reads again.
func TestRestartPartitionedAP(t *testing.T) {
	c, proxy := startProxied(t, "ap")
	leader := c.WaitLeader(t, 15*time.Second)
	registerAll(t, leader.BaseURL(), rsRegs(), 16)
	for _, nd := range c.Nodes {
		rsWaitHeld(t, nd)
	}
	isolated := c.Followers(leader)[0]
	proxy.Isolate(isolated.ID)
	isolated.Kill()
	ps, stop := rsPollAll([]*Node{isolated})
	rsStart(t, isolated)
	WaitFor(t, rsServeWait, func() bool {
		code, body, hdr, err := TryDo("GET", isolated.URL("/eureka/apps"), nil, "Accept", "application/json")
		return err == nil && code == http.StatusOK && hdr.Get("X-Heureka-Stale") == "true" && rsCount(body) == rsInstances
	}, isolated.ID+" serving its durable state, stale-marked, while cut off")
	var gate string
	statusField(t, isolated, "read_gate", &gate)
	if gate != "durable_stale" {
		t.Errorf("%s read_gate = %q while cut off, want durable_stale", isolated.ID, gate)
	}
	// The delta and one application come from the same durable state.
	code, body, hdr := Do(t, "GET", isolated.URL("/eureka/apps/RS03"), nil, "Accept", "application/json")
	if code != http.StatusOK || hdr.Get("X-Heureka-Stale") != "true" || rsCount(body) != rsInstances/rsApps {
		t.Errorf("GET /eureka/apps/RS03 while cut off: %d stale=%q with %d instances", code, hdr.Get("X-Heureka-Stale"), rsCount(body))
	}
	proxy.Heal()
	rsWaitServing(t, isolated)
	time.Sleep(time.Second)
	stop()
	ps[0].check(t)
}
