package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// A node removed, then re-admitted while the leader's word could not reach
// it, takes writes and heartbeats again once it is back in touch: it asks
// its peers, instead of refusing everything until it restarts.
func TestMem_NodeReadmittedOutOfReachTakesWritesAgain(t *testing.T) {
	c, leader, gone := removedFollower(t)
	if _, err := gone.Apply(t.Context(), registerEntry(t, "GHOST", "g-1")); !errors.Is(err, ErrRemoved) {
		t.Fatalf("write on the removed node: %v, want ErrRemoved", err)
	}
	c.cutOff(gone) // re-admitted while the leader's word cannot reach it
	if err := leader.Join(t.Context(), gone.self); err != nil {
		t.Fatalf("join %s again: %v", gone.ID(), err)
	}
	c.heal(gone)
	c.waitFor(5*time.Second, gone.ID()+" a voter in touch with the leader", func() bool {
		return gone.HasQuorum() && gone.isVoter(gone.ID()) && gone.LeaderID() != ""
	})
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if _, err = gone.Apply(t.Context(), registerEntry(t, "BACK", "b-1")); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("re-admitted %s (voter %v, leader %q) still refuses writes after 5 s: %v",
			gone.ID(), gone.isVoter(gone.ID()), gone.LeaderID(), err)
	}
	if err := gone.Renew(t.Context(), "KEPT", "k-1", 0); err != nil {
		t.Fatalf("renewal on the re-admitted node: %v", err)
	}
}

// slowSnaps makes a follower's snapshot install take d, as a large one does.
type slowSnaps struct {
	raft.SnapshotStore
	d time.Duration
}

type slowSink struct {
	raft.SnapshotSink
	d time.Duration
}

func (s slowSnaps) Create(v raft.SnapshotVersion, index, term uint64, c raft.Configuration, ci uint64, tr raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(v, index, term, c, ci, tr)
	if err != nil {
		return nil, err
	}
	return slowSink{sink, s.d}, nil
}

func (s slowSink) Close() error { time.Sleep(s.d); return s.SnapshotSink.Close() }

func (k *leaseKeeper) evictedTotal() uint64 { k.mu.Lock(); defer k.mu.Unlock(); return k.evicted }

