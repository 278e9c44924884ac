package cluster

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// restartAlone stops the whole cluster and starts mn again on its Raft
// stores, with none of its peers: a node restarted while cut off, whose FSM
// holds only its latest snapshot. It waits until the node counts its quorum
// as lost (moving the moment it last had quorum back, as loseQuorum does).
func (c *memCluster) restartAlone(mn *memNode) {
	c.t.Helper()
	c.stop()
	c.restart(mn)
	c.expireQuorum(mn)
	if !mn.QuorumLost() {
		c.t.Fatalf("%s does not count its quorum as lost", mn.ID())
	}
}

// restart starts the stopped node mn again on its Raft stores, on a new
// transport linked to those of the nodes running, and reachable over memNet
// from them.
func (c *memCluster) restart(mn *memNode) {
	c.t.Helper()
	members := make([]fsm.Member, len(c.nodes))
	for i, o := range c.nodes {
		members[i] = o.self
	}
	_, mn.trans = raft.NewInmemTransportWithTimeout(raft.ServerAddress(mn.self.RaftAddr), 100*time.Millisecond)
	c.net.mu.Lock()
	for _, o := range c.nodes {
		if o != mn && !c.net.cut[o.self.HTTPAddr] {
			mn.trans.Connect(o.trans.LocalAddr(), o.trans)
			o.trans.Connect(mn.trans.LocalAddr(), mn.trans)
		}
	}
	c.net.mu.Unlock()
	cfg := fastConfig(mn.self, members, ModeAP, &testHooks{})
	from := mn.self.HTTPAddr
	cfg.hooks.transport = func(http.RoundTripper) http.RoundTripper { return &memRoundTripper{net: c.net, from: from} }
	deps := Deps{Transport: mn.trans, LogStore: mn.logs, StableStore: mn.logs, SnapshotStore: mn.snaps, JournalDir: c.t.TempDir()}
	n, err := New(cfg, deps, fsm.New(time.Minute, nil), nil)
	if err != nil {
		c.t.Fatalf("restart %s: %v", mn.self.ID, err)
	}
	mn.Node = n
	c.net.mu.Lock()
	c.net.handlers[from] = n.InternalHandler(nil)
	delete(c.net.cut, from)
	c.net.mu.Unlock()
}

// restartAfterModes starts a cluster in mode, has its third node take a
// snapshot, then switches the cluster to each of modes in turn, waits until
// that node applied the last, and restarts it alone (restartAlone). The
// restarted node's FSM holds the snapshot's mode, mode. It returns the
// cluster and that node.
func restartAfterModes(t *testing.T, mode string, modes ...string) (*memCluster, *memNode) {
	t.Helper()
	c := startMemCluster(t, 3, mode, nil)
	leader := c.leader()
	mn := c.nodes[2]
	if err := mn.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot on %s: %v", mn.ID(), err)
	}
	for _, m := range modes {
		if err := leader.SetMode(t.Context(), m); err != nil {
			t.Fatalf("set mode %s: %v", m, err)
		}
	}
	// Wait for the last set-mode entry itself, not for its mode: when the
	// last mode is the one the cluster started in, mn holds it before any
	// of the entries reach its log.
	want := leader.raft.LastIndex()
	c.waitFor(2*time.Second, mn.ID()+" applied the set-mode entries", func() bool { return mn.raft.AppliedIndex() >= want })
	if last := modes[len(modes)-1]; mn.storedMode() != last {
		t.Fatalf("%s holds mode %q after the set-mode entries, want %q", mn.ID(), mn.storedMode(), last)
	}
	c.restartAlone(mn)
	if got := mn.storedMode(); got != mode {
		t.Fatalf("restarted FSM holds mode %q, want the snapshot's %q (the case under test)", got, mode)
	}
	return c, mn
}

