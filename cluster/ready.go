package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

// The read gate. A node answers registry reads unmarked only while it is in
// touch with a leader and has caught up with what that leader committed
// since it last lost touch:
//   - after a start the FSM holds only the latest snapshot: Raft re-applies
//     the log after it only once a leader's commit index says the entries
//     are committed, so the registry may be partial (empty after a kill -9
//     with no snapshot yet);
//   - after a loss of touch (no leader contact within the leader lease, a
//     scheduling gap over the lease such as a SIGSTOP or a long stall, a
//     new term) the FSM is complete as of the loss but may be far behind:
//     a follower healed after a partition, or resumed after a pause, hears
//     from the leader before it has applied what it missed.
//
// In touch is not enough for a follower: raft's heartbeats carry no commit
// index, and after a partition heals the leader may hold entries back from
// a follower (its replication back-off) while heartbeats flow. So an open
// follower confirms it is caught up again every confirmEvery of the lease
// (a ReadBarrier in the background), and the gate closes when no
// confirmation asked within the lease has come back.
//
// The gate opens once the node caught up: as leader, once its
// post-election barrier applied everything its log holds (which includes
// every entry it held at start) and a quorum confirmed it still leads; as
// follower, once it applied the index a leader reports for a linearizable
// read (ReadBarrier), which covers every committed entry. Either must have
// been asked no longer than the lease before the gate opens, so that a
// pause in the middle of a catch-up cannot open it on an old answer.
//
// Loss of touch is noticed by the gate watcher, which ticks every readyPoll,
// and on the read path itself (Ready): a scheduling gap stops the watcher
// too, so a read that finds the watcher's last tick older than the lease
// closes the gate before it is answered, whatever arrived first after the
// pause. Before the gate opens the OnCatchUp hooks run (the response cache
// drops every document built before), so no document built while the node
// was behind is served unmarked after.
//
// While the gate is closed, httpapi marks answers stale or refuses them
// (docs/ap-vs-cp.md). A node that never caught up since its start and is cut
// off from the quorum in AP mode serves its durable state instead: the
// snapshot plus every command its log holds, applied to a private copy
// (durableView); a node that did catch up once serves its FSM, which is
// complete as of the loss.

// Read gate states, as /v1/status and /metrics show them.
const (
	// GateOpen: in touch and caught up; reads are served as usual.
	GateOpen = "open"
	// GateDurable: not caught up, in AP mode and cut off from the quorum
	// (or caught up once before losing touch); reads are served from the
	// durable state and marked stale.
	GateDurable = "durable_stale"
	// GateClosed: catching up; registry reads are refused.
	GateClosed = "closed"
)

// readyPoll is how often the gate watcher looks at the node's touch with
// its leader, and how often a node that has not caught up checks again.
const readyPoll = 20 * time.Millisecond

// minTouchGap is the least scheduling gap that counts as a loss of touch,
// whatever the leader lease: shorter stalls (a collection on a busy
// machine) leave a node at most that far behind.
const minTouchGap = 300 * time.Millisecond

// readiness is the gate's state.
type readiness struct {
	started time.Time
	// bootIndex is the last log index found at start.
	bootIndex uint64
	ready     atomic.Bool
	// everReady is set the first time the gate opens: from then on the FSM
	// is complete as of any later loss of touch.
	everReady atomic.Bool
	readyMs   atomic.Int64 // milliseconds from start until first ready
	// lastTick is when the gate watcher last ran (unix ns); gap is how
	// long it may go without running before the node counts as having
	// lost touch.
	lastTick atomic.Int64
	gap      time.Duration
	// closes counts the times the gate closed after having opened.
	closes atomic.Uint64
	// confirmedAt is when the last confirmation that this follower was
	// caught up was asked (unix ns; the opening counts as one); confirming
	// is set while one is under way.
	confirmedAt atomic.Int64
	confirming  atomic.Bool
	// lagIndex is a commit index the node had not applied when the gate
	// watcher last looked, noted at lagSince (the watcher's own).
	lagIndex uint64
	lagSince time.Time

	// leaderTerm is the term in which this node, as leader, completed its
	// post-election barrier: in that term its FSM holds every committed
	// entry. 0 while it does not lead.
	leaderTerm atomic.Uint64

	mu      sync.RWMutex
	readyCh chan struct{} // closed when the gate opens; replaced when it closes
	durable *fsm.Registry // built on first use before the gate first opens
	// building is held while the durable view is built, and mu is not:
	// a build takes seconds at a million instances, and the gate must
	// be able to open meanwhile.
	building sync.Mutex

	// holds keep the gate closed until each closes (HoldReads).
	holdMu sync.Mutex
	holds  []<-chan struct{}

	hookMu    sync.Mutex
	onCatchUp []func()
}

