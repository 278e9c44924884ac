package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/tick"
)

// The readiness gate. After a start the FSM holds only the latest snapshot:
// Raft re-applies the log after it only once a leader's commit index says
// the entries are committed. Until then the registry is partial (empty after
// a kill -9 with no snapshot yet), so registry reads must not be answered
// from it. A node opens its gate once it caught up with a leader:
//   - as leader, once its post-election barrier applied everything its log
//     holds (which includes every entry it held at start);
//   - as follower, once it applied the index a leader reports for a
//     linearizable read (ReadBarrier), which covers every committed entry.
//
// The gate latches: a node that caught up once stays ready; later lag or
// quorum loss is handled by the ordinary read rules.
//
// While the gate is closed, a node cut off from the quorum in AP mode serves
// its durable state instead: the snapshot plus every command its log holds,
// applied to a private copy (durableView), marked stale by httpapi.

// Read gate states, as /v1/status and /metrics show them.
const (
	// GateOpen: caught up; reads are served as usual.
	GateOpen = "open"
	// GateDurable: not caught up, cut off from the quorum in AP mode; reads
	// are served from the durable state and marked stale.
	GateDurable = "durable_stale"
	// GateClosed: catching up; registry reads are refused.
	GateClosed = "closed"
)

// readyPoll is how often a node that has not caught up checks again.
const readyPoll = 20 * time.Millisecond

// readiness is the gate's state.
type readiness struct {
	started time.Time
	// bootIndex is the last log index found at start.
	bootIndex uint64
	ready     atomic.Bool
	readyCh   chan struct{} // closed when ready
	readyMs   atomic.Int64  // milliseconds from start until ready

	// leaderTerm is the term in which this node, as leader, completed its
	// post-election barrier: in that term its FSM holds every committed
	// entry. 0 while it does not lead.
	leaderTerm atomic.Uint64

	mu      sync.RWMutex
	durable *fsm.Registry // built on first use while the gate is closed

	// holds keep the gate closed until each closes (HoldReads).
	holdMu sync.Mutex
	holds  []<-chan struct{}
}

// HoldReads keeps the read gate closed until done closes, on top of the
// catching up: a node that copies an Eureka ring's registry at start holds
// reads until the copy is in. Call it before the gate opens (right after
// New); once open, the gate stays open.
func (n *Node) HoldReads(done <-chan struct{}) {
	n.rd.holdMu.Lock()
	n.rd.holds = append(n.rd.holds, done)
	n.rd.holdMu.Unlock()
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

// Ready reports whether this node has caught up since it started (see the
// readiness gate above). Until then its registry may be partly replayed.
func (n *Node) Ready() bool { return n.rd.ready.Load() }

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
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.rd.readyCh:
		return true
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
	case n.Mode() == ModeAP && n.QuorumLost():
		return GateDurable
	}
	return GateClosed
}

// watchReady polls until the node caught up, then opens the gate.
func (n *Node) watchReady() {
	defer n.wg.Done()
	tick.Until(n.stopCh, readyPoll, func() bool {
		if n.rd.held() || !n.caughtUp() {
			return false
		}
		ms := time.Since(n.rd.started).Milliseconds()
		n.rd.readyMs.Store(max(ms, 1))
		n.rd.ready.Store(true)
		close(n.rd.readyCh)
		n.rd.mu.Lock()
		n.rd.durable = nil // no longer needed: reads follow the FSM now
		n.rd.mu.Unlock()
		n.log.Info("caught up: serving registry reads", "after_ms", ms,
			"boot_log_index", n.rd.bootIndex, "applied_index", n.raft.AppliedIndex())
		return true
	})
}

// CaughtUp reports whether this node's FSM holds everything a leader
// committed (the read gate's condition, without its holds). On a follower
// it asks the leader for its commit index.
func (n *Node) CaughtUp() bool { return n.caughtUp() }

// caughtUp reports whether the FSM holds everything a leader committed.
func (n *Node) caughtUp() bool {
	if n.LeaderID() == "" {
		return false
	}
	if n.IsLeader() {
		return n.leaderCaughtUp() && n.raft.AppliedIndex() >= n.rd.bootIndex
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
	if n.Ready() {
		n.Read(fn)
		return
	}
	if n.readOverlay(fn) {
		return
	}
	n.rd.mu.Lock()
	if n.rd.durable == nil {
		n.rd.durable = n.buildDurable()
	}
	reg := n.rd.durable
	n.rd.mu.Unlock()
	n.rd.mu.RLock()
	defer n.rd.mu.RUnlock()
	fn(reg)
}

// readBase returns a private copy of the registry new local state should
// start from: the FSM once ready, else the durable state, so that an AP
// fallback overlay made right after a start is never partial.
func (n *Node) readBase() *fsm.Registry {
	if !n.Ready() {
		n.rd.mu.Lock()
		defer n.rd.mu.Unlock()
		if n.rd.durable == nil {
			n.rd.durable = n.buildDurable()
		}
		return n.rd.durable.Clone()
	}
	var reg *fsm.Registry
	n.fsm.Read(func(r *fsm.Registry) { reg = r.Clone() })
	return reg
}

// buildDurable copies the FSM and applies to the copy every command of the
// local log after what the FSM applied. The entries past the commit index
// may never commit; in AP mode a stale answer may show them.
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
		var l raft.Log
		if err := n.deps.logs.GetLog(i, &l); err != nil {
			continue // compacted: the snapshot the FSM holds covers it
		}
		if l.Type != raft.LogCommand {
			continue
		}
		cmd, err := fsm.Decode(l.Data)
		if err != nil {
			continue
		}
		_ = reg.Apply(i, cmd, &fsm.Change{})
		applied++
	}
	n.log.Info("built the durable view for reads while catching up",
		"from_index", from, "to_index", last, "commands", applied, "instances", reg.Count())
	return reg
}
