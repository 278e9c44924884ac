package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// SetMode changes the cluster-wide consistency mode through the log. It
// needs quorum in either mode: a mode is never journaled.
func (n *Node) SetMode(ctx context.Context, mode string) error {
	if mode != ModeAP && mode != ModeCP {
		return fmt.Errorf("mode %q: must be ap or cp: %w", mode, fsm.ErrBadCommand)
	}
	if n.QuorumLost() {
		return fmt.Errorf("set mode: %w", ErrNoQuorum)
	}
	entry, err := fsm.Encode(fsm.CmdSetMode, &fsm.ModeBody{Mode: mode})
	if err != nil {
		return err
	}
	if _, err := n.applyThrough(ctx, entry); err != nil {
		return fmt.Errorf("set mode: %w", err)
	}
	n.log.Info("mode changed", "mode", mode)
	return nil
}

// ReadBarrier makes the next local read linearizable: the leader confirms it
// still leads (a quorum answers it), and a follower waits until it has
// applied everything the leader had applied at that moment (ReadIndex).
func (n *Node) ReadBarrier(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	if n.IsLeader() {
		_, err := n.readIndexLocal()
		return err
	}
	addr := n.leaderHTTP()
	if addr == "" || addr == n.cfg.HTTPAdvertise || n.QuorumLost() {
		return fmt.Errorf("linearizable read: %w", ErrNoQuorum)
	}
	idx, err := n.peers().ReadIndex(ctx, addr)
	if err != nil {
		return fmt.Errorf("linearizable read: ask leader %s: %w", addr, noLeader(err))
	}
	if err := n.applied.wait(ctx, idx); err != nil {
		return fmt.Errorf("linearizable read: catching up to %d: %w", idx, ErrNoLeader)
	}
	return nil
}

// readIndexLocal confirms leadership and returns the index every
// acknowledged write is applied up to.
func (n *Node) readIndexLocal() (uint64, error) {
	if err := n.waitLeaderCaughtUp(); err != nil {
		return 0, err
	}
	// Writes are acknowledged only after the leader applied them, so its
	// applied index, read before confirming leadership, covers them all.
	idx := n.fsm.AppliedIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, fmt.Errorf("verify leader: %v: %w", err, ErrNoLeader)
	}
	return idx, nil
}

// waitLeaderCaughtUp waits until this leader's post-election barrier is
// applied: until then its FSM may lack entries an earlier leader
// acknowledged, and no read may be answered from it. It returns
// ErrNotLeader when this node does not lead, and an error wrapping
// ErrNoLeader when it loses leadership or the barrier takes longer than
// an apply may.
func (n *Node) waitLeaderCaughtUp() error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	for wait := time.Now().Add(n.cfg.ApplyTimeout); !n.leaderCaughtUp(); {
		if time.Now().After(wait) || !n.IsLeader() {
			return fmt.Errorf("leader still applying earlier terms: %w", ErrNoLeader)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// holdsOnceCaughtUp runs holds, which looks for an instance in this
// leader's FSM, and when it is not there while the leader's post-election
// barrier is not yet applied, waits for the barrier and looks again. Until
// then the FSM may lack what was acknowledged before (a leader restarted
// and elected again holds only its snapshot, even of its own writes), and
// "not found" must not be answered from it. The error is
// waitLeaderCaughtUp's.
func (n *Node) holdsOnceCaughtUp(holds func() bool) (bool, error) {
	if holds() {
		return true, nil
	}
	if n.leaderCaughtUp() {
		return false, nil
	}
	if err := n.waitLeaderCaughtUp(); err != nil {
		return false, err
	}
	return holds(), nil
}

// scanLogMode looks, once at start, for set-mode commands in the log after
// what the FSM holds. After a restart the FSM holds only the latest
// snapshot: Raft applies the entries after it only once a leader's commit
// index says they are committed, so a node restarted without a leader would
// otherwise keep the snapshot's mode. If the snapshot was taken in AP and
// the cluster went CP since, that node would acknowledge writes without
// quorum (AP fallback) in a CP cluster.
//
// The rule is the conservative one: until the node has caught up, it acts
// CP if the FSM or any set-mode entry of its log not applied yet says CP.
// Taking the latest entry instead would be wrong: the log does not record
// how far it is committed, and a set-mode ap at its end may be an entry a
// deposed leader appended that never committed, after a committed cp. The
// price is availability, never safety: a node whose snapshot or log tail
// says CP while the cluster is back in AP refuses writes while cut off,
// until it catches up with a leader.
//
// The scan reads the whole log, and starts before Raft restores the
// snapshot (startLogModeScan), so that the two overlap: at a million
// instances the log since the snapshot holds a quarter of a million
// entries, and reading them one by one after the restore took 2.4-3.8 s
// of a restart's 16-21. Which entries the FSM holds is known only after
// the restore, so the scan keeps the last set-mode cp of the whole log,
// and unappliedCP compares it with the applied index: a cp after it exists
// exactly when the last one is after it.
func (n *Node) scanLogMode(lastCP uint64) {
	if lastCP == 0 {
		return
	}
	n.logCP.Store(lastCP)
	if n.unappliedCP() && *n.mode.Load() == ModeAP {
		n.log.Warn("the log holds a set-mode cp not applied yet: acting cp until caught up with a leader",
			"set_mode_index", lastCP, "applied_index", n.fsm.AppliedIndex())
	}
}

// startLogModeScan reads the log for set-mode cp commands in the
// background; the returned function waits for the scan and gives the index
// of the last one (0: none, or the log could not be read, which the
// warning says).
func (n *Node) startLogModeScan() (wait func() uint64) {
	done := make(chan uint64, 1)
	go func() { done <- n.lastLogCP() }()
	return func() uint64 { return <-done }
}

// lastLogCP is the index of the last set-mode cp command in the log, 0 when
// there is none.
func (n *Node) lastLogCP() uint64 {
	first, err := n.deps.logs.FirstIndex()
	if err != nil {
		n.log.Warn("reading the log for mode changes failed", "error", err)
		return 0
	}
	last, err := n.deps.logs.LastIndex()
	if err != nil {
		n.log.Warn("reading the log for mode changes failed", "error", err)
		return 0
	}
	var cpAt uint64
	for i := max(first, 1); i <= last; i++ {
		var l raft.Log
		if err := n.deps.logs.GetLog(i, &l); err != nil || l.Type != raft.LogCommand {
			continue // not a command, or compacted meanwhile (the snapshot covers it)
		}
		if mode, ok := fsm.ModeOf(l.Data); ok && mode == ModeCP {
			cpAt = i
		}
	}
	return cpAt
}

// unappliedCP reports whether a set-mode cp found by scanLogMode is still
// the node's best knowledge of the mode: it has not caught up, and its FSM
// has not applied that index. Once the FSM applied it, the FSM holds a
// committed prefix at least that long (the same entry, or the one a leader
// replaced it with), so its mode rules; once caught up, it rules anyway.
func (n *Node) unappliedCP() bool {
	idx := n.logCP.Load()
	if idx == 0 {
		return false
	}
	if n.Ready() || n.fsm.AppliedIndex() >= idx {
		n.logCP.CompareAndSwap(idx, 0) // settled: Mode is a plain load again
		return false
	}
	return true
}
