package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/testkit/launch"
	"github.com/heureka-registry/heureka/nodeapi"
	"github.com/heureka-registry/heureka/store"
)

// testNode is a cluster node with its internal HTTP endpoints served on
// 127.0.0.1, as heureka serve runs it.
type testNode struct {
	*Node
	st  *store.Store
	srv *http.Server
}

func (tn *testNode) stop() {
	_ = tn.srv.Close()
	_ = tn.Node.Shutdown()
	_ = tn.st.Close()
}

// freeAddr returns a loopback address below the ephemeral range that was
// free a moment ago and is handed out once per test process. Asking the
// kernel for port 0 and closing the listener could return the same port for
// two members of one cluster.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := launch.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// testMembers returns n members with fresh loopback addresses.
func testMembers(t *testing.T, n int) []fsm.Member {
	ms := make([]fsm.Member, n)
	for i := range ms {
		ms[i] = fsm.Member{ID: fmt.Sprintf("n%d", i+1), RaftAddr: freeAddr(t), HTTPAddr: freeAddr(t)}
	}
	return ms
}

func testConfig(self fsm.Member, members []fsm.Member, mode string, hooks *testHooks) Config {
	cfg := DefaultConfig()
	cfg.NodeID, cfg.RaftBind, cfg.HTTPAdvertise, cfg.InitialCluster = self.ID, self.RaftAddr, self.HTTPAddr, members
	cfg.Mode = mode
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.ApplyTimeout = 2 * time.Second
	// Renewals stay in the leader's batcher, where the tests look for them.
	cfg.RenewBatchInterval = time.Hour
	cfg.hooks = hooks
	return cfg
}

func startTestNode(t *testing.T, dir string, cfg Config) *testNode {
	t.Helper()
	st, err := store.Open(store.DefaultConfig(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg, Deps{Store: st}, fsm.New(time.Minute, nil), nil)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", cfg.HTTPAdvertise)
	if err != nil {
		n.Shutdown()
		st.Close()
		t.Fatal(err)
	}
	srv := &http.Server{Handler: n.InternalHandler(nil)}
	go func() { _ = srv.Serve(l) }()
	return &testNode{Node: n, st: st, srv: srv}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func registerEntry(t *testing.T, app, id string) []byte {
	t.Helper()
	entry, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: &fsm.Instance{
		InstanceID: id, HostName: "h", App: app, IPAddr: "10.0.0.1", Status: "UP", LastDirtyTimestamp: 1,
		DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}}})
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

