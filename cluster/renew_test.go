package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

func TestRenewBatchEncoding_RoundTrip(t *testing.T) {
	in := []renewRequest{{App: "A", ID: "h:a:1"}, {App: "ÄPP", ID: "", LastDirtyTimestamp: 1718000000123}, {App: "B", ID: "x", LastDirtyTimestamp: -1}}
	out, err := decodeRenewBatch(encodeRenewBatch(in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %v %+v", err, out)
	}
	if out, err := decodeRenewBatch(nil); err != nil || len(out) != 0 {
		t.Fatalf("empty batch: %v %v", out, err)
	}
}

func FuzzDecodeRenewBatch(f *testing.F) {
	f.Add(encodeRenewBatch([]renewRequest{{App: "A", ID: "1", LastDirtyTimestamp: 5}}))
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, err := decodeRenewBatch(data)
		if err != nil {
			if !errors.Is(err, fsm.ErrBadCommand) {
				t.Fatalf("error not marked bad command: %v", err)
			}
			return
		}
		again, err := decodeRenewBatch(encodeRenewBatch(reqs))
		if err != nil || len(again) != len(reqs) {
			t.Fatalf("re-encoding failed: %v", err)
		}
	})
}

// TestSplitReplicated: a forwarded batch goes out as its clients' renewals
// and its replicated ones, each in the order taken; a batch without
// replicated renewals goes out as it is.
// A forwarded batch of renewals stays under the body a leader reads
// (nodeapi's limit, 8 MiB) however long the names: 20,000 renewals with
// names near their 256-byte bound encode to over 10 MB, which the leader
// refuses whole, every 50 ms, while those leases run out.
func TestRenewForwarder_BatchesStayUnderTheBodyLimit(t *testing.T) {
	f := newRenewForwarder(nil)
	long := strings.Repeat("x", 250)
	for i := range maxRenewBatchSend {
		f.add(renewRequest{App: "APP-" + long, ID: fmt.Sprintf("%05d-%s", i, long), LastDirtyTimestamp: 1718000000123})
	}
	total := 0
	for {
		batch := f.take(maxRenewBatchSend, maxRenewBatchBytes)
		if len(batch) == 0 {
			break
		}
		if n := len(encodeRenewBatch(batch)); n > maxRenewBatchBytes {
			t.Fatalf("a batch of %d renewals encodes to %d bytes, over %d", len(batch), n, maxRenewBatchBytes)
		}
		total += len(batch)
	}
	if total != maxRenewBatchSend {
		t.Fatalf("took %d renewals of %d", total, maxRenewBatchSend)
	}
	f.add(renewRequest{App: "A", ID: long})
	if batch := f.take(10, 1); len(batch) != 1 {
		t.Fatalf("a renewal larger than the bound is taken alone; got %d", len(batch))
	}
}

func TestSplitReplicated(t *testing.T) {
	plain := []renewRequest{{App: "A", ID: "1"}, {App: "A", ID: "2"}}
	local, replicated := splitReplicated(plain)
	if len(local) != 2 || &local[0] != &plain[0] || replicated != nil {
		t.Fatalf("batch without replicated renewals: local %+v, replicated %+v", local, replicated)
	}
	mixed := []renewRequest{{App: "A", ID: "1"}, {App: "A", ID: "2", Replicated: true}, {App: "B", ID: "3"}, {App: "B", ID: "4", Replicated: true}}
	local, replicated = splitReplicated(mixed)
	if !reflect.DeepEqual(local, []renewRequest{mixed[0], mixed[2]}) || !reflect.DeepEqual(replicated, []renewRequest{mixed[1], mixed[3]}) {
		t.Fatalf("mixed batch: local %+v, replicated %+v", local, replicated)
	}
}

func TestRenewResultBytes(t *testing.T) {
	for err, want := range map[error]byte{nil: renewOK, fsm.ErrInstanceNotFound: renewNotFound, ErrNotLeader: renewNotLeader, errors.New("x"): renewFailed} {
		if got := renewResultByte(err); got != want {
			t.Fatalf("%v -> %d, want %d", err, got, want)
		}
	}
}

// TestMem_RenewAtUnreachableLeaderIsNoLeader checks that a heartbeat a
// follower passes to a leader that does not answer (it just died, or its
// HTTP is cut) fails as ErrNoLeader, which clients get as a 503 and retry
// elsewhere, not as an unclassified error (a 500).
func TestMem_RenewAtUnreachableLeaderIsNoLeader(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	f := c.followers()[0]
	c.net.mu.Lock()
	c.net.cut[leader.self.HTTPAddr] = true // HTTP only: Raft keeps its leader
	c.net.mu.Unlock()
	err := f.Renew(t.Context(), "NOSUCH", "n-1", 0)
	if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("renew through %s at an unreachable leader: %v, want ErrNoLeader", f.ID(), err)
	}
}