// HoldReads keeps the read gate closed until done closes, on top of the
// catching up: a node that copies an Eureka ring's registry at start holds
// reads until the copy is in. Call it before the gate opens (right after
// New).
func (n *Node) HoldReads(done <-chan struct{}) {
	n.rd.holdMu.Lock()
	n.rd.holds = append(n.rd.holds, done)
	n.rd.holdMu.Unlock()
}

// OnCatchUp registers fn to run each time the read gate opens, before any
// read sees it open: the response cache drops there what it built while
// the node was behind. fn must not block for long.
func (n *Node) OnCatchUp(fn func()) {
	n.rd.hookMu.Lock()
	n.rd.onCatchUp = append(n.rd.onCatchUp, fn)
	n.rd.hookMu.Unlock()
}

// held reports whether a HoldReads channel is still open.
func (rd *readiness) held() bool {
	rd.holdMu.Lock()
	defer rd.holdMu.Unlock()
	for _, h := range rd.holds {
		select {
		case <-h:
		default:
			return true
		}
	}
	return false
}

// Ready reports whether the read gate is open: the node is in touch with a
// leader and caught up with it. It closes the gate itself when the gate
// watcher has not run for longer than the lease (the process was paused or
// starved), so that the first read after a pause is never answered as
// current.
func (n *Node) Ready() bool {
	if !n.rd.ready.Load() {
		return false
	}
	now := time.Now().UnixNano()
	if gap := now - n.rd.lastTick.Load(); gap > int64(n.rd.gap) {
		n.loseTouch("scheduling gap", time.Duration(gap))
		return false
	}
	if age, ok := n.unconfirmed(now); !ok {
		n.loseTouch("catch-up not confirmed", age)
		return false
	}
	return true
}

// confirmEvery is the share of the lease after which an open follower asks
// again whether it is caught up: a third, so that two confirmations may be
// slow before the lease runs out.
const confirmEvery = 3

// unconfirmed reports how long ago the last confirmation that this node is
// caught up was asked, and whether that is within the lease. A leader
// that completed its post-election barrier in this term needs none: every
// write goes through it.
func (n *Node) unconfirmed(now int64) (time.Duration, bool) {
	if n.rd.leaderTerm.Load() != 0 {
		return 0, true
	}
	age := time.Duration(now - n.rd.confirmedAt.Load())
	return age, age <= n.rd.gap
}

// confirmCaughtUp asks, in the background, whether this open follower is
// still caught up (one ask at a time), when the last ask is older than a
// confirmEvery-th of the lease.
func (n *Node) confirmCaughtUp(now time.Time) {
	if n.rd.leaderTerm.Load() != 0 || now.UnixNano()-n.rd.confirmedAt.Load() < int64(n.rd.gap/confirmEvery) ||
		!n.rd.confirming.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer n.rd.confirming.Store(false)
		asked := time.Now().UnixNano()
		if n.caughtUp() && asked > n.rd.confirmedAt.Load() {
			n.rd.confirmedAt.Store(asked)
		}
	}()
}

// CaughtUpOnce reports whether the gate has opened since the node started:
// its FSM is then complete as of any later loss of touch, and reads while
// the gate is closed may come from it (marked stale) rather than from the
// durable state.
func (n *Node) CaughtUpOnce() bool { return n.rd.everReady.Load() }

// WaitReady waits up to d for the node to catch up, but only while a leader
// is known: then catching up usually takes one round trip, and a read that
// waits a moment is better than a refusal. It reports whether the node is
// ready.
func (n *Node) WaitReady(ctx context.Context, d time.Duration) bool {
	if n.Ready() {
		return true
	}
	if n.LeaderID() == "" {
		return false
	}
	n.rd.mu.RLock()
	ch := n.rd.readyCh
	n.rd.mu.RUnlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	case <-n.stopCh:
	}
	return n.Ready()
}

// ReadGate is the state of the read gate: GateOpen, GateDurable or GateClosed.
func (n *Node) ReadGate() string {
	switch {
	case n.Ready():
		return GateOpen
	case n.Mode() == ModeAP && (n.QuorumLost() || n.CaughtUpOnce()):
		return GateDurable
	}
	return GateClosed
}

// GateCloses counts the times the read gate closed after having opened
// (losses of touch).
func (n *Node) GateCloses() uint64 { return n.rd.closes.Load() }

// loseTouch closes the gate (if open) for the reason given.
func (n *Node) loseTouch(reason string, after time.Duration) {
	// Under rd.mu, as openGate: a close and an open never interleave, so
	// readyCh is closed once per opening.
	n.rd.mu.Lock()
	if !n.rd.ready.CompareAndSwap(true, false) {
		n.rd.mu.Unlock()
		return
	}
	n.rd.readyCh = make(chan struct{})
	n.rd.mu.Unlock()
	n.rd.closes.Add(1)
	n.log.Warn("lost touch with the leader: registry reads are marked stale or refused until this node catches up",
		"reason", reason, "after_ms", after.Milliseconds())
}

