package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestRestartCutOffKeepsLoggedCP: n3 takes a snapshot in AP, then the
// cluster switches to CP (committed on all three). With n1 and n2 stopped,
// n3 is killed and restarted: its FSM holds only the AP snapshot, the
// set-mode cp waits in its log for a leader that does not come. It must act
// CP all the same: a write is refused (503, X-Heureka-Mode: cp) and nothing
// is journaled, reads are not served stale.
func TestRestartCutOffKeepsLoggedCP(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: []string{"--mode", "ap"}, NodeArgs: func(id string) []string {
		if id == "n3" {
			return []string{"--snapshot-threshold", "64", "--snapshot-interval", "1s"}
		}
		return nil
	}})
	leader := c.WaitLeader(t, 15*time.Second)
	n3 := c.Node("n3")
	regs := make([]reg, 80)
	lease := map[string]any{"renewalIntervalInSecs": 30, "durationInSecs": 900}
	for i := range regs {
		regs[i] = reg{app: "RM", id: fmt.Sprintf("rm-%02d", i), extra: map[string]any{"leaseInfo": lease}}
	}
	registerAll(t, leader.BaseURL(), regs, 4)
	WaitFor(t, 15*time.Second, func() bool {
		st, err := n3.TryStatus()
		return err == nil && st.LastSnapshotIndex > 0
	}, "n3 taking a snapshot in AP")

	if code, body, _ := Do(t, "PUT", leader.URL("/v1/mode?mode=cp"), nil); code != http.StatusOK {
		t.Fatalf("PUT /v1/mode?mode=cp: %d %s", code, body)
	}
	var modeIdx uint64
	WaitFor(t, 10*time.Second, func() bool {
		st, err := n3.TryStatus()
		modeIdx = st.AppliedIndex
		return err == nil && st.Mode == "cp"
	}, "n3 applying the switch to cp")

	for _, nd := range c.Nodes {
		if nd != n3 {
			nd.Stop()
		}
	}
	n3.Restart(t) // kill -9, then start on the same data directory
	WaitFor(t, 10*time.Second, func() bool {
		st, err := n3.TryStatus()
		return err == nil && st.QuorumLost
	}, "n3 counting its quorum as lost")
	st := n3.Status(t)
	if st.LastSnapshotIndex >= modeIdx {
		t.Fatalf("n3's snapshot (index %d) is not older than the switch to cp (applied at %d): not the case under test",
			st.LastSnapshotIndex, modeIdx)
	}
	if st.Mode != "cp" {
		t.Errorf("n3 status mode = %q after the restart, want cp", st.Mode)
	}

	code, body, hdr := Do(t, "POST", n3.URL("/eureka/apps/RM"), RegisterBody("RM", "rm-new", nil))
	if code != http.StatusServiceUnavailable || hdr.Get("X-Heureka-Mode") != "cp" {
		t.Errorf("POST on the cut-off n3: %d X-Heureka-Mode=%q %s, want 503 and cp", code, hdr.Get("X-Heureka-Mode"), body)
	}
	code, _, hdr = Do(t, "GET", n3.URL("/eureka/apps"), nil, "Accept", "application/json")
	if code != http.StatusServiceUnavailable {
		t.Errorf("GET /eureka/apps on the cut-off n3: %d (stale=%q), want 503", code, hdr.Get("X-Heureka-Stale"))
	}
	if st := n3.Status(t); st.JournalEntries != 0 {
		t.Errorf("n3 journaled %d writes in a CP cluster", st.JournalEntries)
	}
}
