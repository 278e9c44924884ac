package cluster

import (
	"errors"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

// TestMem_JoinNamingTheLeaderIsRefused checks that a join whose Raft
// address is the leader's under another id, or whose id is the leader's at
// another address, is refused with ErrMemberConflict, on the leader and
// through a follower's forward, and leaves the configuration and the
// leadership as they were: taken for a stale entry, it would remove the
// leader. A join without an id, sent straight to the leader's node-to-node
// endpoint (backend.Join), is bad input, not a Raft error.
func TestMem_JoinNamingTheLeaderIsRefused(t *testing.T) {
	c := startMemCluster(t, 3, ModeCP, nil)
	leader := c.leader()
	follower := c.followers()[0]
	for _, m := range []fsm.Member{
		{ID: "intruder", RaftAddr: leader.self.RaftAddr, HTTPAddr: "127.0.0.1:18999"},
		{ID: leader.self.ID, RaftAddr: "127.0.0.1:17999", HTTPAddr: "127.0.0.1:18999"},
	} {
		for _, via := range []*memNode{leader, follower} {
			if err := via.Join(t.Context(), m); !errors.Is(err, ErrMemberConflict) {
				t.Errorf("join %+v through %s: %v, want ErrMemberConflict", m, via.ID(), err)
			}
		}
	}
	if err := (backend{leader.Node}).Join(t.Context(), fsm.Member{}); !errors.Is(err, fsm.ErrBadCommand) {
		t.Errorf("join without an id at the leader's endpoint: %v, want ErrBadCommand", err)
	}
	if now := c.leader(); now.ID() != leader.ID() {
		t.Fatalf("leader changed from %s to %s", leader.ID(), now.ID())
	}
	servers, err := leader.servers()
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 3 {
		t.Fatalf("configuration has %d servers, want the 3 it started with: %+v", len(servers), servers)
	}
	for _, s := range servers {
		mn := c.byID(string(s.ID))
		if mn == nil || string(s.Address) != mn.self.RaftAddr {
			t.Errorf("configuration holds %s at %s, not a member it started with", s.ID, s.Address)
		}
	}
}

// byID is the node with Raft server id id, or nil.
func (c *memCluster) byID(id string) *memNode {
	for _, mn := range c.nodes {
		if mn.self.ID == id {
			return mn
		}
	}
	return nil
}
