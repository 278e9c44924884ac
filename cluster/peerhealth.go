package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// peerHealth is what this node, while it leads, has seen of each other
// server's heartbeats: Raft reports a failed heartbeat and its recovery
// (observations from the leader's replication). A join may replace the
// entry of a member only while that member is failing: an entry that still
// answers heartbeats belongs to a live node, and replacing it on a typo'd
// address or id would take a working member out.
type peerHealth struct {
	mu      sync.Mutex
	failing map[raft.ServerID]bool
}

func newPeerHealth() *peerHealth { return &peerHealth{failing: map[raft.ServerID]bool{}} }

// isFailing reports whether the last heartbeat this leader sent id failed.
func (h *peerHealth) isFailing(id raft.ServerID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failing[id]
}

// run follows r's heartbeat observations until stop closes. A change of
// leader starts over: what an earlier term saw says nothing of now, and a
// dead server fails its first heartbeat within a tenth of the heartbeat
// timeout.
func (h *peerHealth) run(r *raft.Raft, stop <-chan struct{}) {
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(obs)
	defer r.DeregisterObserver(obs)
	for {
		select {
		case <-stop:
			return
		case o := <-ch:
			h.mu.Lock()
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				h.failing[d.PeerID] = true
			case raft.ResumedHeartbeatObservation:
				delete(h.failing, d.PeerID)
			case raft.LeaderObservation:
				clear(h.failing)
			}
			h.mu.Unlock()
		}
	}
}
