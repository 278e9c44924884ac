package cluster

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/store"
)

// An in-process test cluster: every node runs on Raft's in-memory transport
// and stores, and node-to-node HTTP calls (forwarded writes, renewal
// batches, read indexes) go through memNet, which hands each request to the
// target node's InternalHandler without a socket. Cutting a node off drops
// both its Raft links and its HTTP calls, in both directions. A node can be
// stopped and started again on its stores and journal (a crash), and its
// disk filled (its Raft log refuses writes). Raft runs on
// timings of a tenth of a second, so a cluster elects a leader in one or two
// tenths and a test takes well under a second.

// memNet routes node-to-node HTTP calls by host (a node's HTTP address).
type memNet struct {
	mu       sync.Mutex
	handlers map[string]http.Handler // by HTTP address
	cut      map[string]bool         // HTTP addresses of nodes cut off
	calls    map[string]int          // "from path" -> calls delivered
	// intercept, when set, may answer a call in place of its target.
	intercept func(from string, r *http.Request) *http.Response
}

// memRoundTripper is one node's client side of memNet.
type memRoundTripper struct {
	net  *memNet
	from string // the calling node's HTTP address
}

func (rt *memRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	m := rt.net
	m.mu.Lock()
	h, ok := m.handlers[r.URL.Host]
	down := m.cut[rt.from] || m.cut[r.URL.Host]
	intercept := m.intercept
	if ok && !down {
		m.calls[rt.from+" "+r.URL.Path]++
		if r.URL.RawQuery != "" {
			m.calls[rt.from+" "+r.URL.Path+"?"+r.URL.RawQuery]++
		}
	}
	m.mu.Unlock()
	if !ok || down {
		// What a dial to a node behind a partition looks like to the caller.
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	if intercept != nil {
		if resp := intercept(rt.from, r); resp != nil {
			return resp, nil
		}
	}
	// The caller gives up at its deadline, as over a socket, while the
	// target goes on with the call.
	done := make(chan *http.Response, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		resp := rec.Result()
		resp.Request = r
		done <- resp
	}()
	select {
	case resp := <-done:
		return resp, nil
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

// callCount is how many calls from the node at HTTP address from to path
// were delivered.
func (m *memNet) callCount(from, path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[from+" "+path]
}

// memNode is one node of a memCluster.
type memNode struct {
	*Node
	self  fsm.Member
	trans *raft.InmemTransport
	logs  *raft.InmemStore
	snaps raft.SnapshotStore
	// cfg and journalDir are what startNode starts the node with again.
	cfg        Config
	journalDir string
	// diskFull makes every write to the node's Raft log fail (fullDiskLogs).
	diskFull atomic.Bool
	// down is set while the node is stopped (stopNode).
	down bool
}

// errDiskFull is what a node's Raft log store answers while its disk is full.
var errDiskFull = fmt.Errorf("write raft log: %w", syscall.ENOSPC)

// fullDiskLogs is a node's Raft log store: the in-memory store, failing
// every write while the node's disk is full.
type fullDiskLogs struct {
	raft.LogStore
	full *atomic.Bool
}

func (l fullDiskLogs) StoreLog(log *raft.Log) error {
	if l.full.Load() {
		return errDiskFull
	}
	return l.LogStore.StoreLog(log)
}

func (l fullDiskLogs) StoreLogs(logs []*raft.Log) error {
	if l.full.Load() {
		return errDiskFull
	}
	return l.LogStore.StoreLogs(logs)
}

// memCluster is an in-process cluster of memNodes.
type memCluster struct {
	t     *testing.T
	net   *memNet
	nodes []*memNode
}

// fastConfig is testConfig on Raft timings of a tenth of a second: twice
// those of hashicorp/raft's own in-memory test clusters, which keeps
// leadership steady on a busy machine (a leader change mid-test drops the
// renewals its batcher held, by design).
func fastConfig(self fsm.Member, members []fsm.Member, mode string, hooks *testHooks) Config {
	cfg := testConfig(self, members, mode, hooks)
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	return cfg
}

// startMemCluster starts size nodes in mode and waits until each has
// recorded itself as a member (it does so as it sees the leader), so
// that no node journals its own record while a test cuts it off, and has
// caught up once; the test's internal calls are counted from then on.
// tune, when set, adjusts each node's config (hooks are kept: the memNet
// transport is added to them).
func startMemCluster(t *testing.T, size int, mode string, tune func(i int, cfg *Config)) *memCluster {
	t.Helper()
	c := startMemNodes(t, size, mode, tune)
	for _, mn := range c.nodes {
		select {
		case <-mn.selfRecorded:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not record itself as a member", mn.ID())
		}
	}
	c.waitMembersRecorded(2 * time.Second)
	// Until its gate first opens a node judges by a durable view built at
	// its first read, which may predate the test's writes: renewals and AP
	// writes would take the paths for a node that has not caught up.
	for _, mn := range c.nodes {
		c.waitFor(5*time.Second, mn.ID()+" caught up once", mn.CaughtUpOnce)
	}
	c.net.mu.Lock()
	clear(c.net.calls)
	c.net.mu.Unlock()
	return c
}

// startMemNodes starts size nodes in mode, as startMemCluster does, and
// leaves recording the members to the nodes.
func startMemNodes(t *testing.T, size int, mode string, tune func(i int, cfg *Config)) *memCluster {
	t.Helper()
	c := &memCluster{t: t, net: &memNet{handlers: map[string]http.Handler{}, cut: map[string]bool{}, calls: map[string]int{}}}
	members := make([]fsm.Member, size)
	for i := range members {
		// Addresses are names only: nothing listens on them, memNet and the
		// in-memory transports route by them.
		members[i] = fsm.Member{ID: fmt.Sprintf("m%d", i+1),
			RaftAddr: fmt.Sprintf("127.0.0.1:%d", 17001+i), HTTPAddr: fmt.Sprintf("127.0.0.1:%d", 18001+i), LogFormat: fsm.LogFormat}
	}
	for _, m := range members {
		c.nodes = append(c.nodes, &memNode{self: m, logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()})
	}
	t.Cleanup(c.stop)
	for i, mn := range c.nodes {
		cfg := fastConfig(mn.self, members, mode, &testHooks{})
		if tune != nil {
			tune(i, &cfg)
		}
		if f := cfg.hooks.logFormat; f != nil {
			mn.self.LogFormat = *f // a node of an older release
		}
		from := mn.self.HTTPAddr
		cfg.hooks.transport = func(http.RoundTripper) http.RoundTripper { return &memRoundTripper{net: c.net, from: from} }
		mn.cfg, mn.journalDir = cfg, t.TempDir()
		if err := c.startNode(mn); err != nil {
			t.Fatalf("start %s: %v", mn.self.ID, err)
		}
	}
	return c
}

// waitMembersRecorded waits until every node's FSM holds every node's
// member record as the node states it.
func (c *memCluster) waitMembersRecorded(within time.Duration) {
	c.t.Helper()
	for _, mn := range c.nodes {
		waitFor(c.t, within, "member records on "+mn.ID(), func() bool {
			all := true
			mn.fsm.Read(func(r *fsm.Registry) {
				for _, o := range c.nodes {
					if got, ok := r.Member(o.self.ID); !ok || got != o.self {
						all = false
					}
				}
			})
			return all
		})
	}
}

// startNode starts mn on its Raft stores (behind fullDiskLogs), its
// journal directory and its config: at the cluster's start, and again after
// stopNode, as a node restarted after a crash. Its new transport is linked
// to those of the nodes running, unless one of the two is cut off.
func (c *memCluster) startNode(mn *memNode) error {
	// An RPC to a peer that stopped reading waits out this timeout
	// (raft's default is half a second): keep it near the heartbeat.
	_, mn.trans = raft.NewInmemTransportWithTimeout(raft.ServerAddress(mn.self.RaftAddr), 100*time.Millisecond)
	c.net.mu.Lock()
	for _, o := range c.nodes {
		if o != mn && o.trans != nil && !o.down && !c.net.cut[o.self.HTTPAddr] && !c.net.cut[mn.self.HTTPAddr] {
			mn.trans.Connect(o.trans.LocalAddr(), o.trans)
			o.trans.Connect(mn.trans.LocalAddr(), mn.trans)
		}
	}
	c.net.mu.Unlock()
	// The disk watch sees the log's failures as a data directory's store
	// does (store.WatchLog), and its probe finds room once the disk is.
	full := &mn.diskFull
	disk := store.NewDiskWatchProbe(func() error {
		if full.Load() {
			return errDiskFull
		}
		return nil
	})
	deps := Deps{Transport: mn.trans, LogStore: store.WatchLog(fullDiskLogs{LogStore: mn.logs, full: full}, disk),
		StableStore: mn.logs, SnapshotStore: mn.snaps, JournalDir: mn.journalDir, Disk: disk}
	n, err := New(mn.cfg, deps, fsm.New(time.Minute, nil), nil)
	if err != nil {
		return err
	}
	mn.Node, mn.down = n, false
	c.net.mu.Lock()
	c.net.handlers[mn.self.HTTPAddr] = n.InternalHandler(nil)
	c.net.mu.Unlock()
	return nil
}

// stopNode stops mn as a crash would: its links go first (a peer still
// linked would wait out the transport's timeout on every RPC to it), then
// the node. Its Raft stores and journal stay, for startNode.
func (c *memCluster) stopNode(mn *memNode) {
	c.net.mu.Lock()
	delete(c.net.handlers, mn.self.HTTPAddr)
	c.net.mu.Unlock()
	for _, o := range c.nodes {
		if o != mn {
			o.trans.Disconnect(mn.trans.LocalAddr())
		}
	}
	mn.trans.DisconnectAll()
	mn.down = true
	_ = mn.Shutdown()
}

func (c *memCluster) stop() {
	// Cut every link first: a node still connected would wait out the
	// in-memory transport's timeout (half a second) on RPCs to a peer
	// already shut down.
	for _, mn := range c.nodes {
		c.net.mu.Lock()
		c.net.cut[mn.self.HTTPAddr] = true
		c.net.mu.Unlock()
		if mn.trans != nil {
			mn.trans.DisconnectAll()
		}
	}
	var wg sync.WaitGroup
	for _, mn := range c.nodes {
		wg.Go(func() {
			if mn.Node != nil {
				_ = mn.Shutdown()
			}
			if mn.trans != nil {
				_ = mn.trans.Close()
			}
		})
	}
	wg.Wait()
}

// leader waits for a leader every node that is not cut off agrees on.
func (c *memCluster) leader() *memNode {
	c.t.Helper()
	var leader *memNode
	waitFor(c.t, 2*time.Second, "a leader", func() bool {
		leader = nil
		for _, mn := range c.nodes {
			if mn.Node != nil && mn.IsLeader() {
				leader = mn
			}
		}
		if leader == nil {
			return false
		}
		for _, mn := range c.nodes {
			if !c.isCut(mn) && mn.LeaderID() != leader.ID() {
				return false
			}
		}
		return true
	})
	return leader
}

// followers are the nodes that do not lead.
func (c *memCluster) followers() []*memNode {
	var out []*memNode
	for _, mn := range c.nodes {
		if !mn.IsLeader() {
			out = append(out, mn)
		}
	}
	return out
}

func (c *memCluster) isCut(mn *memNode) bool {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	return c.net.cut[mn.self.HTTPAddr]
}

// cutOff partitions mn from every other node: Raft and HTTP.
func (c *memCluster) cutOff(mn *memNode) {
	c.net.mu.Lock()
	c.net.cut[mn.self.HTTPAddr] = true
	c.net.mu.Unlock()
	for _, o := range c.nodes {
		if o != mn {
			mn.trans.Disconnect(o.trans.LocalAddr())
			o.trans.Disconnect(mn.trans.LocalAddr())
		}
	}
}

// heal connects mn to every other node running and not cut off itself
// (a node stopped is linked when it starts, one cut off when it heals).
func (c *memCluster) heal(mn *memNode) {
	c.net.mu.Lock()
	delete(c.net.cut, mn.self.HTTPAddr)
	cut := maps.Clone(c.net.cut)
	c.net.mu.Unlock()
	if mn.down {
		return
	}
	for _, o := range c.nodes {
		if o != mn && !o.down && !cut[o.self.HTTPAddr] {
			mn.trans.Connect(o.trans.LocalAddr(), o.trans)
			o.trans.Connect(mn.trans.LocalAddr(), mn.trans)
		}
	}
}

// loseQuorum cuts mn off and waits until it counts its quorum as lost.
// A node rides out a missing leader for a second before it declares quorum
// lost (quorumWait); the test moves the moment it last had quorum back
// instead of sleeping through that second.
func (c *memCluster) loseQuorum(mn *memNode) {
	c.t.Helper()
	c.cutOff(mn)
	c.expireQuorum(mn)
	if !mn.QuorumLost() {
		c.t.Fatalf("%s does not count its quorum as lost", mn.ID())
	}
}

// expireQuorum waits until mn, cut off, hears from no leader, and moves the
// moment it last had quorum a minute back, so that it counts its quorum as
// lost without riding out quorumWait first.
func (c *memCluster) expireQuorum(mn *memNode) {
	c.t.Helper()
	waitFor(c.t, 2*time.Second, mn.ID()+" out of touch with the leader", func() bool { return !mn.HasQuorum() })
	mn.fb.lastQuorum.Store(time.Now().Add(-time.Minute).UnixNano())
}

// waitFor is waitFor with the cluster's Raft state in the failure message,
// which tells a leader change mid-test from a bug.
func (c *memCluster) waitFor(d time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			state := ""
			for _, mn := range c.nodes {
				state += fmt.Sprintf(" %s:%s/term %d/leader %q", mn.ID(), mn.raft.State(), mn.raft.CurrentTerm(), mn.LeaderID())
			}
			c.t.Fatalf("timed out after %v waiting for %s; raft:%s", d, what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startCutOff starts a 3-node cluster and cuts a follower off until it
// counts its quorum as lost; it returns the cluster and that node.
func startCutOff(t *testing.T, mode string, tune func(i int, cfg *Config)) (*memCluster, *memNode) {
	t.Helper()
	c := startMemCluster(t, 3, mode, tune)
	c.leader()
	f := c.followers()[0]
	c.loseQuorum(f)
	return c, f
}

// mustApply applies entries on mn in order.
func mustApply(t *testing.T, mn *memNode, entries ...[]byte) {
	t.Helper()
	for i, e := range entries {
		if _, err := mn.Apply(t.Context(), e); err != nil {
			t.Fatalf("write %d of %d on %s: %v", i+1, len(entries), mn.ID(), err)
		}
	}
}

// committed returns, in log order, the commands on app's instances in mn's
// Raft log ("register ID", "cancel ID", ...).
func (mn *memNode) committed(t *testing.T, app string) []string {
	t.Helper()
	first, _ := mn.logs.FirstIndex()
	last, _ := mn.logs.LastIndex()
	var out []string
	for i := max(first, 1); i <= last; i++ {
		var l raft.Log
		if err := mn.logs.GetLog(i, &l); err != nil || l.Type != raft.LogCommand {
			continue
		}
		cmds, err := fsm.DecodeEntry(l.Data) // a packed entry's writes, in order
		if err != nil {
			continue
		}
		for _, cmd := range cmds {
			switch body := cmd.Body.(type) {
			case *fsm.RegisterBody:
				if body.Instance.App == app {
					out = append(out, cmd.Type.String()+" "+body.Instance.InstanceID)
				}
			case *fsm.KeyBody:
				if body.App == app {
					out = append(out, cmd.Type.String()+" "+body.ID)
				}
			}
		}
	}
	return out
}
