package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
	"github.com/heureka-registry/heureka/opapi"
)

// Node-to-node HTTP is package nodeapi's: this file connects it to the node
// (the client a node forwards with, and the Backend behind its handler).

// InternalPrefix is where the node-to-node endpoints live.
const InternalPrefix = nodeapi.Prefix

// pathApply is the endpoint of one forwarded write (tests count its calls).
const pathApply = nodeapi.PathApply

// errUnreachable marks a forward that could not reach the leader at all,
// so it certainly was not applied and may be retried.
var errUnreachable = nodeapi.ErrUnreachable

// codes are the errors that keep their identity across a node-to-node call.
var codes = nodeapi.Codes{
	{Name: "not_found", Err: fsm.ErrInstanceNotFound},
	{Name: "not_leader", Err: ErrNotLeader},
	{Name: "no_leader", Err: ErrNoLeader},
	{Name: "bad_command", Err: fsm.ErrBadCommand},
	{Name: "unknown_member", Err: ErrUnknownMember},
	{Name: "member_conflict", Err: ErrMemberConflict},
	{Name: "no_quorum", Err: ErrNoQuorum},
	{Name: "disk_full", Err: ErrDiskFull},
	{Name: "other_cluster", Err: ErrOtherCluster},
}

// peers is the client for calls to other nodes; a failure that is not an
// error reply counts as no leader.
func (n *Node) peers() *nodeapi.Client {
	return &nodeapi.Client{HTTP: n.client, Scheme: n.cfg.httpScheme(), From: n.cfg.NodeID, Cluster: n.ClusterID(),
		Codes: codes, Unavailable: ErrNoLeader}
}

// noLeader makes a call that never reached the leader count as no leader,
// for callers that do not retry on their own.
func noLeader(err error) error {
	if errors.Is(err, errUnreachable) && !errors.Is(err, ErrNoLeader) {
		return fmt.Errorf("%w: %w", err, ErrNoLeader)
	}
	return err
}

// forwardApply sends a write to the leader at addr, with the writes
// forwarded alongside it (writeForwarder).
func (n *Node) forwardApply(ctx context.Context, addr string, entry []byte) (uint64, error) {
	return n.fwd.forward(ctx, addr, entry)
}

func (n *Node) forwardJSON(ctx context.Context, path string, v any) error {
	for {
		addr := n.leaderHTTP()
		if addr != "" && addr != n.cfg.HTTPAdvertise {
			err := n.peers().PostJSON(ctx, addr, path, v)
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, errUnreachable) {
				return err
			}
		} else if addr == n.cfg.HTTPAdvertise && n.IsLeader() {
			return ErrNotLeader // we became leader meanwhile: caller handles locally
		}
		if err := sleepCtx(ctx, n.stopCh); err != nil {
			return fmt.Errorf("forward %s: %w", path, ErrNoLeader)
		}
	}
}

// InternalHandler serves the node-to-node endpoints under InternalPrefix;
// status gives an error reply's HTTP status (httpapi's table).
func (n *Node) InternalHandler(status func(error) int) http.Handler {
	return nodeapi.Handler(backend{n}, nodeapi.HandlerConfig{Secret: n.cfg.ClusterSecret, Codes: codes, Status: status,
		Cluster: n.ClusterID, Log: n.log})
}

// backend is the node as the internal endpoints see it.
type backend struct{ n *Node }

func (b backend) Apply(entry []byte) (uint64, error) {
	if err := b.n.checkFromPeer(entry); err != nil {
		return 0, err
	}
	return b.n.applyLocal(entry, true)
}

// ApplyBatch appends the entries that pass checkFromPeer, and, when they
// are forwarded writes, checkHeld as a lone Apply does; the others get
// their refusal as their result. A replayed journal is not checked against
// the registry: an entry may change an instance that an earlier entry of
// the same sequence registers.
func (b backend) ApplyBatch(entries [][]byte, forwarded bool) ([]error, uint64, error) {
	if forwarded {
		// checkHeld waits for this leader's post-election barrier before
		// it answers "not found"; wait once for the batch, not once for
		// each entry.
		if err := b.n.waitLeaderCaughtUp(); err != nil {
			return nil, 0, err
		}
	}
	results := make([]error, len(entries))
	var ok [][]byte
	var at []int
	for i, e := range entries {
		err := b.n.checkFromPeer(e)
		if err == nil && forwarded {
			err = b.n.checkHeld(e)
		}
		if errors.Is(err, ErrNotLeader) {
			return nil, 0, err
		}
		if err != nil {
			results[i] = err
			continue
		}
		ok = append(ok, e)
		at = append(at, i)
	}
	if len(ok) == 0 {
		if b.n.raft.State() != raft.Leader {
			return nil, 0, ErrNotLeader
		}
		return results, 0, nil
	}
	res, idx, err := b.n.applyBatchLocal(context.Background(), ok)
	if err != nil {
		return nil, 0, err
	}
	for j, i := range at {
		results[i] = res[j]
	}
	return results, idx, nil
}

func (b backend) RenewBatch(batch []byte, kind nodeapi.RenewBatchKind) ([]byte, error) {
	reqs, err := decodeRenewBatch(batch)
	if err != nil {
		return nil, err
	}
	switch kind {
	case nodeapi.RenewAnswered:
		return b.n.recordAnswered(reqs)
	case nodeapi.RenewReplicated:
		for i := range reqs {
			reqs[i].Replicated = true
		}
	}
	return b.n.renewBatchLocal(reqs)
}

func (b backend) ReadIndex() (uint64, error) { return b.n.readIndexLocal() }

func (b backend) LeaseStatus() (opapi.LeaseStatus, error) {
	if !b.n.IsLeader() {
		return opapi.LeaseStatus{}, ErrNotLeader
	}
	return b.n.leases.status(time.Now()), nil
}

func (b backend) Join(ctx context.Context, m fsm.Member) error { return b.n.joinLocal(ctx, m) }

func (b backend) Remove(ctx context.Context, id string) error { return b.n.removeLocal(ctx, id) }

func (b backend) SetMembership(m nodeapi.Membership) error { return b.n.setMembership(m) }

func (b backend) MemberView(id string) (nodeapi.MemberView, error) { return b.n.memberView(id) }

func (b backend) SaveSnapshot(w io.Writer) error { return b.n.saveLocal(w) }

func (b backend) RestoreSnapshot(r io.Reader) error {
	if !b.n.IsLeader() {
		return ErrNotLeader
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxSnapshotBytes+1))
	if err != nil || len(data) > MaxSnapshotBytes {
		return fmt.Errorf("read snapshot: %w", ErrBadSnapshot)
	}
	return b.n.restoreLocal(data)
}
