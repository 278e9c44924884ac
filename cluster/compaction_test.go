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
		{8192, 16_384, 8192},
		{8192, 50_000, 25_000},
		{8192, 200_000, 100_000},
		{8192, 1_000_000, 500_000},
	} {
		if got := snapshotThreshold(tc.floor, tc.instances); got != tc.want {
			t.Errorf("snapshotThreshold(%d, %d) = %d, want %d", tc.floor, tc.instances, got, tc.want)
		}
	}
}

// TestSnapshotThreshold_SetInRaft: a node whose registry outgrows twice
// the configured threshold snapshots after half its instance count of
// entries, set in Raft's running configuration.
func TestSnapshotThreshold_SetInRaft(t *testing.T) {
	n := singleNodeWith(t, func(c *Config) { c.SnapshotThreshold = 4 })
	if got, err := n.adjustSnapshotThreshold(); err != nil || got != 4 {
		t.Fatalf("empty registry: threshold %d (%v), want the configured 4", got, err)
	}
	for i := range 30 {
		register(t, n, "APP", fmt.Sprintf("i-%d", i), 90)
	}
	got, err := n.adjustSnapshotThreshold()
	if err != nil || got != 15 {
		t.Fatalf("30 instances: threshold %d (%v), want 15", got, err)
	}
	if rc := n.raft.ReloadableConfig(); rc.SnapshotThreshold != 15 {
		t.Fatalf("raft's snapshot threshold is %d, want 15", rc.SnapshotThreshold)
	}
}
