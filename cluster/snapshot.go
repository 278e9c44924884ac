package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// Operator snapshots: a copy of the registry an operator downloads
// (GET /v1/snapshot) and restores into a running cluster (POST /v1/snapshot),
// in fsm's snapshot format. A save is taken on the leader after a barrier,
// so it holds every committed write; a restore runs on the leader through
// raft.Restore, which replaces the state on every member.

const (
	// MaxSnapshotBytes bounds a snapshot accepted for restore.
	MaxSnapshotBytes = 1 << 30
	// snapshotTimeout bounds a save or restore when the caller's context
	// has no deadline.
	snapshotTimeout = 2 * time.Minute
)

// ErrBadSnapshot marks a snapshot that cannot be restored (not heureka's
// format, truncated, too large). It also matches fsm.ErrBadSnapshot and
// fsm.ErrBadCommand, so the HTTP layer answers 400.
var ErrBadSnapshot = fmt.Errorf("%w: %w", fsm.ErrBadSnapshot, fsm.ErrBadCommand)

// SaveSnapshot writes the registry in fsm's snapshot format to w. Unless
// stale is set it is taken on the leader after a barrier (forwarded there
// from a follower), so it holds every write committed before the call;
// with stale it is what this node serves, which works without a leader
// (in AP fallback, the committed state and the journal's writes).
// Nothing is written to w unless the whole snapshot was taken.
func (n *Node) SaveSnapshot(ctx context.Context, w io.Writer, stale bool) error {
	ctx, cancel := withDefaultTimeout(ctx, snapshotTimeout)
	defer cancel()
	var buf bytes.Buffer
	if stale {
		// What this node serves: in AP fallback that includes the writes it
		// acknowledged into its journal, which a backup taken during an
		// outage must not leave out.
		var st *fsm.State
		if !n.readOverlay(func(r *fsm.Registry) { st = r.Export(n.fsm.AppliedIndex()) }) {
			st = n.fsm.Export()
		}
		if err := st.Encode(&buf); err != nil {
			return fmt.Errorf("encode snapshot: %w", err)
		}
	} else if err := n.snapshotCall(ctx, func() error { return n.saveLocal(&buf) }, func(addr string) error {
		if err := n.peers().FetchSnapshot(ctx, addr, &buf, MaxSnapshotBytes+1); err != nil {
			return err
		}
		if buf.Len() > MaxSnapshotBytes {
			// The fetch stops at the limit: what it holds is cut short,
			// and a backup that cannot be restored must not pass for one.
			return fmt.Errorf("the leader's snapshot is larger than %d bytes; save it on the leader itself", MaxSnapshotBytes)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	_, err := buf.WriteTo(w)
	return err
}

// RestoreSnapshot replaces the registry of the whole cluster with the
// snapshot read from r (on the leader; forwarded there from a follower).
// The cluster keeps its own members and mode: only the registry (instances,
// leases, the delta queue and versions) comes from the snapshot. The leader
// then gives every restored lease a full duration of grace, as after an
// election. It answers how many instances and applications the snapshot
// held; the file is decoded and checked once here, and once more on the
// leader when this node forwards it there.
func (n *Node) RestoreSnapshot(ctx context.Context, r io.Reader) (instances, apps int, err error) {
	ctx, cancel := withDefaultTimeout(ctx, snapshotTimeout)
	defer cancel()
	data, err := io.ReadAll(io.LimitReader(r, MaxSnapshotBytes+1))
	if err != nil {
		return 0, 0, fmt.Errorf("read snapshot: %w", err)
	}
	if len(data) > MaxSnapshotBytes {
		return 0, 0, fmt.Errorf("snapshot larger than %d bytes: %w", MaxSnapshotBytes, ErrBadSnapshot)
	}
	st, err := readRestored(data)
	if err != nil {
		return 0, 0, err
	}
	instances, apps = len(st.Entries), st.Applications()
	err = n.snapshotCall(ctx, func() error { return n.restoreState(st) }, func(addr string) error {
		return n.peers().Restore(ctx, addr, data)
	})
	return instances, apps, err
}

// readRestored decodes and checks, in full, a snapshot to restore.
func readRestored(data []byte) (*fsm.State, error) {
	st, err := fsm.ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("restore: %v: %w", err, ErrBadSnapshot)
	}
	return st, nil
}

// snapshotCall runs local on the leader, or remote with the leader's HTTP
// address, retrying while leadership moves; it gives up when ctx ends or
// when no leader answered for ApplyTimeout.
func (n *Node) snapshotCall(ctx context.Context, local func() error, remote func(addr string) error) error {
	giveUp := time.Now().Add(n.cfg.ApplyTimeout)
	for {
		var err error
		switch addr := n.leaderHTTP(); {
		case n.IsLeader():
			err = local()
		case addr != "" && addr != n.cfg.HTTPAdvertise:
			err = remote(addr)
		default:
			err = ErrNoLeader
		}
		if err == nil || !(errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, errUnreachable)) {
			return err
		}
		if time.Now().After(giveUp) || sleepCtx(ctx, n.stopCh) != nil {
			return err
		}
	}
}

// saveLocal encodes the leader's state once every committed entry is applied.
func (n *Node) saveLocal(w io.Writer) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if err := n.Barrier(n.cfg.ApplyTimeout); err != nil {
		return err
	}
	if err := n.fsm.Export().Encode(w); err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	return nil
}

// restoreLocal validates data, a snapshot a follower forwarded, and
// restores it (restoreState).
func (n *Node) restoreLocal(data []byte) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	st, err := readRestored(data)
	if err != nil {
		return err
	}
	return n.restoreState(st)
}

// restoreState keeps this cluster's members and mode in st and hands it to
// raft.Restore (leader only).
func (n *Node) restoreState(st *fsm.State) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	n.fsm.Read(func(r *fsm.Registry) {
		st.Members = r.Members()
		st.Mode = r.Mode()
		st.ClusterID = r.ClusterID() // a backup of another cluster does not rename this one
	})
	// raft.Restore stores the snapshot at max(meta.Index, last index)+1;
	// the FSM takes its applied index from the snapshot, so write that one.
	last := n.raft.LastIndex()
	st.LastIndex = last + 1
	var buf bytes.Buffer
	if err := st.Encode(&buf); err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: last, Term: n.raft.CurrentTerm(), Size: int64(buf.Len())}
	// Restored leases were renewed on another clock: give them the grace a
	// new leader gives. From before raft.Restore, which swaps the FSM's
	// state in and then waits for a follower to install it: the lease
	// keeper sees the restored leases from the swap on, and must not judge
	// them by the old grace in that wait. And again once it returned, so
	// the grace is whole when the cluster holds the state.
	n.leases.startGrace(time.Now())
	if err := n.raft.Restore(meta, &buf, n.cfg.ApplyTimeout); err != nil {
		return fmt.Errorf("raft restore: %w", mapRaftErr(err))
	}
	n.leases.startGrace(time.Now())
	n.log.Info("restored snapshot", "instances", len(st.Entries), "index", st.LastIndex)
	return nil
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
