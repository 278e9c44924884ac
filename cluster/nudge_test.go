package cluster

import (
	"testing"
	"time"
)

// A lone write on a quiet cluster reaches the followers' FSMs long before
// the commit timeout would tell them: the leader's barrier carries the new
// commit index at once. Without it, a follower here would apply the write
// only 2 to 4 s later (raft's heartbeats carry no commit index).
func TestMem_CommitReachesFollowersBeforeCommitTimeout(t *testing.T) {
	c := startMemCluster(t, 3, ModeCP, func(_ int, cfg *Config) { cfg.CommitTimeout = 2 * time.Second })
	leader := c.leader()
	// Let the start-up writes (members, mode) settle, so nothing else is
	// appended after the write below.
	time.Sleep(300 * time.Millisecond)
	for i, id := range []string{"1", "2", "3"} {
		start := time.Now()
		if _, err := leader.Apply(t.Context(), registerEntry(t, "NUDGE", id)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		for _, f := range c.followers() {
			c.waitFor(time.Second, "write "+id+" on "+f.ID(), func() bool { return inFSM(f.Node, "NUDGE", id) })
		}
		t.Logf("write %s on every follower after %v", id, time.Since(start))
		time.Sleep(100 * time.Millisecond) // quiet again
	}
}
