package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
)

// A node cut off from its leader cannot tell whether it was removed while
// it was out of reach: Raft does not tell a removed follower, and the
// leader's own word (tellMembership) does not reach a node it cannot reach.
// In AP mode such a node would acknowledge writes into a journal that no
// cluster replays. So before it journals a write it asks its peers
// (memberCheck): a peer in touch with a leader whose configuration lacks
// this node settles it, and the node refuses writes from then on. A node
// that reaches no peer in touch takes the write (that is AP's promise);
// should it turn out to have been removed, it learns so from the first
// peer it reaches again and hands its journal to that peer's leader
// (fallback.deliver), so no acknowledged write is lost either way.

// memberCheckTTL is how long a peer's word on this node's membership is
// taken as current.
const memberCheckTTL = time.Second

// memberCheckTimeout bounds one round of questions to the peers.
const memberCheckTimeout = 500 * time.Millisecond

// memberCheck holds the latest word of the peers on this node's
// membership.
type memberCheck struct {
	mu sync.Mutex
	at time.Time // when the peers were last asked
	// leaderHTTP is the HTTP address of the leader of the cluster that
	// removed this node, as a peer in touch named it.
	leaderHTTP string
}

// memberView answers a peer that asks whether id is a member.
func (n *Node) memberView(id string) (nodeapi.MemberView, error) {
	servers, err := n.servers()
	if err != nil {
		return nodeapi.MemberView{}, err
	}
	return nodeapi.MemberView{ID: id, Member: hasServer(servers, id), InTouch: n.HasQuorum(),
		LeaderHTTP: n.leaderHTTP()}, nil
}

// confirmMember asks the peers, at most once per memberCheckTTL, whether
// this node is still a member, and answers ErrRemoved when a peer in touch
// with a leader says it is not.
func (n *Node) confirmMember(ctx context.Context) error {
	n.refreshMembership(ctx)
	return n.memberState()
}

// refreshMembership asks the peers whether this node is a member, unless
// they were asked less than memberCheckTTL ago.
func (n *Node) refreshMembership(ctx context.Context) {
	mc := &n.mcheck
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if time.Since(mc.at) >= memberCheckTTL {
		n.askPeers(ctx)
		mc.at = time.Now()
	}
}

// askPeers asks every peer this node knows of (its own configuration's
// members with an HTTP address on record) at once and acts on the first
// word of a peer in touch with a leader. No such word changes nothing.
// mcheck.mu must be held.
func (n *Node) askPeers(ctx context.Context) {
	servers, err := n.servers()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, memberCheckTimeout)
	defer cancel()
	views := make(chan nodeapi.MemberView, len(servers))
	asked := 0
	for _, s := range servers {
		if string(s.ID) == n.cfg.NodeID {
			continue
		}
		addr := n.peerHTTP(string(s.ID))
		if addr == "" {
			continue
		}
		asked++
		go func(addr string) {
			v, err := n.peers().MemberView(ctx, addr, n.cfg.NodeID)
			if err != nil || !v.InTouch {
				v = nodeapi.MemberView{}
			}
			views <- v
		}(addr)
	}
	for range asked {
		select {
		case v := <-views:
			if v.ID == "" {
				continue
			}
			n.mcheck.leaderHTTP = v.LeaderHTTP
			_ = n.setMembership(nodeapi.Membership{ID: n.cfg.NodeID, Member: v.Member})
			return
		case <-ctx.Done():
			return
		}
	}
}

// peerHTTP is member id's HTTP address: from its record in the FSM, else in
// the durable state (a node restarted without a leader holds only its
// snapshot in the FSM, and a removed node never hears from a leader again),
// else from the initial cluster list.
func (n *Node) peerHTTP(id string) string {
	if m, ok := n.memberRecord(id); ok && m.HTTPAddr != "" {
		return m.HTTPAddr
	}
	var addr string
	n.ReadDurable(func(r *fsm.Registry) {
		if m, ok := r.Member(id); ok {
			addr = m.HTTPAddr
		}
	})
	if addr != "" {
		return addr
	}
	return n.initialMember(id).HTTPAddr
}

// removedLeader is the HTTP address of the leader of the cluster a peer
// said removed this node, "" when no peer said so.
func (n *Node) removedLeader() string {
	if !n.removed.Load() {
		return ""
	}
	n.mcheck.mu.Lock()
	defer n.mcheck.mu.Unlock()
	return n.mcheck.leaderHTTP
}

// errRemovedNoLeader is a delivery attempt with no leader to deliver to.
var errRemovedNoLeader = fmt.Errorf("removed, and no peer named a leader: %w", ErrNoLeader)
