package cluster

import (
	"fmt"
	"testing"
)

func TestSnapshotThreshold_FollowsTheRegistry(t *testing.T) {
	for _, tc := range []struct {
		floor     uint64
		instances int
		want      uint64
	}{
		{8192, 0, 8192},
		{8192, 10_000, 8192},
		{8192, 32_768, 8192},
		{8192, 50_000, 12_500},
		{8192, 200_000, 50_000},
		{8192, 1_000_000, 250_000},
	} {
		if got := snapshotThreshold(tc.floor, tc.instances); got != tc.want {
			t.Errorf("snapshotThreshold(%d, %d) = %d, want %d", tc.floor, tc.instances, got, tc.want)
		}
	}
}

// TestSnapshotThreshold_SetInRaft: a node whose registry outgrows four
// times the configured threshold snapshots after a quarter of its
// instance count of entries, set in Raft's running configuration.
func TestSnapshotThreshold_SetInRaft(t *testing.T) {
	n := singleNodeWith(t, func(c *Config) { c.SnapshotThreshold = 4 })
	if got, err := n.adjustSnapshotThreshold(); err != nil || got != 4 {
		t.Fatalf("empty registry: threshold %d (%v), want the configured 4", got, err)
	}
	for i := range 40 {
		register(t, n, "APP", fmt.Sprintf("i-%d", i), 90)
	}
	got, err := n.adjustSnapshotThreshold()
	if err != nil || got != 10 {
		t.Fatalf("40 instances: threshold %d (%v), want 10", got, err)
	}
	if rc := n.raft.ReloadableConfig(); rc.SnapshotThreshold != 10 {
		t.Fatalf("raft's snapshot threshold is %d, want 10", rc.SnapshotThreshold)
	}
}