// refusesWrites checks that mn acts CP: a write is refused with ErrNoQuorum
// and nothing is journaled, and registry reads are not served stale.
func refusesWrites(t *testing.T, mn *memNode) {
	t.Helper()
	if got := mn.Mode(); got != ModeCP {
		t.Errorf("Mode() = %q, want %q", got, ModeCP)
	}
	if _, err := mn.Apply(t.Context(), registerEntry(t, "A", "1")); !errors.Is(err, ErrNoQuorum) {
		t.Errorf("write without quorum: err = %v, want ErrNoQuorum", err)
	}
	if got := mn.fb.journal.Len(); got != 0 {
		t.Errorf("journal holds %d writes, want none", got)
	}
	if got := mn.ReadGate(); got != GateClosed {
		t.Errorf("read gate %q, want %q", got, GateClosed)
	}
}

// A node restarted without a leader holds the snapshot's mode (AP) in its
// FSM, but its log says the cluster went CP since: it must not acknowledge
// writes without quorum.
func TestRestartWithoutLeader_LogTailCPWinsOverAPSnapshot(t *testing.T) {
	_, mn := restartAfterModes(t, ModeAP, ModeCP)
	refusesWrites(t, mn)
}

// The reverse: the snapshot says CP, the log tail says the cluster went
// back to AP. The log does not say whether that entry committed, so the
// node stays CP until it catches up (the conservative rule of scanLogMode):
// it may refuse a write the cluster would take, never the other way round.
func TestRestartWithoutLeader_CPSnapshotStaysCPUntilCaughtUp(t *testing.T) {
	_, mn := restartAfterModes(t, ModeCP, ModeAP)
	refusesWrites(t, mn)
}

// A CP entry in the log tail wins even when a later one says AP: that AP
// entry may never have committed.
func TestRestartWithoutLeader_AnyCPInLogTailWins(t *testing.T) {
	_, mn := restartAfterModes(t, ModeAP, ModeCP, ModeAP)
	refusesWrites(t, mn)
}

// Once the restarted node caught up with a leader, the FSM's mode rules:
// the cluster's last committed set-mode said AP.
func TestRestartWithoutLeader_FSMModeRulesOnceCaughtUp(t *testing.T) {
	c, mn := restartAfterModes(t, ModeAP, ModeCP, ModeAP)
	refusesWrites(t, mn)
	c.restart(c.nodes[0])
	c.restart(c.nodes[1])
	c.waitFor(5*time.Second, mn.ID()+" caught up", mn.Ready)
	if got := mn.Mode(); got != ModeAP {
		t.Errorf("Mode() once caught up = %q, want %q", got, ModeAP)
	}
	if got := mn.logCP.Load(); got != 0 {
		t.Errorf("the log's set-mode cp at %d still counts once caught up", got)
	}
}

// With nothing about CP in the snapshot or the log, a restarted node cut
// off stays AP: it journals writes and serves stale reads as before.
func TestRestartWithoutLeader_APStaysAP(t *testing.T) {
	_, mn := restartAfterModes(t, ModeAP, ModeAP)
	if got := mn.Mode(); got != ModeAP {
		t.Errorf("Mode() = %q, want %q", got, ModeAP)
	}
	if _, err := mn.Apply(t.Context(), registerEntry(t, "A", "1")); err != nil {
		t.Errorf("write without quorum in AP: %v", err)
	}
	if got := mn.fb.journal.Len(); got != 1 {
		t.Errorf("journal holds %d writes, want 1", got)
	}
}

// A set-mode cp the snapshot already covers (the cluster went cp and back
// to ap before it) does not count: the restarted node scans its whole log
// while the snapshot restores, and compares the last cp with what the
// restored FSM holds.
func TestRestartWithoutLeader_CPBeforeTheSnapshotIgnored(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	mn := c.nodes[2]
	for _, m := range []string{ModeCP, ModeAP} {
		if err := leader.SetMode(t.Context(), m); err != nil {
			t.Fatalf("set mode %s: %v", m, err)
		}
	}
	want := leader.raft.LastIndex()
	c.waitFor(2*time.Second, mn.ID()+" applied the set-mode entries", func() bool { return mn.raft.AppliedIndex() >= want })
	if err := mn.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot on %s: %v", mn.ID(), err)
	}
	if mn.lastLogCP() == 0 {
		t.Fatal("the log no longer holds the set-mode cp: the case is not under test")
	}
	c.restartAlone(mn)
	if got := mn.storedMode(); got != ModeAP {
		t.Fatalf("restarted FSM holds mode %q, want the snapshot's %q", got, ModeAP)
	}
	if got := mn.Mode(); got != ModeAP {
		t.Errorf("Mode() = %q, want %q: a cp the snapshot covers counted", got, ModeAP)
	}
	if _, err := mn.Apply(t.Context(), registerEntry(t, "A", "1")); err != nil {
		t.Errorf("write without quorum in AP: %v", err)
	}
}

