package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A lone write on a quiet cluster reaches the followers' FSMs long before
// the commit timeout would tell them: the leader's commit notice tells
// them at once, and adds nothing to any log. Without it, a follower here
// would apply the write only 2 to 4 s later (raft's heartbeats carry no
// commit index).
func TestMem_CommitReachesFollowersBeforeCommitTimeout(t *testing.T) {
	c := startMemCluster(t, 3, ModeCP, func(_ int, cfg *Config) { cfg.CommitTimeout = 2 * time.Second })
	leader := c.leader()
	// The start-up writes (members, mode, the cluster's name) applied on
	// every node, so that nothing else is appended after the write below.
	c.waitFor(5*time.Second, "the start-up writes applied everywhere", func() bool {
		if leader.ClusterID() == "" || leader.storedMode() == "" {
			return false
		}
		last := leader.raft.LastIndex()
		for _, mn := range c.nodes {
			if mn.raft.AppliedIndex() != last {
				return false
			}
		}
		return true
	})
	for i, id := range []string{"1", "2", "3"} {
		start := time.Now()
		idx, err := leader.Apply(t.Context(), registerEntry(t, "NUDGE", id))
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		for _, f := range c.followers() {
			c.waitFor(time.Second, "write "+id+" on "+f.ID(), func() bool { return inFSM(f.Node, "NUDGE", id) })
		}
		t.Logf("write %s on every follower after %v", id, time.Since(start))
		for _, mn := range c.nodes {
			if last := mn.raft.LastIndex(); last != idx {
				t.Errorf("%s: log ends at %d, want the write's index %d (a notice is no log entry)", mn.ID(), last, idx)
			}
		}
		time.Sleep(100 * time.Millisecond) // quiet again
	}
}

// The notice is an AppendEntries that Raft's own consistency check guards:
// no entries, the committed entry as previous entry (with its term) and as
// commit index, in that entry's term, from the leader. A follower that
// lacks the entry because it is still on its way is told again a moment
// later; one that cannot be reached is left to Raft for noticePause.
func TestCommitNotice_MessageAndRetries(t *testing.T) {
	_, lt := raft.NewInmemTransportWithTimeout("leader-addr", 100*time.Millisecond)
	_, ft := raft.NewInmemTransport("follower-addr")
	lt.Connect("follower-addr", ft)
	c := newCommitNudger(&raftDeps{trans: lt}, "L", raft.ProtocolVersionMax, hclog.NewNullLogger())
	c.nudge(7)
	<-c.ch // the wake-up run would take
	self, follower := raft.Server{ID: "L", Address: "leader-addr"}, raft.Server{ID: "F", Address: "follower-addr"}
	servers := []raft.Server{self, follower}

	answers := make(chan raft.AppendEntriesResponse, 1)
	got := make(chan *raft.AppendEntriesRequest, 1)
	go func() {
		for rpc := range ft.Consumer() {
			got <- rpc.Command.(*raft.AppendEntriesRequest)
			a := <-answers
			rpc.Respond(&a, nil)
		}
	}()
	t.Cleanup(func() { _ = ft.Close() })

	claim := func(want ...raft.Server) {
		t.Helper()
		out := c.claim(servers, 7, time.Now())
		if len(out) != len(want) || (len(want) == 1 && out[0] != want[0]) {
			t.Fatalf("claim = %v, want %v", out, want)
		}
	}
	claim(follower) // never the leader itself
	claim()         // one in flight per follower

	// Refused: the follower's log ends at 6. It is told again a moment
	// later, noticeRetries times, and then left to Raft for
	// noticeLagPause, twice that after a second such round in a row.
	var lastTold time.Time // just before the last refusal
	refusals := func() {
		t.Helper()
		for i := 0; i <= noticeRetries; i++ {
			answers <- raft.AppendEntriesResponse{Term: 3, LastLog: 6}
			lastTold = time.Now()
			c.tell(follower, c.header(), 3, 7)
			req := <-got
			if len(req.Entries) != 0 || req.Term != 3 || req.PrevLogEntry != 7 || req.PrevLogTerm != 3 ||
				req.LeaderCommitIndex != 7 || string(req.ID) != "L" || string(req.Addr) != "leader-addr" ||
				req.ProtocolVersion != raft.ProtocolVersionMax {
				t.Fatalf("notice = %+v", req)
			}
			if i == noticeRetries {
				return
			}
			select {
			case <-c.ch:
			case <-time.After(time.Second):
				t.Fatal("a follower still receiving the entry was not told again")
			}
			if out := c.claim(servers, 7, time.Now().Add(noticeRetry)); len(out) != 1 {
				t.Fatalf("claim after refusal %d = %v, want the follower", i+1, out)
			}
		}
	}
	pausedFor := func(want time.Duration) {
		t.Helper()
		until := c.followers[follower.ID].paused
		if until.Before(lastTold.Add(want)) || until.After(time.Now().Add(want)) {
			t.Fatalf("paused for %s after the last refusal, want %s", until.Sub(lastTold), want)
		}
		if out := c.claim(servers, 7, until.Add(-time.Nanosecond)); len(out) != 0 {
			t.Fatalf("claim before the %s pause ends = %v, want none", want, out)
		}
		if out := c.claim(servers, 7, until); len(out) != 1 {
			t.Fatalf("claim once the %s pause ends = %v, want the follower", want, out)
		}
	}
	refusals()
	pausedFor(noticeLagPause)
	refusals()
	pausedFor(2 * noticeLagPause)
	answers <- raft.AppendEntriesResponse{Term: 3, LastLog: 7, Success: true}
	c.tell(follower, c.header(), 3, 7)
	<-got
	claim() // told
	// Taken, the follower starts again from the shortest pause; rounds in
	// a row never leave it longer than noticePause.
	c.followers[follower.ID].told = 6
	claim(follower)
	refusals()
	pausedFor(noticeLagPause)
	c.followers[follower.ID].lags = 30 // pausedFor claimed it again
	refusals()
	pausedFor(noticePause)
	c.release([]raft.Server{follower})
	c.followers[follower.ID].told, c.followers[follower.ID].paused = 7, time.Time{}

	// Unreachable: no notice for noticePause.
	c.nudge(9)
	<-c.ch
	lt.DisconnectAll()
	if out := c.claim(servers, 9, time.Now()); len(out) != 1 {
		t.Fatalf("claim for 9 = %v", out)
	}
	c.tell(follower, c.header(), 3, 9)
	if out := c.claim(servers, 9, time.Now()); len(out) != 0 {
		t.Fatalf("claim right after a failure = %v, want none", out)
	}
	if out := c.claim(servers, 9, time.Now().Add(noticePause)); len(out) != 1 {
		t.Fatalf("claim after the pause = %v, want the follower", out)
	}

	// A server gone from the configuration is forgotten.
	c.release([]raft.Server{follower})
	c.claim([]raft.Server{self}, 9, time.Now())
	if len(c.followers) != 0 {
		t.Fatalf("followers = %v after the follower left", c.followers)
	}
}

// Raft's warning for an AppendEntries naming an entry the follower does not
// have yet goes to debug; every other warning stays a warning.
func TestRaftLogger_DemotesOnlyNotYetInLog(t *testing.T) {
	var buf strings.Builder
	l := raftLogger{hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Debug})}
	l.Warn(notYetInLog, "previous-index", 9, "last-index", 8)
	l.Warn("previous log term mis-match", "ours", 2, "remote", 3)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "[DEBUG]") || !strings.Contains(lines[0], "previous-index=9") ||
		!strings.Contains(lines[1], "[WARN]") {
		t.Fatalf("logged:\n%s", buf.String())
	}
}
