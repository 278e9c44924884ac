package cluster

import (
	"context"
	"fmt"
	"time"

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
	if !n.IsLeader() {
		return 0, ErrNotLeader
	}
	// Until the post-election barrier completed, this leader may not have
	// applied entries an earlier leader acknowledged.
	for wait := time.Now().Add(n.cfg.ApplyTimeout); !n.leaderCaughtUp(); {
		if time.Now().After(wait) || !n.IsLeader() {
			return 0, fmt.Errorf("leader still applying earlier terms: %w", ErrNoLeader)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Writes are acknowledged only after the leader applied them, so its
	// applied index, read before confirming leadership, covers them all.
	idx := n.fsm.AppliedIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, fmt.Errorf("verify leader: %v: %w", err, ErrNoLeader)
	}
	return idx, nil
}