// inTouch reports whether this node still hears from its leader (as
// follower, within the leader lease), or leads in the term it caught up in.
func (n *Node) inTouch() (bool, string) {
	if n.IsLeader() {
		if !n.leaderCaughtUp() {
			return false, "new term"
		}
		return true, ""
	}
	if n.LeaderID() == "" {
		return false, "no leader"
	}
	if time.Since(n.raft.LastContact()) > n.cfg.LeaderLeaseTimeout {
		return false, "no leader contact"
	}
	// A follower that cannot store what the leader sends keeps hearing
	// from it and falls behind all the same.
	if n.deps.disk.Err() != nil {
		return false, "disk full"
	}
	return true, ""
}

// applyLag is how long the node has been behind a commit index it knew of
// and has not applied (0 when it applied everything it knew committed at
// the last look): a node in touch whose applying falls behind (a starved
// process, a slow disk) is as far behind as one cut off. Called by the gate
// watcher only.
func (n *Node) applyLag(now time.Time) time.Duration {
	applied := n.raft.AppliedIndex()
	if n.rd.lagIndex != 0 && applied >= n.rd.lagIndex {
		n.rd.lagIndex = 0
	}
	if n.rd.lagIndex == 0 {
		if c := n.raft.CommitIndex(); applied < c {
			n.rd.lagIndex, n.rd.lagSince = c, now
		}
		return 0
	}
	return now.Sub(n.rd.lagSince)
}

// watchReady runs the gate: it closes it on a loss of touch and opens it
// once the node caught up.
func (n *Node) watchReady() {
	defer n.wg.Done()
	n.rd.lastTick.Store(time.Now().UnixNano())
	tick.Every(n.stopCh, readyPoll, func() {
		now := time.Now()
		if gap := now.UnixNano() - n.rd.lastTick.Load(); gap > int64(n.rd.gap) {
			n.loseTouch("scheduling gap", time.Duration(gap))
		}
		n.rd.lastTick.Store(now.UnixNano())
		if n.rd.ready.Load() {
			if ok, why := n.inTouch(); !ok {
				n.loseTouch(why, time.Since(n.raft.LastContact()))
			} else if lag := n.applyLag(now); lag > n.rd.gap {
				n.loseTouch("apply lag", lag)
			} else if age, ok := n.unconfirmed(now.UnixNano()); !ok {
				n.loseTouch("catch-up not confirmed", age)
			} else {
				n.confirmCaughtUp(now)
			}
			return
		}
		if n.rd.held() || !n.caughtUp() {
			return
		}
		// The answer caughtUp had is as old as the tick: a pause during
		// the catch-up makes it too old to open on.
		if time.Since(now) > n.rd.gap {
			return
		}
		n.rd.lastTick.Store(time.Now().UnixNano())
		n.rd.confirmedAt.Store(now.UnixNano()) // caughtUp asked after now
		n.openGate()
	})
}

// openGate runs the OnCatchUp hooks and opens the gate.
func (n *Node) openGate() {
	n.rd.hookMu.Lock()
	for _, fn := range n.rd.onCatchUp {
		fn()
	}
	n.rd.hookMu.Unlock()
	n.rd.mu.Lock()
	n.rd.ready.Store(true)
	close(n.rd.readyCh)
	n.rd.durable = nil // no longer needed: reads follow the FSM now
	// Under mu, so that a durable view built meanwhile is never kept
	// (durableView).
	again := n.rd.everReady.Swap(true)
	n.rd.mu.Unlock()
	if again {
		n.log.Info("caught up again: serving registry reads", "applied_index", n.raft.AppliedIndex())
		return
	}
	ms := time.Since(n.rd.started).Milliseconds()
	n.rd.readyMs.Store(max(ms, 1))
	n.log.Info("caught up: serving registry reads", "after_ms", ms,
		"boot_log_index", n.rd.bootIndex, "applied_index", n.raft.AppliedIndex())
}

// CaughtUp reports whether this node's FSM holds everything a leader
// committed (the read gate's condition, without its holds). On a follower
// it asks the leader for its commit index.
func (n *Node) CaughtUp() bool { return n.caughtUp() }

