package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
	"github.com/heureka-registry/heureka/opapi"
)

// MemberInfo describes one member for the operator API.
type MemberInfo = opapi.Member

// Members lists the Raft configuration with each member's HTTP address.
func (n *Node) Members() ([]MemberInfo, error) {
	servers, err := n.servers()
	if err != nil {
		return nil, err
	}
	leader := n.LeaderID()
	var out []MemberInfo
	n.fsm.Read(func(r *fsm.Registry) {
		for _, s := range servers {
			m, ok := r.Member(string(s.ID))
			if !ok {
				m = n.initialMember(string(s.ID))
			}
			out = append(out, MemberInfo{ID: string(s.ID), RaftAddr: string(s.Address), HTTPAddr: m.HTTPAddr,
				Voter: s.Suffrage == raft.Voter, Leader: string(s.ID) == leader})
		}
	})
	return out, nil
}

// Join admits a node as a voter (on the leader; forwarded otherwise). A
// node that is already a member with the same addresses is left alone; one
// whose id or Raft address is taken by a stale entry (a node that came back
// at another address, or under another id) replaces it, but only while that
// entry fails the leader's heartbeats: the entry of a live member, or the
// leader's own, is kept and the join refused (ErrMemberConflict), since
// replacing it would take a working node out.
func (n *Node) Join(ctx context.Context, m fsm.Member) error {
	if err := checkJoin(m); err != nil {
		return err
	}
	return n.leaderCall(ctx, nodeapi.PathJoin, m, func() error { return n.joinLocal(ctx, m) })
}

// checkJoin refuses a join request that names no member or addresses no
// node can dial; the leader checks again what a follower forwards.
func checkJoin(m fsm.Member) error {
	if err := CheckMemberID(m.ID); err != nil {
		return fmt.Errorf("join: %v: %w", err, fsm.ErrBadCommand)
	}
	if err := CheckDialable(m.RaftAddr); err != nil {
		return fmt.Errorf("join: raft address %v: %w", err, fsm.ErrBadCommand)
	}
	if err := CheckDialable(m.HTTPAddr); err != nil {
		return fmt.Errorf("join: http address %v: %w", err, fsm.ErrBadCommand)
	}
	return nil
}

// Remove takes a member out of the cluster.
func (n *Node) Remove(ctx context.Context, id string) error {
	return n.leaderCall(ctx, nodeapi.PathRemove, fsm.Member{ID: id}, func() error { return n.removeLocal(ctx, id) })
}

func (n *Node) leaderCall(ctx context.Context, path string, body any, local func() error) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	for {
		if n.IsLeader() {
			if err := local(); !errors.Is(err, ErrNotLeader) {
				return err
			}
		}
		if err := n.forwardJSON(ctx, path, body); !errors.Is(err, ErrNotLeader) {
			return err
		}
	}
}

func (n *Node) joinLocal(_ context.Context, m fsm.Member) error {
	if err := checkJoin(m); err != nil {
		return err
	}
	servers, err := n.leaderServers()
	if err != nil {
		return err
	}
	// Every conflict is checked before any entry is replaced, so that a
	// refused join leaves the configuration as it was.
	present := false
	var stale []raft.Server
	for _, s := range servers {
		sameID, sameAddr := string(s.ID) == m.ID, string(s.Address) == m.RaftAddr
		switch {
		case sameID && sameAddr:
			present = true
		case (sameID || sameAddr) && string(s.ID) == n.cfg.NodeID:
			return fmt.Errorf("join %s at %s: the leader is %s at %s: %w", m.ID, m.RaftAddr, s.ID, s.Address, ErrMemberConflict)
		case (sameID || sameAddr) && !n.health.isFailing(s.ID):
			return fmt.Errorf("join %s at %s: member %s at %s answers heartbeats (remove it first if it is to go): %w",
				m.ID, m.RaftAddr, s.ID, s.Address, ErrMemberConflict)
		case sameID || sameAddr:
			stale = append(stale, s)
		}
	}
	for _, s := range stale {
		n.log.Info("removing stale member before join", "id", s.ID, "addr", s.Address)
		if err := n.committed(n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout)); err != nil {
			return fmt.Errorf("remove stale member %s: %w", s.ID, mapRaftErr(err))
		}
		if string(s.ID) != m.ID {
			if err := n.applyLocalCmd(fsm.CmdRemoveMember, &fsm.KeyBody{ID: string(s.ID)}); err != nil {
				return fmt.Errorf("forget stale member %s: %w", s.ID, err)
			}
		}
	}
	if !present {
		if err := n.committed(n.raft.AddVoter(raft.ServerID(m.ID), raft.ServerAddress(m.RaftAddr), 0, n.cfg.ApplyTimeout)); err != nil {
			return fmt.Errorf("add voter %s: %w", m.ID, mapRaftErr(err))
		}
		n.log.Info("member joined", "id", m.ID, "raft_addr", m.RaftAddr, "http_addr", m.HTTPAddr)
	}
	if err := n.applyLocalCmd(fsm.CmdSetMember, &m); err != nil {
		return err
	}
	if m.ID != n.cfg.NodeID {
		n.tellMembership(nodeapi.Membership{ID: m.ID, Member: true}, m.HTTPAddr)
	}
	return nil
}

