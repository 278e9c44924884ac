package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// burst registers n instances of app at once, by 32 writers spread over
// every node, and fails the test on any error.
func burst(t *testing.T, c *memCluster, app string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for w := range 32 {
		mn := c.nodes[w%len(c.nodes)]
		wg.Go(func() {
			for i := range next {
				if _, err := mn.Apply(t.Context(), registerEntry(t, app, fmt.Sprintf("i-%d", i))); err != nil {
					errs <- fmt.Errorf("register %d on %s: %w", i, mn.ID(), err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// packedIn counts the packed entries in a node's log, and the writes in
// them.
func packedIn(t *testing.T, mn *memNode) (entries, writes int) {
	t.Helper()
	first, _ := mn.logs.FirstIndex()
	last, _ := mn.logs.LastIndex()
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if err := mn.logs.GetLog(i, &l); err != nil || l.Type != raft.LogCommand || fsm.TypeOf(l.Data) != fsm.CmdBatch {
			continue
		}
		cmds, err := fsm.DecodeEntry(l.Data)
		if err != nil {
			t.Fatalf("entry %d on %s: %v", i, mn.ID(), err)
		}
		entries++
		writes += len(cmds)
	}
	return entries, writes
}

// A burst of registrations over every node reaches raft packed, once every
// server reads packed entries, and every node then holds every instance.
func TestMem_BurstIsPacked(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	c.waitFor(5*time.Second, "every server reads packed entries", leader.packingAllowed)
	// The leader's own writes, one after the other: no follower's call
	// in any entry, so the line never waits after one.
	for i := range 5 {
		if _, err := leader.Apply(t.Context(), registerEntry(t, "LONE", fmt.Sprintf("i-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if st := leader.Status(); st.LineWaits != 0 {
		t.Fatalf("the line waited %d times after entries of the leader's own writes", st.LineWaits)
	}
	const n = 600
	burst(t, c, "BURST", n)
	for _, mn := range c.nodes {
		c.waitFor(5*time.Second, fmt.Sprintf("%d instances on %s", n, mn.ID()), func() bool {
			count := 0
			mn.fsm.Read(func(r *fsm.Registry) { count = len(r.AppEntries("BURST")) })
			return count == n
		})
	}
	entries, writes := packedIn(t, leader)
	st := leader.Status()
	if entries == 0 || writes <= entries || !st.Packing || st.PackedWrites != uint64(writes) || st.PackedEntries != uint64(entries) {
		t.Fatalf("%d packed entries holding %d writes in the log; status packing %v, %d entries, %d writes",
			entries, writes, st.Packing, st.PackedEntries, st.PackedWrites)
	}
	// The followers' writes came in calls, and the line waited for their
	// next ones after the entries that carried them.
	if st.LineWaits == 0 || st.LineWaitsFull > st.LineWaits {
		t.Fatalf("line waits %d, %d of them to the bound", st.LineWaits, st.LineWaitsFull)
	}
	t.Logf("%d registrations: %d of them in %d packed entries; the line waited %d times for followers' calls, %d to the bound",
		n, writes, entries, st.LineWaits, st.LineWaitsFull)
	// The durable view a restarted node builds from its log reads them.
	f := c.followers()[0]
	c.stopNode(f)
	if err := c.startNode(f); err != nil {
		t.Fatal(err)
	}
	count := -1
	f.ReadDurable(func(r *fsm.Registry) { count = len(r.AppEntries("BURST")) })
	if count != n {
		t.Fatalf("a restarted follower's reads show %d instances, want %d", count, n)
	}
}

// While one server records an older log format (a rolling upgrade not yet
// done), the leader writes no packed entry; once that server runs this
// release, it does.
func TestMem_NoPackingUntilEveryServerReadsIt(t *testing.T) {
	old := 0
	c := startMemCluster(t, 3, ModeAP, func(i int, cfg *Config) {
		if i == 2 {
			cfg.hooks.logFormat = &old
		}
	})
	leader := c.leader()
	if leader.packingAllowed() {
		t.Fatal("packing allowed with a server of an older release")
	}
	burst(t, c, "BEFORE", 300)
	for _, mn := range c.nodes {
		if entries, _ := packedIn(t, mn); entries > 0 {
			t.Fatalf("%s holds %d packed entries written while a server could not read them", mn.ID(), entries)
		}
	}
	// The old node is upgraded: it restarts with this release and records
	// so itself.
	upgraded := c.nodes[2]
	c.stopNode(upgraded)
	upgraded.cfg.hooks.logFormat = nil
	upgraded.self.LogFormat = fsm.LogFormat
	if err := c.startNode(upgraded); err != nil {
		t.Fatal(err)
	}
	leader = c.leader()
	c.waitFor(5*time.Second, "every server reads packed entries", leader.packingAllowed)
	burst(t, c, "AFTER", 300)
	if entries, _ := packedIn(t, leader); entries == 0 {
		t.Fatal("no packed entry once every server reads them")
	}
}

// A write whose caller stopped waiting while it stood in the line is not
// sent: it is answered "no leader" (retryable), and nothing of it is
// recorded.
func TestWriteLine_ExpiredWriteIsNotSent(t *testing.T) {
	var l writeLine
	fresh := &lineWrite{entry: []byte("a"), deadline: time.Now().Add(time.Minute), done: make(chan struct{})}
	late := &lineWrite{entry: []byte("b"), deadline: time.Now().Add(-time.Second), done: make(chan struct{})}
	l.wait = []*lineWrite{late, fresh}
	ws := l.takeLocked()
	if len(ws) != 1 || ws[0] != fresh || len(l.wait) != 0 {
		t.Fatalf("took %d writes, %d left", len(ws), len(l.wait))
	}
	select {
	case <-late.done:
		if late.err == nil || late.idx != 0 {
			t.Fatalf("the late write: %v at %d", late.err, late.idx)
		}
	default:
		t.Fatal("the late write was not answered")
	}
}

// One packed entry stays within its bounds: at most maxLineEntries
// writes and maxLineBytes bytes, and a write larger than that goes alone.
func TestWriteLine_EntryBounds(t *testing.T) {
	var l writeLine
	add := func(n, size int) {
		for range n {
			l.wait = append(l.wait, &lineWrite{entry: make([]byte, size), deadline: time.Now().Add(time.Minute), done: make(chan struct{})})
		}
	}
	add(maxLineEntries+10, 10)
	if ws := l.takeLocked(); len(ws) != maxLineEntries {
		t.Fatalf("took %d writes, want %d", len(ws), maxLineEntries)
	}
	l.wait = nil
	add(3, maxLineBytes/2)
	if ws := l.takeLocked(); len(ws) != 2 {
		t.Fatalf("took %d writes of half the bound, want 2", len(ws))
	}
	l.wait = nil
	add(2, maxLineBytes+1)
	if ws := l.takeLocked(); len(ws) != 1 {
		t.Fatalf("took %d writes over the bound, want 1 alone", len(ws))
	}
}

// A burst that reaches raft in fewer packed entries than the snapshot
// threshold, but in more writes, is snapshotted all the same: a restart
// replays no more writes from the log than before packing.
func TestMem_PackedBurstIsSnapshottedByItsWrites(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, func(i int, cfg *Config) {
		cfg.SnapshotThreshold, cfg.SnapshotInterval = 400, 100*time.Millisecond
	})
	leader := c.leader()
	c.waitFor(5*time.Second, "every server reads packed entries", leader.packingAllowed)
	burst(t, c, "SNAP", 1000)
	last, _ := leader.logs.LastIndex()
	if last >= 400 {
		t.Skipf("the burst took %d entries: packed too little to tell the triggers apart", last)
	}
	// A snapshot may come mid-burst, with more writes after it: once the
	// burst is over, each node's snapshot covers all but fewer than the
	// threshold's commands, a snapshot interval or two later.
	for _, mn := range c.nodes {
		c.waitFor(5*time.Second, "a snapshot on "+mn.ID()+" covering the burst but for fewer than 400 commands", func() bool {
			metas, err := mn.snaps.List()
			return err == nil && len(metas) > 0 && mn.fsm.CommandsSinceSnapshot() < 400
		})
	}
}

// A new cluster's nodes record themselves as they see the leader, not on
// their retry, and the leader packs from then on (it packs nothing until
// every server's record is in). The retry is an hour here: only the news
// of the leader can bring the records in.
func TestMem_NodesRecordThemselvesOnSeeingTheLeader(t *testing.T) {
	c := startMemNodes(t, 3, ModeCP, func(_ int, cfg *Config) { cfg.hooks.registerRetry = time.Hour })
	c.waitMembersRecorded(5 * time.Second)
	c.waitFor(5*time.Second, "every server reads packed entries", c.leader().packingAllowed)
}

// After an entry that carried followers' calls, the line waits for as
// many calls to join it again: a call ends the wait, a lone write does
// not, and with no call the wait ends at its bound.
func TestWriteLine_AwaitCalls(t *testing.T) {
	var l writeLine
	add := func(call bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.addLocked([]*lineWrite{{entry: []byte("a"), done: make(chan struct{})}}, call)
	}
	add(true) // a call the line has seen before it answered
	seen := l.calls
	done := make(chan struct{})
	go func() {
		l.awaitCalls(seen+2, time.Minute)
		close(done)
	}()
	for _, call := range []bool{true, false} {
		add(call)
		select {
		case <-done:
			t.Fatalf("the wait ended with %d of 2 calls back", l.calls-seen)
		case <-time.After(20 * time.Millisecond):
		}
	}
	add(true)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait went on with both calls back")
	}
	if l.waits.Load() != 1 || l.waitsFull.Load() != 0 {
		t.Fatalf("waits %d, full %d; want 1, 0", l.waits.Load(), l.waitsFull.Load())
	}

	start := time.Now()
	l.awaitCalls(l.calls+1, 30*time.Millisecond)
	if waited := time.Since(start); waited < 30*time.Millisecond || l.waitsFull.Load() != 1 {
		t.Fatalf("with no call the wait took %s and counted %d full; want the bound, 1", waited, l.waitsFull.Load())
	}
}
