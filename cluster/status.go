package cluster

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/opapi"
)

// Status is a node's view of itself and the cluster, for /v1/status; the
// wire type lives in opapi, shared with every reader.
type Status = opapi.NodeStatus

// Status reports the node's Raft and registry state.
func (n *Node) Status() Status {
	stats := n.raft.Stats()
	u := func(k string) uint64 { v, _ := strconv.ParseUint(stats[k], 10, 64); return v }
	st := Status{
		Node:              n.cfg.NodeID,
		ClusterID:         n.ClusterID(),
		State:             n.raft.State().String(),
		Leader:            n.LeaderID(),
		LeaderHTTPAddr:    n.leaderHTTP(),
		Term:              n.raft.CurrentTerm(),
		CommitIndex:       n.raft.CommitIndex(),
		AppliedIndex:      n.raft.AppliedIndex(),
		LastLogIndex:      n.raft.LastIndex(),
		LastSnapshotIndex: u("last_snapshot_index"),
		SnapshotThreshold: n.raft.ReloadableConfig().SnapshotThreshold,
		Mode:              n.Mode(),
		Quorum:            n.HasQuorum(),
		Ready:             n.Ready(),
		ReadGate:          n.ReadGate(),
		BootLogIndex:      n.rd.bootIndex,
		ReadyAfterMs:      n.rd.readyMs.Load(),
		ReadGateCloses:    n.GateCloses(),
		QuorumLost:        n.QuorumLost(),
		Fallback:          n.InFallback(),
		JournalEntries:    n.fb.journal.Len(),
		JournalBytes:      n.fb.journal.Size(),
		JournalRefused:    n.fb.refused.Load(),
		LogBytes:          n.deps.logSize(),
	}
	st.AppliedEntries, st.AppliedBytes = n.fsm.AppliedVolume()
	st.Packing = n.packingAllowed()
	st.PackedEntries, st.PackedWrites = n.line.entries.Load(), n.line.writes.Load()
	st.LineWaits, st.LineWaitsFull = n.line.waits.Load(), n.line.waitsFull.Load()
	st.CommandsSinceSnapshot = n.fsm.CommandsSinceSnapshot()
	n.diskStatus(&st)
	if first, err := n.deps.logs.FirstIndex(); err == nil {
		st.FirstLogIndex = first
	}
	if lc := n.raft.LastContact(); !lc.IsZero() {
		st.LastContactMs = time.Since(lc).Milliseconds()
	}
	n.Read(func(r *fsm.Registry) {
		st.Instances = r.Count()
		st.Applications = len(r.AppNames())
		st.RegistryVersion = r.Version()
	})
	return st
}

// HasQuorum reports whether this node is in touch with a leader that holds
// a quorum: the leader itself (raft steps down when it loses its lease), or
// a follower that heard from the leader within the leader lease.
func (n *Node) HasQuorum() bool {
	switch n.raft.State() {
	case raft.Leader:
		return true
	case raft.Follower:
		if n.LeaderID() == "" {
			return false
		}
		return time.Since(n.raft.LastContact()) <= n.cfg.LeaderLeaseTimeout
	}
	return false
}