// removeLocal takes id out of the configuration and forgets its record. A
// member already out of the configuration whose record is still held only
// has its record dropped, and the removal counts as done.
func (n *Node) removeLocal(_ context.Context, id string) error {
	servers, err := n.leaderServers()
	if err != nil {
		return err
	}
	if id == n.cfg.NodeID && hasServer(servers, id) {
		// A leader that takes itself out steps down before it can record
		// the removal: it hands leadership over instead, and the request,
		// answered ErrNotLeader, goes to the next leader, which does both.
		if len(servers) == 1 {
			return fmt.Errorf("remove %s: the only member: %w", id, ErrMemberConflict)
		}
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			return fmt.Errorf("remove %s: hand leadership over: %w", id, mapRaftErr(err))
		}
		return ErrNotLeader
	}
	if hasServer(servers, id) {
		if err := n.committed(n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout)); err != nil {
			return fmt.Errorf("remove member %s: %w", id, mapRaftErr(err))
		}
		n.tellMembership(nodeapi.Membership{ID: id}, n.peerHTTP(id))
	} else if _, ok := n.memberRecord(id); !ok {
		return fmt.Errorf("remove %q: %w", id, ErrUnknownMember)
	}
	err = n.applyLocalCmd(fsm.CmdRemoveMember, &fsm.KeyBody{ID: id})
	n.log.Info("member removed", "id", id)
	return err
}

// tellMembership tells the member m.ID, after the leader changed its
// membership, whether it is in the configuration now (setMembership), and
// does so before the change is answered: an operator who removes a node
// and then stops it must not have it acknowledge writes in between. It is
// best effort: a member that cannot be reached is not serving clients
// either.
func (n *Node) tellMembership(m nodeapi.Membership, httpAddr string) {
	if httpAddr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := n.peers().PostJSON(ctx, httpAddr, nodeapi.PathMembership, m)
	switch {
	case err != nil && !m.Member:
		n.log.Warn("could not tell a removed member it is out", "id", m.ID, "http_addr", httpAddr, "error", err)
	case err != nil:
		// A node joining at its start may not serve HTTP yet, and one
		// that was never removed has nothing to learn.
		n.log.Debug("could not tell an admitted member", "id", m.ID, "http_addr", httpAddr, "error", err)
	}
}

// memberRecord is the registry's record of member id.
func (n *Node) memberRecord(id string) (m fsm.Member, ok bool) {
	n.fsm.Read(func(r *fsm.Registry) { m, ok = r.Member(id) })
	return m, ok
}

// servers reads the members of the Raft configuration.
func (n *Node) servers() ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}

// leaderServers is servers on the leader, ErrNotLeader elsewhere: a
// membership change starts from the leader's configuration.
func (n *Node) leaderServers() ([]raft.Server, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	return n.servers()
}

// hasServer reports whether id is one of servers.
func hasServer(servers []raft.Server, id string) bool {
	return slices.ContainsFunc(servers, func(s raft.Server) bool { return string(s.ID) == id })
}

// applyLocalCmd encodes a command and applies it on the leader.
func (n *Node) applyLocalCmd(t fsm.CmdType, body any) error {
	entry, err := fsm.Encode(t, body)
	if err != nil {
		return err
	}
	_, err = n.applyLocal(entry, false)
	return err
}

func mapRaftErr(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return fmt.Errorf("%v: %w", err, ErrNotLeader)
	}
	return err
}

// joinLoop asks the --join address for admission until it succeeds.
func (n *Node) joinLoop() {
	defer n.wg.Done()
	body, _ := json.Marshal(n.selfMember())
	for attempt := 1; ; attempt++ {
		err := n.askToJoin(body)
		if err == nil {
			n.log.Info("joined cluster", "via", n.cfg.Join)
			return
		}
		n.log.Warn("join attempt failed", "via", n.cfg.Join, "attempt", attempt, "error", err)
		select {
		case <-n.stopCh:
			return
		case <-time.After(time.Second):
		}
	}
}

func (n *Node) askToJoin(body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url(n.cfg.Join, "/v1/members"), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(nodeapi.CallerHeader, n.cfg.NodeID) // named in the refusal a wrong secret gets
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("join answered %s", resp.Status)
	}
	return nil
}

// initialMember returns the --initial-cluster entry for id, if any: the
// addresses a node has before its own record reaches the log.
func (n *Node) initialMember(id string) fsm.Member {
	for _, m := range n.cfg.InitialCluster {
		if m.ID == id {
			return m
		}
	}
	return fsm.Member{}
}