// A renewal batch far larger than renewEntryBytes (a second of a big
// fleet's heartbeats) is written as several entries of about that size,
// and every node applies every renewal in it.
func TestMem_RenewalBatchWrittenInBoundedEntries(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, func(_ int, cfg *Config) { cfg.RenewBatchInterval = time.Hour })
	leader := c.leader()
	const count = 1500
	id := func(i int) string { return fmt.Sprintf("%s-%04d", strings.Repeat("long-instance-id", 6), i) }
	entries := make([][]byte, count)
	for i := range entries {
		entries[i] = registerEntry(t, "BIG", id(i))
	}
	results, _, err := leader.applyBatchLocal(t.Context(), entries)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range results {
		if err != nil {
			t.Fatalf("register %d: %v", i, err)
		}
	}
	before, err := leader.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now().UnixMilli() + 60_000 // later than every registration
	batch := make([]fsm.Renewal, count)
	for i := range batch {
		batch[i] = fsm.Renewal{App: "BIG", ID: id(i), Ts: ts}
	}
	failed, err := leader.renew.write(batch)
	if err != nil || len(failed) != 0 {
		t.Fatalf("write: %d renewals failed: %v", len(failed), err)
	}
	after, err := leader.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var written, renewals int
	for idx := before + 1; idx <= after; idx++ {
		var l raft.Log
		if err := leader.logs.GetLog(idx, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type != raft.LogCommand || fsm.TypeOf(l.Data) != fsm.CmdRenewBatch {
			continue
		}
		written++
		if len(l.Data) > renewEntryBytes+1024 {
			t.Errorf("entry %d holds %d bytes, over %d", idx, len(l.Data), renewEntryBytes)
		}
		cmd, err := fsm.Decode(l.Data)
		if err != nil {
			t.Fatal(err)
		}
		renewals += len(cmd.Body.(*fsm.RenewBatchBody).Renewals)
	}
	if want := count * renewalBytes(batch[0]) / renewEntryBytes; written < want || renewals != count {
		t.Fatalf("%d renewals in %d entries, want %d in %d or more", renewals, written, count, want)
	}
	for _, mn := range c.nodes {
		c.waitFor(5*time.Second, "every renewal applied on "+mn.ID(), func() bool {
			for i := range count {
				if lastRenewal(mn, "BIG", id(i)) != ts {
					return false
				}
			}
			return true
		})
	}
}

// TestRenewBatcher_ABatchBeingWrittenStillCounts: between take and the end
// of its write a batch's renewals are neither pending nor applied, and the
// lease keeper must still count them (pendingTimes), or it takes a lease
// renewed in the batch for one that expired: instances renewing again
// after self-preservation were evicted in that window.
func TestRenewBatcher_ABatchBeingWrittenStillCounts(t *testing.T) {
	b := newRenewBatcher(nil)
	k := renewKey{"A", "1"}
	b.pending[k] = fsm.Renewal{App: "A", ID: "1", Ts: 100}
	if batch := b.take(); len(batch) != 1 {
		t.Fatalf("took %v", batch)
	}
	if got := b.pendingTimes()[k]; got != 100 {
		t.Fatalf("while its batch is written, the renewal counts as %d, want 100", got)
	}
	b.pending[k] = fsm.Renewal{App: "A", ID: "1", Ts: 200} // a newer one meanwhile
	if got := b.pendingTimes()[k]; got != 200 {
		t.Fatalf("the newer renewal counts as %d, want 200", got)
	}
	b.written()
	if got := b.pendingTimes()[k]; got != 200 {
		t.Fatalf("after the write, the pending renewal counts as %d, want 200", got)
	}
	b.take()
	b.written()
	if got := b.pendingTimes(); len(got) != 0 {
		t.Fatalf("after every batch was written: %v", got)
	}
}

// Judging a heartbeat against a node's state allocates nothing, on the
// leader and on a follower, in the FSM and in the durable view a node
// reads before it caught up: the lookup used to go through a function
// value, which moved its closure and the entry it set to the heap, two
// allocations for every heartbeat on every node that judges one.
func TestMem_JudgingAHeartbeatAllocatesNothing(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	if _, _, err := leader.applyBatchLocal(t.Context(), [][]byte{registerEntry(t, "JUDGED", "j-1")}); err != nil {
		t.Fatal(err)
	}
	req := renewRequest{App: "JUDGED", ID: "j-1", LastDirtyTimestamp: 1}
	for _, mn := range append([]*memNode{leader}, c.followers()...) {
		c.waitFor(5*time.Second, mn.ID()+" holds the instance", func() bool { return mn.leaseIn(req.App, req.ID, false) != nil })
		for _, durable := range []bool{false, true} {
			var renew bool
			allocs := testing.AllocsPerRun(100, func() { renew, _, _ = judgeRenewal(req, mn.leaseIn(req.App, req.ID, durable)) })
			if !renew || allocs != 0 {
				t.Errorf("%s, durable %v: renews %v with %.0f allocations a heartbeat, want true with none", mn.ID(), durable, renew, allocs)
			}
		}
	}
}