// caughtUp reports whether the FSM holds everything a leader committed. A
// leader also confirms with a quorum that it still leads: one resumed
// after a pause believes it leads until a follower tells it otherwise.
func (n *Node) caughtUp() bool {
	if n.LeaderID() == "" {
		return false
	}
	if n.IsLeader() {
		return n.leaderCaughtUp() && n.raft.AppliedIndex() >= n.rd.bootIndex &&
			waitFuture(n.raft.VerifyLeader(), n.stopCh) == nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// Shutdown waits for this goroutine: a stopped node applies nothing
	// more, so waiting for its FSM to catch up must end with it.
	go func() {
		select {
		case <-n.stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	return n.ReadBarrier(ctx) == nil
}

// leaderCaughtUp reports whether this node leads and completed its
// post-election barrier in the current term.
func (n *Node) leaderCaughtUp() bool {
	t := n.rd.leaderTerm.Load()
	return t != 0 && t == n.raft.CurrentTerm() && n.IsLeader()
}

// ReadDurable runs fn on the registry reads may show while the gate is
// closed: the AP fallback overlay when there is one, else the durable state
// (snapshot plus every command the log holds). Once the node is ready it is
// the same as Read.
func (n *Node) ReadDurable(fn func(r *fsm.Registry)) {
	if n.CaughtUpOnce() {
		n.Read(fn)
		return
	}
	if n.readOverlay(fn) {
		return
	}
	reg := n.durableView()
	if reg == nil { // the gate opened meanwhile
		n.Read(fn)
		return
	}
	// No lock is held for fn: nothing changes the durable view once it
	// is built, and a read under way when the gate opens is still marked
	// stale.
	fn(reg)
}

// durableView returns the durable state, building it on first use, or nil
// once the gate has opened: then reads follow the FSM, and a view still
// being built is dropped.
func (n *Node) durableView() *fsm.Registry {
	n.rd.building.Lock()
	defer n.rd.building.Unlock()
	n.rd.mu.RLock()
	reg := n.rd.durable
	n.rd.mu.RUnlock()
	if reg != nil || n.CaughtUpOnce() {
		return reg
	}
	reg = n.buildDurable()
	n.rd.mu.Lock()
	defer n.rd.mu.Unlock()
	if reg == nil || n.CaughtUpOnce() {
		return nil
	}
	n.rd.durable = reg
	return reg
}

// dropDurableView makes the next durable read build the view again.
func (n *Node) dropDurableView() {
	n.rd.mu.Lock()
	n.rd.durable = nil
	n.rd.mu.Unlock()
}

// readBase returns a private copy of the registry new local state should
// start from, and the FSM index it holds: the FSM once the gate has opened,
// else the durable state (durable set), so that an AP fallback overlay made
// right after a start is never partial.
func (n *Node) readBase() (reg *fsm.Registry, index uint64, durable bool) {
	if !n.CaughtUpOnce() {
		if d := n.durableView(); d != nil {
			return d.Clone(), 0, true
		}
	}
	// An index taken before the copy is at most behind it: the overlay is
	// then rebuilt once more, never kept on a copy older than its index.
	index = n.fsm.AppliedIndex()
	n.fsm.Read(func(r *fsm.Registry) { reg = r.Clone() })
	return reg, index, false
}

// buildDurable copies the FSM and applies to the copy every command of the
// local log after what the FSM applied. The entries past the commit index
// may never commit; in AP mode a stale answer may show them. It gives up,
// returning nil, once the gate has opened: at a million instances the
// replay is seconds of CPU the node needs for its own catch-up.
func (n *Node) buildDurable() *fsm.Registry {
	var reg *fsm.Registry
	var from uint64
	for range 10 {
		// The FSM may apply meanwhile: take a copy between two equal indexes.
		from = n.fsm.AppliedIndex()
		n.fsm.Read(func(r *fsm.Registry) { reg = r.Clone() })
		if n.fsm.AppliedIndex() == from {
			break
		}
	}
	last, err := n.deps.logs.LastIndex()
	if err != nil {
		n.log.Warn("reading the log for the durable view failed", "error", err)
		return reg
	}
	applied := 0
	for i := from + 1; i <= last; i++ {
		if i%1024 == 0 && n.CaughtUpOnce() {
			n.log.Info("dropped the durable view: caught up while building it", "at_index", i)
			return nil
		}
		var l raft.Log
		if err := n.deps.logs.GetLog(i, &l); err != nil {
			continue // compacted: the snapshot the FSM holds covers it
		}
		if l.Type != raft.LogCommand {
			continue
		}
		cmds, err := fsm.DecodeEntry(l.Data) // a packed entry's commands too
		if err != nil {
			continue
		}
		for _, cmd := range cmds {
			_ = reg.Apply(i, cmd, &fsm.Change{})
		}
		applied += len(cmds)
	}
	n.log.Info("built the durable view for reads while catching up",
		"from_index", from, "to_index", last, "commands", applied, "instances", reg.Count())
	return reg
}
