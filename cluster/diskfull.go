package cluster

import (
	"fmt"
	"time"

	"github.com/heureka-registry/heureka/internal/runtime/tick"
	"github.com/heureka-registry/heureka/store"
)

// ErrDiskFull means the disk holding this node's data directory is full:
// writes this node would have to store are refused (503 with Retry-After)
// until there is room again. It is store.ErrDiskFull, so that a write the
// store failed and one refused here are the same to callers.
var ErrDiskFull = store.ErrDiskFull

// diskProbeEvery is how often a node whose disk is full looks for room.
const diskProbeEvery = 500 * time.Millisecond

// While the disk is full (Deps.Disk), this node refuses every write it
// would store: on the leader before the write reaches Raft (applyLocal,
// applyBatchLocal), and without a leader before it would wait for one or
// go to the AP fallback journal, which lives on the same disk. A write
// that reaches a full disk fails anyway, and hashicorp/raft steps a leader
// down when its log write fails: refusing first is what keeps the leader
// in office while the disk is full. A follower forwards writes to a leader
// elsewhere as usual; that leader stores them.
//
// The store ends the condition once its probe can write again
// (store.DiskWatch); watchDisk runs the probe, so the node recovers by
// itself when space is freed.

// diskFull returns an error wrapping ErrDiskFull while this node's disk is
// full, nil otherwise.
func (n *Node) diskFull(what string) error {
	if err := n.deps.disk.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// watchDisk says when the disk fills up and, while it is full, probes it
// every diskProbeEvery until there is room again.
func (n *Node) watchDisk() {
	defer n.wg.Done()
	full := false
	tick.Every(n.stopCh, diskProbeEvery, func() {
		st := n.deps.disk.State()
		if st.Full && !full {
			n.log.Error("the data directory's disk is full: writes are refused until there is room again", "cause", st.Cause)
		}
		full = st.Full
		if !full {
			return
		}
		if lasted, err := n.deps.disk.Probe(); err == nil && lasted > 0 {
			full = false
			n.log.Info("the data directory's disk has room again: writes resume", "full_for", lasted.Round(time.Millisecond))
		}
	})
}

// diskStatus fills st's disk fields.
func (n *Node) diskStatus(st *Status) {
	ds := n.deps.disk.State()
	st.DiskFull = ds.Full
	if ds.Full {
		st.DiskFullForMs = max(time.Since(ds.Since).Milliseconds(), 1)
		st.DiskFullCause = ds.Cause
	}
	st.DiskFullRefused = n.diskRefused.Load()
	st.DiskWriteFailures = ds.Failures
}
