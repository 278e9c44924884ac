package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

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
	for _, id := range []string{"a/b", "q?x", "h#1", "p%41", "sp ace"} {
		m := fsm.Member{ID: id, RaftAddr: "127.0.0.1:17998", HTTPAddr: "127.0.0.1:18998"}
		if err := leader.Join(t.Context(), m); !errors.Is(err, fsm.ErrBadCommand) {
			t.Errorf("join of id %q that no URL path can name: %v, want ErrBadCommand", id, err)
		}
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

// TestMem_JoinReplacesOnlyAMemberThatFailsHeartbeats checks the stale-entry
// replacement: a join that takes a live follower's Raft address (a typo'd
// address) or its id at another address is refused while the follower
// answers the leader's heartbeats, and goes through once it stops
// answering (a node gone for good), replacing that entry.
func TestMem_JoinReplacesOnlyAMemberThatFailsHeartbeats(t *testing.T) {
	c := startMemCluster(t, 3, ModeCP, nil)
	leader := c.leader()
	gone := c.followers()[0]
	byAddr := fsm.Member{ID: "m9", RaftAddr: gone.self.RaftAddr, HTTPAddr: "127.0.0.1:18999"}
	byID := fsm.Member{ID: gone.self.ID, RaftAddr: "127.0.0.1:17999", HTTPAddr: "127.0.0.1:18999"}
	for _, m := range []fsm.Member{byAddr, byID} {
		if err := leader.Join(t.Context(), m); !errors.Is(err, ErrMemberConflict) {
			t.Fatalf("join %+v while %s is live: %v, want ErrMemberConflict", m, gone.ID(), err)
		}
	}
	c.cutOff(gone)
	c.waitFor(5*time.Second, gone.ID()+" failing the leader's heartbeats", func() bool {
		return leader.health.isFailing(raft.ServerID(gone.self.ID))
	})
	if err := leader.Join(t.Context(), byAddr); err != nil {
		t.Fatalf("join %+v after %s stopped answering: %v", byAddr, gone.ID(), err)
	}
	servers, err := leader.servers()
	if err != nil {
		t.Fatal(err)
	}
	if hasServer(servers, gone.self.ID) || !hasServer(servers, byAddr.ID) {
		t.Fatalf("configuration after the replacement: %+v", servers)
	}
}

// TestMem_RemoveTheLeader checks that removing the leader, asked of the
// leader itself or of a follower, succeeds, and leaves a configuration and
// member records without it under a new leader. (The leader used to remove
// itself, step down before it recorded the removal, and the retry at the
// next leader answered "unknown member".)
func TestMem_RemoveTheLeader(t *testing.T) {
	for _, via := range []string{"leader", "follower"} {
		t.Run(via, func(t *testing.T) {
			c := startMemCluster(t, 3, ModeCP, nil)
			old := c.leader()
			ask := old
			if via == "follower" {
				ask = c.followers()[0]
			}
			if err := ask.Remove(t.Context(), old.ID()); err != nil {
				t.Fatalf("remove the leader %s through the %s: %v", old.ID(), via, err)
			}
			var next *memNode
			c.waitFor(5*time.Second, "a leader other than "+old.ID(), func() bool {
				for _, mn := range c.nodes {
					if mn != old && mn.IsLeader() {
						next = mn
						return true
					}
				}
				return false
			})
			servers, err := next.servers()
			if err != nil {
				t.Fatal(err)
			}
			_, kept := next.memberRecord(old.ID())
			if len(servers) != 2 || hasServer(servers, old.ID()) || kept {
				t.Fatalf("after removing %s: configuration %+v, record kept %v", old.ID(), servers, kept)
			}
		})
	}
}

// removedFollower starts an AP cluster holding KEPT/k-1 on every node and
// removes a follower (gone) from it.
func removedFollower(t *testing.T) (c *memCluster, leader, gone *memNode) {
	t.Helper()
	c = startMemCluster(t, 3, ModeAP, nil)
	leader = c.leader()
	mustApply(t, leader, registerEntry(t, "KEPT", "k-1"))
	gone = c.followers()[0]
	c.waitFor(2*time.Second, "KEPT/k-1 on "+gone.ID(), func() bool { return inFSM(gone.Node, "KEPT", "k-1") })
	if err := leader.Remove(t.Context(), gone.ID()); err != nil {
		t.Fatal(err)
	}
	return c, leader, gone
}

// TestMem_RemovedNodeTakesNoWrites checks that a node taken out of an AP
// cluster refuses writes and renewals (ErrRemoved) instead of counting its
// quorum as lost and acknowledging them into a fallback journal that no
// cluster would ever replay.
func TestMem_RemovedNodeTakesNoWrites(t *testing.T) {
	c, leader, gone := removedFollower(t)
	// Told by the leader: Raft itself does not tell a removed follower.
	if _, err := gone.Apply(t.Context(), registerEntry(t, "GHOST", "g-1")); !errors.Is(err, ErrRemoved) {
		t.Errorf("write on the removed node: %v, want ErrRemoved", err)
	}
	if err := gone.Renew(t.Context(), "KEPT", "k-1", 0); !errors.Is(err, ErrRemoved) {
		t.Errorf("renewal on the removed node: %v, want ErrRemoved", err)
	}
	// Also once it counts its quorum as lost, when it would otherwise
	// take writes into its AP journal.
	// It rides out a missing leader for a second first; as loseQuorum
	// does, the test moves its last quorum back instead of sleeping.
	c.waitFor(5*time.Second, gone.ID()+" out of touch with the leader", func() bool { return !gone.HasQuorum() })
	gone.fb.lastQuorum.Store(time.Now().Add(-time.Minute).UnixNano())
	c.waitFor(5*time.Second, gone.ID()+" counting its quorum as lost", gone.QuorumLost)
	if _, err := gone.Apply(t.Context(), registerEntry(t, "GHOST", "g-2")); !errors.Is(err, ErrRemoved) {
		t.Errorf("write on the removed node without quorum: %v, want ErrRemoved", err)
	}
	if n := gone.fb.journal.Len(); n != 0 {
		t.Errorf("the removed node journaled %d writes", n)
	}
	// Admitted again, it takes writes.
	if err := leader.Join(t.Context(), gone.self); err != nil {
		t.Fatalf("join %s again: %v", gone.ID(), err)
	}
	c.waitFor(5*time.Second, gone.ID()+" taking writes again", func() bool {
		_, err := gone.Apply(t.Context(), registerEntry(t, "BACK", "b-1"))
		return err == nil
	})
}
