package e2e

import (
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/bench"
)

// TestLogCutGivesBackMappedPages: a node that snapshots after thousands of
// registrations (~1.4 KB each in the log) cuts its log, which reads every
// page it frees through bolt's memory map; the node gives those pages back,
// so its resident memory holds almost none of the log file.
func TestLogCutGivesBackMappedPages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("mapped pages are released, and /proc/PID/smaps read, on Linux only")
	}
	const n = 5000
	c := StartCluster(t, 1, Options{ExtraArgs: []string{"--snapshot-threshold", "4000", "--snapshot-interval", "200ms", "--trailing-logs", "10"}})
	n1 := c.WaitLeader(t, 10*time.Second)
	wl := bench.DefaultWorkload()
	var mu sync.Mutex
	var failed []string
	onWorkers(16, n, func(_, k int) {
		code, body, _, err := TryDo(http.MethodPost, n1.URL("/eureka/apps/"+wl.App(k)), bench.RegisterBody(wl.Spec(k)),
			"Content-Type", "application/json")
		if err != nil || code != http.StatusNoContent {
			mu.Lock()
			failed = append(failed, fmt.Sprintf("register %d: %d %s %v", k, code, body, err))
			mu.Unlock()
		}
	})
	if len(failed) > 0 {
		t.Fatalf("%d registrations failed, first: %s", len(failed), failed[0])
	}
	var st Status
	WaitFor(t, 30*time.Second, func() bool {
		var err error
		st, err = n1.TryStatus()
		// Concurrent registrations reach the log packed, many to an
		// entry: the cut is past the snapshot, whatever its index.
		return err == nil && st.LastSnapshotIndex > 0 && st.FirstLogIndex > 1
	}, "a snapshot and the log cut after it")
	// Each entry holds this many registrations (2.5 KB each in the file).
	perEntry := max(1, float64(n)/float64(max(st.LastLogIndex, 1)))
	// The cut is visible in the status a moment before the release ends:
	// the resident size is read until it drops, for a bounded while.
	var fb fileBacked
	want := 0.0
	Eventually(2*time.Second, func() bool {
		var err error
		if fb, err = fileBackedMiB(n1.PID(), "raft.db"); err != nil {
			t.Fatal(err)
		}
		want = 1 + float64(st.LastLogIndex-st.FirstLogIndex)*2.5*perEntry/1024
		return fb.bolt <= want
	})
	t.Logf("log %d..%d (snapshot at %d) in a file of %.1f MiB; %.2f MiB of it resident", st.FirstLogIndex, st.LastLogIndex,
		st.LastSnapshotIndex, float64(st.LogBytes)/(1<<20), fb.bolt)
	// Without the release the cut of ~4,000 entries leaves about 9 MiB of
	// the file resident. What stays with it is the entries written after
	// the cut (bolt reads each page back to append to it), about 2 KB
	// each, until the next release.
	if fb.bolt > want {
		t.Errorf("%.2f MiB of the log file resident after the cut, want under %.2f MiB", fb.bolt, want)
	}
}