// journalWrites leaves records in dir's journal, as a node that crashed
// during a partition would.
func journalWrites(t *testing.T, dir string, entries ...[]byte) {
	t.Helper()
	// Only a node journals, so its directory holds a log beside the
	// journal: store.Open takes a journal beside no log for a lost log.
	if _, err := os.Stat(filepath.Join(dir, store.LogFile)); errors.Is(err, os.ErrNotExist) {
		st, err := store.Open(store.DefaultConfig(dir), nil)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	j, err := store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, e := range entries {
		buf := append([]byte(nil), e...)
		if err := fsm.Stamp(buf, time.Now().UnixMilli()); err != nil {
			t.Fatal(err)
		}
		if err := j.Append(buf); err != nil {
			t.Fatal(err)
		}
	}
}

func visible(n *Node, app, id string) bool {
	var e *fsm.Entry
	n.Read(func(r *fsm.Registry) { e = r.Get(app, id) })
	return e != nil
}

func inFSM(n *Node, app, id string) bool {
	var e *fsm.Entry
	n.fsm.Read(func(r *fsm.Registry) { e = r.Get(app, id) })
	return e != nil
}

// A write journaled while a replay runs must stay visible in this node's
// reads after the replay, until it is replayed itself.
func TestFallback_WriteDuringReplayStaysVisible(t *testing.T) {
	dir := t.TempDir()
	journalWrites(t, dir, registerEntry(t, "A", "1"))
	var node atomic.Pointer[Node]
	var calls atomic.Int32
	hooks := &testHooks{beforeReplayBatch: func([][]byte) error {
		switch calls.Add(1) {
		case 1:
			// Quorum flickered: a write came in through the fallback.
			n := node.Load()
			for n == nil {
				time.Sleep(time.Millisecond)
				n = node.Load()
			}
			if _, err := n.fb.record(registerEntry(t, "A", "2")); err != nil {
				return fmt.Errorf("record during replay: %w", err)
			}
			return nil
		default:
			// Later replays fail, so A/2 stays in the journal only.
			return fmt.Errorf("test: leader busy: %w", ErrNoLeader)
		}
	}}
	ms := testMembers(t, 1)
	tn := startTestNode(t, dir, testConfig(ms[0], ms, ModeAP, hooks))
	defer tn.stop()
	node.Store(tn.Node)
	waitFor(t, 10*time.Second, "the first journal batch replayed", func() bool { return inFSM(tn.Node, "A", "1") && calls.Load() >= 2 })
	if got := tn.fb.journal.Len(); got != 1 {
		t.Fatalf("journal holds %d entries, want 1 (the write made during the replay)", got)
	}
	if !visible(tn.Node, "A", "2") {
		t.Fatal("the write journaled during the replay disappeared from reads")
	}
	if !visible(tn.Node, "A", "1") {
		t.Fatal("the replayed write is not visible")
	}
}

// With quorum present, a write on a node whose journal replay fails is
// neither journaled (it would go around Raft) nor refused as "no quorum":
// it fails with a retriable "no leader" and nothing is recorded.
func TestApply_ReplayFailureWithQuorum(t *testing.T) {
	for _, mode := range []string{ModeAP, ModeCP} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			journalWrites(t, dir, registerEntry(t, "A", "1"))
			hooks := &testHooks{beforeReplayBatch: func([][]byte) error { return fmt.Errorf("test: replay refused: %w", ErrNoLeader) }}
			ms := testMembers(t, 1)
			tn := startTestNode(t, dir, testConfig(ms[0], ms, mode, hooks))
			defer tn.stop()
			waitFor(t, 10*time.Second, "leader", tn.IsLeader)
			_, err := tn.Apply(context.Background(), registerEntry(t, "B", "1"))
			if err == nil || errors.Is(err, ErrNoQuorum) || !errors.Is(err, ErrNoLeader) {
				t.Fatalf("write with quorum while the replay fails: %v, want a no-leader error (not no quorum)", err)
			}
			if !tn.HasQuorum() {
				t.Fatal("lost quorum during the test")
			}
			if got := tn.fb.journal.Len(); got != 1 {
				t.Fatalf("journal holds %d entries, want only the 1 from the partition", got)
			}
			if visible(tn.Node, "B", "1") {
				t.Fatal("the refused write is visible")
			}
		})
	}
}