// slowOpen is a snapshot store whose Open takes delay first: a restore as
// slow as a large registry's (seconds at a million instances).
type slowOpen struct {
	raft.SnapshotStore
	delay time.Duration
}

func (s slowOpen) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	time.Sleep(s.delay)
	return s.SnapshotStore.Open(id)
}

// A node whose snapshot takes longer to restore than a missing leader is
// ridden out (quorumWait) still gives the election that long once Raft
// runs: right after its start it is without a leader, not without quorum,
// so its reads wait for the catch-up instead of building the durable view
// (a copy of the whole registry with the log replayed onto it). Left alone
// for quorumWait after that, it counts its quorum as lost as before.
func TestRestart_SlowRestoreIsNotTimeWithoutQuorum(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	c.leader()
	mn := c.nodes[2]
	if err := mn.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot on %s: %v", mn.ID(), err)
	}
	c.stop()
	wait := mn.quorumWait()
	mn.snaps = slowOpen{SnapshotStore: mn.snaps, delay: wait + 500*time.Millisecond}
	start := time.Now()
	c.restart(mn) // alone: every other node is stopped
	if took := time.Since(start); took < wait {
		t.Fatalf("the restart took %v, less than quorumWait %v: the case is not under test", took, wait)
	}
	if mn.QuorumLost() {
		t.Fatalf("%s counts its quorum as lost right after its start: the restore counted as time without a leader", mn.ID())
	}
	if g := mn.ReadGate(); g != GateClosed {
		t.Errorf("read gate right after the start = %q, want %q", g, GateClosed)
	}
	waitFor(t, 3*wait, mn.ID()+" counting its quorum as lost, alone", mn.QuorumLost)
	if g := mn.ReadGate(); g != GateDurable {
		t.Errorf("read gate alone after quorumWait = %q, want %q", g, GateDurable)
	}
}

// A read of the durable view under way does not hold the gate shut: a
// node restarted cut off serves its durable state, and once healed it
// opens its gate while a read of that state (at a million instances, a
// full document's build of seconds) is still running.
func TestRestart_GateOpensDuringADurableRead(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	mn := c.followers()[0]
	if _, err := leader.Apply(t.Context(), registerEntry(t, "A", "1")); err != nil {
		t.Fatalf("register: %v", err)
	}
	want := leader.raft.LastIndex()
	c.waitFor(2*time.Second, mn.ID()+" holding the registration", func() bool { return mn.raft.AppliedIndex() >= want })
	c.stopNode(mn)
	c.cutOff(mn) // startNode links it to no one
	if err := c.startNode(mn); err != nil {
		t.Fatalf("restart %s: %v", mn.ID(), err)
	}
	c.expireQuorum(mn)
	if g := mn.ReadGate(); g != GateDurable {
		t.Fatalf("read gate of %s restarted cut off = %q, want %q", mn.ID(), g, GateDurable)
	}
	inRead, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the cluster stops: a gate held shut would hold its shutdown
	done := make(chan int, 1)
	go func() {
		mn.ReadDurable(func(r *fsm.Registry) {
			close(inRead)
			<-release
			done <- r.Count()
		})
	}()
	<-inRead
	c.heal(mn)
	c.waitFor(5*time.Second, mn.ID()+" opening its gate while a durable read runs", mn.Ready)
	free()
	if n := <-done; n != 1 {
		t.Errorf("the durable read saw %d instances, want 1", n)
	}
}