// The leases a restore brings get their grace from the moment the leader's
// FSM holds them, not from when raft.Restore returned: in between (a
// follower installing the snapshot) they were judged by the old grace, and
// heartbeating instances were evicted.
func TestMem_RestoredLeasesAreNotEvictedWhileFollowersInstall(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, func(i int, cfg *Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 600*time.Millisecond, 600*time.Millisecond, 600*time.Millisecond
		cfg.RenewBatchInterval = 100 * time.Millisecond
		cfg.Lease.SelfPreservation = false
	})
	for _, f := range c.followers() {
		c.stopNode(f)
		f.snaps = slowSnaps{f.snaps, 300 * time.Millisecond}
		if err := c.startNode(f); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.leader()
	const n = 40
	registerN(t, leader.Node, "APP", "i-", n, 2) // 2 s leases
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // every client heartbeats every 300 ms
		for {
			for i := range n {
				_ = leader.Renew(t.Context(), "APP", fmt.Sprintf("i-%d", i), 0)
			}
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	var backup bytes.Buffer
	if err := leader.SaveSnapshot(t.Context(), &backup, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // past the grace of the election
	if !leader.IsLeader() {
		t.Skip("leader changed")
	}
	before := leader.leases.evictedTotal()
	if _, _, err := leader.RestoreSnapshot(t.Context(), io.NopCloser(bytes.NewReader(backup.Bytes()))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // inside the 2 s grace
	count := 0
	leader.fsm.Read(func(r *fsm.Registry) { count = r.Count() })
	if ev := leader.leases.evictedTotal() - before; ev > 0 || count < n {
		t.Fatalf("within the grace after the restore, %d heartbeating instances were evicted (%d of %d left)", ev, count, n)
	}
}

// restartedAfterCancel: a registered instance on the snapshot of follower
// f, cancelled after it; f is then stopped and started again (its FSM
// holds the snapshot, its log the cancel).
func restartedAfterCancel(t *testing.T, mode string, cut bool) (*memCluster, *memNode) {
	c := startMemCluster(t, 3, mode, nil)
	leader := c.leader()
	f := c.followers()[0]
	mustApply(t, leader, registerEntry(t, "APP", "x-1"))
	c.waitFor(2*time.Second, "APP/x-1 on "+f.ID(), func() bool { return inFSM(f.Node, "APP", "x-1") })
	if err := f.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	mustApply(t, leader, cancelEntry(t, "APP", "x-1"))
	c.waitFor(2*time.Second, "the cancel on "+f.ID(), func() bool { return !inFSM(f.Node, "APP", "x-1") })
	if cut {
		c.cutOff(f)
	}
	c.stopNode(f)
	if err := c.startNode(f); err != nil {
		t.Fatal(err)
	}
	return c, f
}

// A node restarted and cut off (AP) judges a heartbeat by what its reads
// show (the durable state), not by its bare snapshot: an instance
// cancelled since is not renewed.
func TestMem_RestartedCutOffNodeRenewsOnlyWhatItShows(t *testing.T) {
	c, f := restartedAfterCancel(t, ModeAP, true)
	c.expireQuorum(f)
	shown := true
	f.ReadDurable(func(r *fsm.Registry) { shown = r.Get("APP", "x-1") != nil })
	if shown {
		t.Fatal("the durable view shows the cancelled instance")
	}
	if err := f.Renew(t.Context(), "APP", "x-1", 0); !errors.Is(err, fsm.ErrInstanceNotFound) {
		t.Fatalf("heartbeat of an instance %s's reads do not show: %v, want ErrInstanceNotFound", f.ID(), err)
	}
}

// A follower that restarted and has not caught up judges a heartbeat by
// its durable view, and asks the leader of an instance that does not hold:
// judged by its snapshot, one of an instance cancelled since was answered
// 200 and then skipped when applied.
func TestMem_RestartedFollowerJudgesHeartbeatsByWhatItHolds(t *testing.T) {
	for _, mode := range []string{ModeCP, ModeAP} {
		_, f := restartedAfterCancel(t, mode, false)
		if f.CaughtUpOnce() {
			t.Logf("%s: %s caught up before the heartbeat; nothing to judge", mode, f.ID())
			continue
		}
		if err := f.Renew(t.Context(), "APP", "x-1", 0); err == nil {
			t.Fatalf("%s: heartbeat of an instance cancelled after %s's snapshot answered 200", mode, f.ID())
		}
	}
}

// Writes a restarted node journaled stay in its stale reads after the
// journal is replayed, while the gate is still closed (here held by an
// Eureka ring's copy): the durable view is built again with them.
func TestMem_ReplayedWritesStayVisibleBeforeTheGateOpens(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	mustApply(t, leader, registerEntry(t, "APP", "x-1"))
	f := c.followers()[0]
	c.waitFor(2*time.Second, "APP/x-1 on "+f.ID(), func() bool { return inFSM(f.Node, "APP", "x-1") })
	c.loseQuorum(f)
	mustApply(t, f, registerEntry(t, "APP", "y-1")) // journaled
	c.stopNode(f)
	hold := make(chan struct{})
	defer close(hold)
	f.cfg.ReadHold = hold
	if err := c.startNode(f); err != nil {
		t.Fatal(err)
	}
	shows := func() (y bool) {
		f.ReadDurable(func(r *fsm.Registry) { y = r.Get("APP", "y-1") != nil })
		return y
	}
	if !shows() {
		t.Fatal("the restarted node does not show its journaled write")
	}
	c.heal(f)
	c.waitFor(5*time.Second, "the journal replayed", func() bool { return f.fb.journal.Len() == 0 && inFSM(leader.Node, "APP", "y-1") })
	c.waitFor(2*time.Second, "y-1 applied on "+f.ID(), func() bool { return inFSM(f.Node, "APP", "y-1") })
	if !shows() {
		t.Fatalf("after the replay %s's reads (gate %s) no longer show the write it acknowledged", f.ID(), f.ReadGate())
	}
}
