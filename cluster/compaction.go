package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

// snapshotShare sets how many log entries a node lets pass between
// snapshots once the registry is large: one for every snapshotShare
// instances held. A snapshot encodes the whole registry, so with a fixed
// threshold its cost per write grows with the registry (at 200,000
// instances and 8,192 entries, every write paid for 24 instances
// encoded); with a threshold proportional to the registry it stays flat.
// The price is a longer log to replay after a restart: replaying an entry
// costs about three times restoring an instance from the snapshot
// (BENCHMARKS.md, "Scale: 10,000 to 200,000 instances"), so a quarter of
// the registry's worth of entries adds about three quarters of the
// restore time.
const snapshotShare = 4

// snapshotFollowEvery is how often the threshold follows the registry.
const snapshotFollowEvery = 5 * time.Second

// snapshotThreshold is the number of log entries after which a node holding
// instances snapshots: the configured threshold (the floor, for small
// registries) or instances/snapshotShare, whichever is larger.
func snapshotThreshold(floor uint64, instances int) uint64 {
	return max(floor, uint64(instances)/snapshotShare)
}

// followSnapshotThreshold keeps Raft's snapshot threshold at
// snapshotThreshold of the registry's size until stop closes.
func (n *Node) followSnapshotThreshold(stop <-chan struct{}) {
	t := time.NewTicker(snapshotFollowEvery)
	defer t.Stop()
	for {
		if _, err := n.adjustSnapshotThreshold(); err != nil {
			n.log.Warn("snapshot threshold", "error", err)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// adjustSnapshotThreshold sets Raft's snapshot threshold for the registry
// held now and returns it.
func (n *Node) adjustSnapshotThreshold() (uint64, error) {
	var count int
	n.fsm.Read(func(r *fsm.Registry) { count = r.Count() })
	want := snapshotThreshold(n.cfg.SnapshotThreshold, count)
	rc := n.raft.ReloadableConfig()
	if rc.SnapshotThreshold == want {
		return want, nil
	}
	rc.SnapshotThreshold = want
	if err := n.raft.ReloadConfig(rc); err != nil {
		return 0, fmt.Errorf("set snapshot threshold to %d: %w", want, err)
	}
	return want, nil
}

// snapshotByCommands takes a snapshot once the FSM applied more commands
// since its last one than the snapshot threshold, checked every snapshot
// interval (as raft checks its own), until stop closes. Raft counts log
// entries, and a packed entry holds many writes (packline.go): without
// this, a registration burst would reach the threshold after many times
// the writes it did before, and a restart would replay them all from the
// log, where a snapshot restores each instance in a third of the time.
func (n *Node) snapshotByCommands(stop <-chan struct{}) {
	if n.cfg.SnapshotInterval <= 0 {
		return
	}
	tick.Every(stop, n.cfg.SnapshotInterval, func() {
		if n.fsm.CommandsSinceSnapshot() < n.raft.ReloadableConfig().SnapshotThreshold {
			return
		}
		if err := waitFuture(n.raft.Snapshot(), stop); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			n.log.Debug("snapshot after the threshold's commands", "error", err)
		}
	})
}
