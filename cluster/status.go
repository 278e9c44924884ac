package cluster

import (
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// Status is a node's view of itself and the cluster, for /v1/status.
type Status struct {
	Node              string `json:"node"`
	State             string `json:"state"`
	Leader            string `json:"leader"`
	LeaderHTTPAddr    string `json:"leader_http_addr"`
	Term              uint64 `json:"term"`
	CommitIndex       uint64 `json:"commit_index"`
	AppliedIndex      uint64 `json:"applied_index"`
	LastLogIndex      uint64 `json:"last_log_index"`
	FirstLogIndex     uint64 `json:"first_log_index"`
	LastSnapshotIndex uint64 `json:"last_snapshot_index"`
	LastContactMs     int64  `json:"last_contact_ms"`
	Mode              string `json:"mode"`
	Quorum            bool   `json:"quorum"`
	// Ready is set once the node caught up after starting (see Node.Ready).
	Ready bool `json:"ready"`
	// QuorumLost is set once the node has been without quorum for longer
	// than an election takes; Fallback when it then serves AP fallback (or
	// still holds journal writes to replay).
	QuorumLost     bool  `json:"quorum_lost"`
	Fallback       bool  `json:"fallback"`
	JournalEntries int   `json:"journal_entries"`
	JournalBytes   int64 `json:"journal_bytes"`
	// JournalRefused counts writes refused since start because the journal
	// was full.
	JournalRefused  uint64 `json:"journal_refused"`
	Instances       int    `json:"instances"`
	Applications    int    `json:"applications"`
	RegistryVersion uint64 `json:"registry_version"`
	LogBytes        int64  `json:"log_bytes"`
	// AppliedEntries and AppliedBytes count the commands this node applied
	// since it started, and their encoded size.
	AppliedEntries uint64 `json:"applied_entries"`
	AppliedBytes   uint64 `json:"applied_bytes"`
}

// Status reports the node's Raft and registry state.
func (n *Node) Status() Status {
	stats := n.raft.Stats()
	u := func(k string) uint64 { v, _ := strconv.ParseUint(stats[k], 10, 64); return v }
	st := Status{
		Node:              n.cfg.NodeID,
		State:             n.raft.State().String(),
		Leader:            n.LeaderID(),
		LeaderHTTPAddr:    n.leaderHTTP(),
		Term:              n.raft.CurrentTerm(),
		CommitIndex:       n.raft.CommitIndex(),
		AppliedIndex:      n.raft.AppliedIndex(),
		LastLogIndex:      n.raft.LastIndex(),
		LastSnapshotIndex: u("last_snapshot_index"),
		Mode:              n.Mode(),
		Quorum:            n.HasQuorum(),
		Ready:             n.Ready(),
		QuorumLost:        n.QuorumLost(),
		Fallback:          n.InFallback(),
		JournalEntries:    n.fb.journal.Len(),
		JournalBytes:      n.fb.journal.Size(),
		JournalRefused:    n.fb.refused.Load(),
		LogBytes:          n.store.LogSize(),
	}
	st.AppliedEntries, st.AppliedBytes = n.fsm.AppliedVolume()
	if first, err := n.store.Log.FirstIndex(); err == nil {
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
