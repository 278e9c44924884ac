package cluster

import (
	"testing"
	"time"
)

// The in-process cluster (memcluster_test.go), opened to the tests of
// package cluster_test: those drive it through the real HTTP layer
// (httpapi), which imports this package, so they cannot live here.

// MemCluster is a memCluster for package cluster_test. Its methods are
// called from one goroutine (the test's).
type MemCluster struct{ c *memCluster }

// StartMemCluster starts size nodes in mode on Raft's in-memory transport
// and waits for a leader and every member's record.
func StartMemCluster(t *testing.T, size int, mode string) *MemCluster {
	t.Helper()
	return &MemCluster{c: startMemCluster(t, size, mode, nil)}
}

// Size is how many nodes the cluster started with.
func (m *MemCluster) Size() int { return len(m.c.nodes) }

// Node is node i as it runs now (a start replaces it), or nil while stopped.
func (m *MemCluster) Node(i int) *Node {
	if mn := m.c.nodes[i]; !mn.down {
		return mn.Node
	}
	return nil
}

// ID is node i's member id.
func (m *MemCluster) ID(i int) string { return m.c.nodes[i].self.ID }

// Cut partitions node i from every other node (Raft and node-to-node HTTP).
func (m *MemCluster) Cut(i int) { m.c.cutOff(m.c.nodes[i]) }

// Heal links node i to every other node running again.
func (m *MemCluster) Heal(i int) { m.c.heal(m.c.nodes[i]) }

// AgeQuorum moves the moment node i last had quorum a minute back, when it
// has none now: it then counts its quorum as lost at once instead of after
// the second it rides out a missing leader (as loseQuorum does). It reports
// whether the node counts its quorum as lost.
func (m *MemCluster) AgeQuorum(i int) bool {
	mn := m.c.nodes[i]
	if mn.down || mn.HasQuorum() {
		return false
	}
	mn.fb.lastQuorum.Store(time.Now().Add(-time.Minute).UnixNano())
	return mn.QuorumLost()
}

// Stop stops node i as a crash would; its Raft stores and journal stay.
func (m *MemCluster) Stop(i int) { m.c.stopNode(m.c.nodes[i]) }

// Start starts the stopped node i again on its stores and journal.
func (m *MemCluster) Start(i int) error {
	mn := m.c.nodes[i]
	if err := m.c.startNode(mn); err != nil {
		return err
	}
	m.SetDiskFull(i, mn.diskFull.Load())
	return nil
}

// SetDiskFull fills node i's disk, or frees it: while full, every write to
// its Raft log fails (ENOSPC) and its AP fallback journal refuses appends
// (ErrJournalFull).
func (m *MemCluster) SetDiskFull(i int, full bool) {
	mn := m.c.nodes[i]
	mn.diskFull.Store(full)
	if mn.down {
		return
	}
	if full {
		mn.fb.journal.SetLimits(0, 1)
	} else {
		mn.fb.journal.SetLimits(mn.cfg.JournalMaxEntries, mn.cfg.JournalMaxBytes)
	}
}

// OverlayState reports, under the fallback's lock, whether n has an AP
// fallback overlay and how many entries its journal holds: the overlay
// must exist exactly while the journal holds entries.
func OverlayState(n *Node) (overlay bool, entries int) {
	n.fb.mu.RLock()
	defer n.fb.mu.RUnlock()
	return n.fb.overlay != nil, n.fb.pending()
}