// The journal is replayed in batches, not one round trip per record, also
// from a follower (forwarded to the leader in one internal call per batch).
func TestReplay_InBatches(t *testing.T) {
	const records = 2*replayBatchEntries + 7
	ms := testMembers(t, 3)
	var mu sync.Mutex
	var sizes []int
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	entries := make([][]byte, records)
	for i := range entries {
		entries[i] = registerEntry(t, "BATCH", fmt.Sprintf("i-%04d", i))
	}
	// n3 starts with a journal: it is a follower unless it wins the
	// election, and then the replay is local, in batches all the same.
	journalWrites(t, dirs[2], entries...)
	hooks := &testHooks{beforeReplayBatch: func(b [][]byte) error {
		mu.Lock()
		sizes = append(sizes, len(b))
		mu.Unlock()
		return nil
	}}
	var nodes []*testNode
	for i, m := range ms {
		var h *testHooks
		if i == 2 {
			h = hooks
		}
		nodes = append(nodes, startTestNode(t, dirs[i], testConfig(m, ms, ModeAP, h)))
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	waitFor(t, 20*time.Second, "journal replayed", func() bool { return nodes[2].fb.journal.Len() == 0 })
	for _, n := range nodes {
		waitFor(t, 5*time.Second, "replayed writes on "+n.ID(), func() bool {
			var c int
			n.fsm.Read(func(r *fsm.Registry) { c = len(r.AppEntries("BATCH")) })
			return c == records
		})
	}
	mu.Lock()
	defer mu.Unlock()
	// [512 512 7], or a few more when a batch met a leader change and was
	// sent again: never one round trip per record.
	if len(sizes) < 3 || len(sizes) > 10 || sizes[0] != replayBatchEntries {
		t.Fatalf("replay batches %v, want [%d %d 7] (or a few retries)", sizes, replayBatchEntries, replayBatchEntries)
	}
	for _, n := range sizes {
		if n > replayBatchEntries {
			t.Fatalf("replay batch of %d entries exceeds %d", n, replayBatchEntries)
		}
	}
}

// A failed cluster.New leaves no journal file open.
func TestNew_FailureClosesJournal(t *testing.T) {
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count open files")
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	st, err := store.Open(store.DefaultConfig(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	self := fsm.Member{ID: "n1", RaftAddr: busy.Addr().String(), HTTPAddr: freeAddr(t)}
	if _, err := New(testConfig(self, nil, ModeAP, nil), Deps{Store: st}, fsm.New(time.Minute, nil), nil); err == nil {
		t.Fatal("New on a busy raft address succeeded")
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasSuffix(target, store.JournalFile) {
			t.Fatalf("journal still open after New failed: fd %s -> %s", fd.Name(), target)
		}
	}
}

// flakyRenew answers the first forwarded renewal batch itself with "not
// leader" for every renewal, as a leader stepping down mid-batch does,
// without passing it on.
type flakyRenew struct {
	base         http.RoundTripper
	faults, sent *atomic.Int32
}

func (f *flakyRenew) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != nodeapi.PathRenewBatch {
		return f.base.RoundTrip(r)
	}
	f.sent.Add(1)
	if f.faults.Add(-1) < 0 {
		return f.base.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	reqs, err := decodeRenewBatch(body)
	if err != nil {
		return nil, err
	}
	res := bytes.Repeat([]byte{renewNotLeader}, len(reqs))
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(res)),
		ContentLength: int64(len(res)), Request: r}, nil
}

// Renewals the leader answers "not leader" (or fails) are forwarded again
// rather than dropped.
func TestRenewForwarder_RetriesNotLeaderResults(t *testing.T) {
	ms := testMembers(t, 3)
	var faults, sent atomic.Int32
	faults.Store(1)
	var nodes []*testNode
	for _, m := range ms {
		hooks := &testHooks{transport: func(rt http.RoundTripper) http.RoundTripper {
			return &flakyRenew{base: rt, faults: &faults, sent: &sent}
		}}
		nodes = append(nodes, startTestNode(t, t.TempDir(), testConfig(m, ms, ModeAP, hooks)))
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	var leader, follower *testNode
	waitFor(t, 10*time.Second, "leader", func() bool {
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
			}
		}
		return leader != nil
	})
	for _, n := range nodes {
		if n != leader {
			follower = n
			break
		}
	}
	if _, err := leader.Apply(context.Background(), registerEntry(t, "R", "1")); err != nil {
		t.Fatal(err)
	}
	// Until the follower caught up once it judges heartbeats by its
	// durable view, built at its first read, and asks the leader, in a
	// call of its own, about an instance registered since: the injected
	// fault would answer that call instead of the forwarder's batch.
	waitFor(t, 5*time.Second, "registration on the caught-up follower", func() bool {
		return follower.CaughtUpOnce() && inFSM(follower.Node, "R", "1")
	})
	if err := follower.Renew(context.Background(), "R", "1", 0); err != nil {
		t.Fatalf("renew on the follower: %v", err)
	}
	waitFor(t, 5*time.Second, "renewal at the leader after a not-leader answer", func() bool {
		_, ok := leader.renew.pendingTimes()[renewKey{"R", "1"}]
		return ok
	})
	if sent.Load() < 2 {
		t.Fatalf("renew batches sent: %d, want a retry after the fault", sent.Load())
	}
}
