package cluster

import (
	"errors"
	"fmt"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// checkOverlay reads the overlay invariant under the fallback's lock.
func (mn *memNode) checkOverlay() error {
	mn.fb.mu.RLock()
	defer mn.fb.mu.RUnlock()
	return mn.fb.checkOverlay()
}

// A write refused in AP fallback (here: one on an instance nobody holds)
// leaves no trace: no journal entry and no overlay. On the old code the
// refusal built the overlay first and left it standing with an empty
// journal, and the node's reads stayed frozen on that copy after the heal,
// even for linearizable reads and its own acknowledged writes.
func TestMem_RefusedFallbackWriteLeavesNoOverlay(t *testing.T) {
	for _, refused := range []string{"cancel", "status"} {
		t.Run(refused, func(t *testing.T) {
			c, f := startCutOff(t, ModeAP, nil)
			entry := cancelEntry(t, "APPA", "no-such-instance")
			if refused == "status" {
				var err error
				entry, err = fsm.Encode(fsm.CmdSetOverride, &fsm.OverrideBody{App: "APPA", ID: "no-such-instance", Status: fsm.StatusOutOfService})
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.Apply(t.Context(), entry); !errors.Is(err, fsm.ErrInstanceNotFound) {
				t.Fatalf("%s of an unknown instance without quorum: %v, want not found", refused, err)
			}
			if err := f.checkOverlay(); err != nil || f.fb.journal.Len() != 0 {
				t.Fatalf("after a refused write: %v, journal %d", err, f.fb.journal.Len())
			}
			c.heal(f)
			leader := c.leader()
			mustApply(t, leader, registerEntry(t, "APPB", "after-heal"))
			c.waitFor(3*time.Second, "the healed node's reads showing a write made after the heal", func() bool {
				return visible(f.Node, "APPB", "after-heal")
			})
			if err := f.checkOverlay(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The overlay is the registry this node holds plus the journal: when the
// FSM moves on under it (a catch-up before the replay), reads show the
// FSM's new state with the journal's writes on top, not the old copy.
func TestMem_OverlayFollowsTheFSM(t *testing.T) {
	c, f := startCutOff(t, ModeAP, nil)
	leader := c.leader()
	mustApply(t, f, registerEntry(t, "JOURNALED", "j-1"))
	mustApply(t, leader, registerEntry(t, "MAJORITY", "m-1"))
	if !visible(f.Node, "JOURNALED", "j-1") {
		t.Fatal("the journaled write is not in the node's reads")
	}
	// Hold the replay back, so the FSM catches up first.
	f.fb.replaying <- struct{}{}
	c.heal(f)
	c.waitFor(3*time.Second, "the healed node applying the majority's write", func() bool { return inFSM(f.Node, "MAJORITY", "m-1") })
	if !visible(f.Node, "MAJORITY", "m-1") || !visible(f.Node, "JOURNALED", "j-1") {
		t.Errorf("reads during the catch-up: the overlay drifted from the FSM plus the journal (majority %v, journaled %v, journal %d)",
			visible(f.Node, "MAJORITY", "m-1"), visible(f.Node, "JOURNALED", "j-1"), f.fb.journal.Len())
	}
	<-f.fb.replaying
	c.waitFor(3*time.Second, "the journal replayed", func() bool { return f.fb.journal.Len() == 0 })
	if err := f.checkOverlay(); err != nil {
		t.Fatal(err)
	}
	c.waitFor(3*time.Second, "the journaled write committed on the leader", func() bool { return inFSM(leader.Node, "JOURNALED", "j-1") })
}

// A follower cut off past the leader lease closes its read gate, and after
// the heal keeps it closed until it applied what the leader committed
// meanwhile: whenever it reports Ready, its FSM holds every write made
// during the partition. On the old code the gate latched open at the first
// catch-up after the start, and the first reads after the heal came from a
// registry a partition behind.
func TestMem_HealedFollowerNotReadyWhileBehind(t *testing.T) {
	c := startMemCluster(t, 3, ModeCP, nil)
	leader := c.leader()
	f := c.followers()[0]
	c.waitFor(3*time.Second, f.ID()+" ready", f.Ready)
	closes := f.GateCloses()
	c.cutOff(f)
	c.waitFor(3*time.Second, f.ID()+" closing its gate", func() bool { return !f.Ready() })
	if f.GateCloses() != closes+1 {
		t.Fatalf("gate closes: %d, want %d", f.GateCloses(), closes+1)
	}
	const writes = 50
	for i := range writes {
		mustApply(t, leader, registerEntry(t, "BEHIND", fmt.Sprint(i)))
	}
	c.heal(f)
	deadline := time.Now().Add(5 * time.Second)
	for !f.Ready() || !inFSM(f.Node, "BEHIND", fmt.Sprint(writes-1)) {
		if f.Ready() {
			for i := range writes {
				if !inFSM(f.Node, "BEHIND", fmt.Sprint(i)) {
					t.Fatalf("%s ready with write %d of the partition missing", f.ID(), i)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not catch up after the heal (ready %v)", f.ID(), f.Ready())
		}
		time.Sleep(time.Millisecond)
	}
}

// A follower healed after a partition in which nothing was written is
// caught up at once, but the leader's replication to it is still backing
// off (raft waits up to seconds after repeated failures) while heartbeats
// flow: a write made right after the heal does not reach it for that long.
// Whenever it reports Ready, its FSM must hold every write acknowledged
// more than the lease (at least minTouchGap) before. On the old code the gate stayed open on
// heartbeats alone and the follower lacked the write for over a second.
func TestMem_HealedFollowerInReplicationBackOff(t *testing.T) {
	c := startMemCluster(t, 3, ModeCP, nil)
	leader := c.leader()
	f := c.followers()[0]
	c.waitFor(3*time.Second, f.ID()+" ready", f.Ready)
	c.cutOff(f)
	time.Sleep(3 * time.Second) // long enough for a back-off of seconds
	c.heal(f)
	c.waitFor(5*time.Second, f.ID()+" ready after the heal", f.Ready)
	mustApply(t, leader, registerEntry(t, "BACKOFF", "after-heal"))
	acked := time.Now()
	bound := f.rd.gap + 5*readyPoll
	for !inFSM(f.Node, "BACKOFF", "after-heal") {
		// The time first, then the gate, then the FSM: a stall between
		// them can only make the check more lenient, never fail it wrongly.
		since := time.Since(acked)
		if since > bound && f.Ready() && !inFSM(f.Node, "BACKOFF", "after-heal") {
			t.Fatalf("%s ready %v after a write it does not hold", f.ID(), since.Round(time.Millisecond))
		}
		if time.Since(acked) > 15*time.Second {
			t.Fatalf("%s never received the write", f.ID())
		}
		time.Sleep(time.Millisecond)
	}
	c.waitFor(5*time.Second, f.ID()+" ready again", f.Ready)
}

// A scheduling gap over the lease (a SIGSTOP, a long stall) closes the gate
// on the read path itself, before the gate watcher runs again, and the
// node opens it again only after catching up.
func TestMem_SchedulingGapClosesTheGate(t *testing.T) {
	c := startMemCluster(t, 3, ModeCP, nil)
	c.leader()
	for _, mn := range c.nodes {
		c.waitFor(3*time.Second, mn.ID()+" ready", mn.Ready)
		// As if the process had been stopped for a second.
		mn.rd.lastTick.Store(time.Now().Add(-time.Second).UnixNano())
		if mn.Ready() {
			t.Fatalf("%s ready after a gap of a second", mn.ID())
		}
		c.waitFor(3*time.Second, mn.ID()+" ready again", mn.Ready)
	}
}

// A node removed while it was cut off, and so not told, must not lose the
// writes it acknowledged into its AP journal meanwhile: once it reaches a
// peer again it learns it is out, refuses further writes and hands the
// journal to the cluster's leader. A node that can reach a peer in touch
// with the leader asks first, and never journals once removed.
func TestMem_RemovedWhileCutOff(t *testing.T) {
	c, gone := startCutOff(t, ModeAP, nil)
	leader := c.leader()
	if err := leader.Remove(t.Context(), gone.ID()); err != nil {
		t.Fatal(err)
	}
	// Alone, it cannot know: AP takes the write.
	if _, err := gone.Apply(t.Context(), registerEntry(t, "ISOLATED", "i-1")); err != nil {
		t.Fatalf("write on a removed node that reaches nobody: %v", err)
	}
	if gone.fb.journal.Len() != 1 {
		t.Fatalf("journal: %d entries, want 1", gone.fb.journal.Len())
	}
	// It reaches its peers again (HTTP; Raft no longer talks to it).
	c.net.mu.Lock()
	delete(c.net.cut, gone.self.HTTPAddr)
	c.net.mu.Unlock()
	c.waitFor(5*time.Second, "the journal handed to the leader", func() bool {
		return gone.fb.journal.Len() == 0 && inFSM(leader.Node, "ISOLATED", "i-1")
	})
	if err := gone.checkOverlay(); err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Apply(t.Context(), registerEntry(t, "ISOLATED", "i-2")); !errors.Is(err, ErrRemoved) {
		t.Fatalf("write on a removed node that reached a peer: %v, want ErrRemoved", err)
	}
	if gone.fb.journal.Len() != 0 {
		t.Fatalf("the removed node journaled a write after learning it was out")
	}
}

// A replay whose journal trim the disk refuses sends nothing twice: the
// records the cluster applied are counted as replayed, no longer shown
// through the overlay, and trimmed by the next replay before it sends
// anything. Without that, each retry applied them again, after whatever the
// cluster committed meanwhile.
func TestMem_ReplayedButNotTrimmedIsNotSentAgain(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skipf("file size limit: %v", err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	var restoreOnce sync.Once
	restore := func() {
		restoreOnce.Do(func() {
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
				t.Error(err)
			}
		})
	}
	defer restore()
	var cutOff atomic.Pointer[memNode]
	var limited atomic.Bool
	c, f := startCutOff(t, ModeAP, func(_ int, cfg *Config) {
		cfg.hooks.beforeReplayBatch = func([][]byte) error {
			mn := cutOff.Load()
			if mn == nil || !limited.CompareAndSwap(false, true) {
				return nil
			}
			// A write journaled while the replay is under way stays for
			// the next one; then the file size limit fails the trim's
			// rewrite, as a full disk would.
			if err := mn.fb.journal.Append(registerEntry(t, "TRIM", "t-3")); err != nil {
				t.Error(err)
			}
			limit := old
			limit.Cur = 16
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
				t.Error(err)
			}
			return nil
		}
	})
	leader := c.leader()
	mustApply(t, f, registerEntry(t, "TRIM", "t-1"), registerEntry(t, "TRIM", "t-2"))
	cutOff.Store(f)
	c.heal(f)
	c.waitFor(5*time.Second, "the journal replayed but not trimmed", func() bool {
		f.fb.mu.RLock()
		defer f.fb.mu.RUnlock()
		return f.fb.replayed == 2 && f.fb.journal.Len() == 3
	})
	time.Sleep(300 * time.Millisecond) // a few monitor ticks: each must trim, not send
	if err := f.checkOverlay(); err != nil {
		t.Fatal(err)
	}
	if !visible(f.Node, "TRIM", "t-3") {
		t.Fatal("the write journaled during the replay is not in the node's reads")
	}
	restore()
	c.waitFor(5*time.Second, "the journal trimmed and replayed", func() bool { return f.fb.journal.Len() == 0 })
	if got := leader.committed(t, "TRIM"); len(got) != 3 {
		t.Fatalf("the leader's log holds %v: want each journaled write once", got)
	}
}

// A write the FSM itself refuses without quorum (a metadata change past
// its bound, which the node judges on its overlay) is answered so and
// never journaled: were it journaled, the replay would judge it again on
// the leader's state, where it may fit, and apply a change its client
// was told failed.
func TestMem_WriteTheFSMRefusesWithoutQuorumIsNotJournaled(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	f := c.followers()[0]
	md := func(m map[string]string, maxEntries int) []byte {
		e, err := fsm.Encode(fsm.CmdMetadata, &fsm.MetadataBody{App: "MD", ID: "i1", Metadata: m, MaxEntries: maxEntries})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	mustApply(t, leader, registerEntry(t, "MD", "i1"), md(map[string]string{"a": "1", "b": "2"}, 0))
	c.waitFor(2*time.Second, "the metadata on "+f.ID(), func() bool {
		var n int
		f.fsm.Read(func(r *fsm.Registry) {
			if e := r.Get("MD", "i1"); e != nil {
				n = e.Instance.Metadata.Len()
			}
		})
		return n == 2
	})
	c.loseQuorum(f)
	time.Sleep(5 * time.Millisecond)                   // a registration time of its own
	mustApply(t, leader, registerEntry(t, "MD", "i1")) // registered again, without metadata
	if _, err := f.Apply(t.Context(), md(map[string]string{"c": "3"}, 2)); !errors.Is(err, fsm.ErrBadCommand) {
		t.Fatalf("a third key past a bound of 2 without quorum: %v, want ErrBadCommand", err)
	}
	if err := f.checkOverlay(); err != nil || f.fb.journal.Len() != 0 {
		t.Fatalf("after the refused write: %v, journal %d", err, f.fb.journal.Len())
	}
	c.heal(f)
	mustApply(t, leader, registerEntry(t, "AFTER", "heal"))
	for _, mn := range c.nodes {
		c.waitFor(3*time.Second, "the heal on "+mn.ID(), func() bool { return inFSM(mn.Node, "AFTER", "heal") })
		mn.fsm.Read(func(r *fsm.Registry) {
			if e := r.Get("MD", "i1"); e == nil || e.Instance.Metadata.Map()["c"] != "" {
				t.Errorf("%s: the refused metadata change was applied", mn.ID())
			}
		})
	}
}
