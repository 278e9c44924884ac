package cluster

import (
	"fmt"
	"net"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/limits"
)

// checkFromPeer is what the leader checks of an encoded command a peer
// handed it (/internal/v1/apply and apply-batch) before it appends it.
// Followers check the writes their clients send, but the leader does not
// take their word for it: a command from a peer passes the same checks a
// command from a client passes here (with Config.StrictInput, package
// limits), and only the command types a follower ever forwards are taken
// at all. Evictions, renewal batches and member removals are the leader's
// own work, so a peer sending one is refused.
func (n *Node) checkFromPeer(entry []byte) error {
	cmd, err := fsm.Decode(entry)
	if err != nil {
		return err
	}
	switch t := cmd.Type &^ fsm.CmdIgnoreUnknown; t {
	case fsm.CmdRegister, fsm.CmdCancel, fsm.CmdMetadata:
	case fsm.CmdSetOverride, fsm.CmdDeleteOverride:
		if s := cmd.Body.(*fsm.OverrideBody).Status; !fsm.ValidStatus(s) {
			return fmt.Errorf("%s from a peer: status %q: %w", t, s, fsm.ErrBadCommand)
		}
	case fsm.CmdSetMode:
		if m := cmd.Body.(*fsm.ModeBody).Mode; m != ModeAP && m != ModeCP {
			return fmt.Errorf("%s from a peer: mode %q: %w", t, m, fsm.ErrBadCommand)
		}
		return nil
	case fsm.CmdSetMember:
		return n.checkMemberRecord(*cmd.Body.(*fsm.Member))
	default:
		return fmt.Errorf("%s is the leader's own command; a peer may not send it: %w", t, fsm.ErrBadCommand)
	}
	if n.cfg.StrictInput {
		if err := limits.CheckCommand(cmd); err != nil {
			return fmt.Errorf("%s from a peer: %w", cmd.Type&^fsm.CmdIgnoreUnknown, err)
		}
	}
	return nil
}

// checkMemberRecord admits a member's address record (a node recording its
// own addresses, see registerSelf) only for a server of the Raft
// configuration at the Raft address the configuration has for it: a peer
// cannot invent members or point another member's forwarded writes
// elsewhere by its Raft address.
func (n *Node) checkMemberRecord(m fsm.Member) error {
	if err := CheckMemberID(m.ID); err != nil {
		return fmt.Errorf("member record: %v: %w", err, fsm.ErrBadCommand)
	}
	if _, _, err := net.SplitHostPort(m.HTTPAddr); err != nil {
		return fmt.Errorf("member record %s: http address %q: %w", m.ID, m.HTTPAddr, fsm.ErrBadCommand)
	}
	servers, err := n.servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if string(s.ID) == m.ID {
			if string(s.Address) != m.RaftAddr {
				return fmt.Errorf("member record %s at %s: the configuration has it at %s: %w", m.ID, m.RaftAddr, s.Address, fsm.ErrBadCommand)
			}
			return nil
		}
	}
	return fmt.Errorf("member record %s: not in the configuration: %w", m.ID, ErrUnknownMember)
}
