package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
)

// In-process multi-node tests (memcluster_test.go): every branch of
// Node.Apply, the AP fallback journal's replay order, renewal forwarding
// and the hand-over of leader-only work. Each runs in a fraction of a
// second, so they run under -short too.

func cancelEntry(t *testing.T, app, id string) []byte {
	t.Helper()
	entry, err := fsm.Encode(fsm.CmdCancel, &fsm.KeyBody{App: app, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return entry
}

// A write on the leader is applied there and replicated, without a call
// to another node.
func TestMem_ApplyOnLeader(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	idx, err := leader.Apply(t.Context(), registerEntry(t, "LEAD", "1"))
	if err != nil || idx == 0 {
		t.Fatalf("apply on the leader: index %d, %v", idx, err)
	}
	if !inFSM(leader.Node, "LEAD", "1") {
		t.Fatal("the leader's FSM does not hold its own write when Apply returns")
	}
	for _, mn := range c.nodes {
		c.waitFor(time.Second, "the write on "+mn.ID(), func() bool { return inFSM(mn.Node, "LEAD", "1") })
		if got := c.net.callCount(leader.self.HTTPAddr, pathApply); got != 0 {
			t.Fatalf("the leader forwarded %d writes", got)
		}
	}
}

// A write on a follower is forwarded to the leader in one internal call,
// and the follower reads its own write as soon as Apply returns.
func TestMem_ApplyForwardedToLeader(t *testing.T) {
	c := startMemCluster(t, 3, ModeCP, nil)
	leader := c.leader()
	f := c.followers()[0]
	idx, err := f.Apply(t.Context(), registerEntry(t, "FWD", "1"))
	if err != nil || idx == 0 {
		t.Fatalf("apply on a follower: index %d, %v", idx, err)
	}
	if got := c.net.callCount(f.self.HTTPAddr, pathApply); got != 1 {
		t.Fatalf("forwarded calls: %d, want 1", got)
	}
	if !inFSM(f.Node, "FWD", "1") {
		t.Fatal("the follower does not read its own write when Apply returns")
	}
	if got := leader.committed(t, "FWD"); !slices.Equal(got, []string{"register 1"}) {
		t.Fatalf("leader's log: %v", got)
	}
	// An answer from the leader's FSM comes back through the forward as is.
	if _, err := f.Apply(t.Context(), cancelEntry(t, "FWD", "nope")); !errors.Is(err, fsm.ErrInstanceNotFound) {
		t.Fatalf("forwarded cancel of an unknown instance: %v, want ErrInstanceNotFound", err)
	}
}

// A follower cut off from the leader, still riding out what may be an
// election, waits for a leader until the caller's deadline and fails with a
// retriable "no leader": neither "no quorum" nor a journaled write.
func TestMem_ApplyNoLeader(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	c.leader()
	f := c.followers()[0]
	c.cutOff(f)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := f.Apply(ctx, registerEntry(t, "NOLEAD", "1"))
	if !errors.Is(err, ErrNoLeader) || errors.Is(err, ErrNoQuorum) {
		t.Fatalf("apply without a leader: %v, want ErrNoLeader", err)
	}
	if f.QuorumLost() {
		t.Fatal("quorum counted as lost within the election ride-out")
	}
	if f.fb.journal.Len() != 0 || visible(f.Node, "NOLEAD", "1") {
		t.Fatal("the refused write was recorded")
	}
}

// Without quorum a CP node refuses writes.
func TestMem_ApplyNoQuorumCPRefused(t *testing.T) {
	c, f := startCutOff(t, ModeCP, nil)
	_, err := f.Apply(t.Context(), registerEntry(t, "CP", "1"))
	if !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("apply without quorum in cp: %v, want ErrNoQuorum", err)
	}
	if f.fb.journal.Len() != 0 || visible(f.Node, "CP", "1") || f.InFallback() {
		t.Fatal("the refused write was recorded")
	}
	// The majority side goes on.
	if _, err := c.leader().Apply(t.Context(), registerEntry(t, "CP", "2")); err != nil {
		t.Fatalf("apply on the majority side: %v", err)
	}
}

// Without quorum an AP node journals writes and shows them in its reads,
// not in its FSM.
func TestMem_ApplyNoQuorumAPJournaled(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	f := c.followers()[0]
	c.loseQuorum(f)
	if _, err := f.Apply(t.Context(), registerEntry(t, "AP", "1")); err != nil {
		t.Fatalf("apply without quorum in ap: %v", err)
	}
	if got := f.fb.journal.Len(); got != 1 {
		t.Fatalf("journal holds %d entries, want 1", got)
	}
	if !visible(f.Node, "AP", "1") || inFSM(f.Node, "AP", "1") || !f.InFallback() {
		t.Fatal("the journaled write is not in the node's reads only")
	}
	if len(leader.committed(t, "AP")) != 0 || c.net.callCount(f.self.HTTPAddr, pathApply) != 0 {
		t.Fatal("the journaled write reached the leader")
	}
	// A write on an instance the overlay does not hold is refused there.
	if _, err := f.Apply(t.Context(), cancelEntry(t, "AP", "nope")); !errors.Is(err, fsm.ErrInstanceNotFound) {
		t.Fatalf("cancel of an unknown instance in fallback: %v", err)
	}
}

// Once the journal is full, writes without quorum are refused and counted.
func TestMem_ApplyJournalFullRefused(t *testing.T) {
	_, f := startCutOff(t, ModeAP, func(_ int, cfg *Config) { cfg.JournalMaxEntries = 2 })
	mustApply(t, f, registerEntry(t, "FULL", "0"), registerEntry(t, "FULL", "1"))
	_, err := f.Apply(t.Context(), registerEntry(t, "FULL", "2"))
	if !errors.Is(err, ErrJournalFull) {
		t.Fatalf("write past the journal limit: %v, want ErrJournalFull", err)
	}
	if visible(f.Node, "FULL", "2") || f.fb.journal.Len() != 2 {
		t.Fatalf("the refused write was recorded (journal %d entries)", f.fb.journal.Len())
	}
	if got := f.Status().JournalRefused; got != 1 {
		t.Fatalf("journal_refused %d, want 1", got)
	}
}

// With quorum back, a write waits for the journal's replay: while the
// replay fails the write fails with a retriable "no leader" (it never goes
// around the journal), and once it succeeds the write lands after the
// journal's writes in the log.
func TestMem_ApplyAfterPendingReplay(t *testing.T) {
	var allow atomic.Bool
	c, f := startCutOff(t, ModeAP, func(_ int, cfg *Config) {
		cfg.hooks.beforeReplayBatch = func([][]byte) error {
			if !allow.Load() {
				return fmt.Errorf("test: leader busy: %w", ErrNoLeader)
			}
			return nil
		}
	})
	mustApply(t, f, registerEntry(t, "PEND", "1"))
	c.heal(f)
	leader := c.leader()
	c.waitFor(time.Second, "quorum back on "+f.ID(), func() bool { return !f.QuorumLost() })
	_, err := f.Apply(t.Context(), registerEntry(t, "PEND", "2"))
	if !errors.Is(err, ErrNoLeader) || errors.Is(err, ErrNoQuorum) {
		t.Fatalf("write while the replay fails: %v, want ErrNoLeader", err)
	}
	if f.fb.journal.Len() != 1 || visible(f.Node, "PEND", "2") {
		t.Fatal("the refused write was recorded")
	}
	allow.Store(true)
	if _, err := f.Apply(t.Context(), registerEntry(t, "PEND", "3")); err != nil {
		t.Fatalf("write once the replay succeeds: %v", err)
	}
	if got, want := leader.committed(t, "PEND"), []string{"register 1", "register 3"}; !slices.Equal(got, want) {
		t.Fatalf("leader's log %v, want %v", got, want)
	}
	if f.fb.journal.Len() != 0 || f.InFallback() {
		t.Fatal("journal not empty after the replay")
	}
}

// When quorum goes away again while a write waits for the journal's
// replay, the write is journaled behind the writes it waited for.
func TestMem_ApplyQuorumLostDuringReplay(t *testing.T) {
	var armed, pass atomic.Bool
	var c *memCluster
	var f *memNode
	c, f = startCutOff(t, ModeAP, func(_ int, cfg *Config) {
		cfg.hooks.beforeReplayBatch = func([][]byte) error {
			if pass.Load() {
				return nil
			}
			if armed.CompareAndSwap(true, false) {
				// The partition comes back during this replay.
				c.cutOff(f)
				for i := 0; i < 100 && f.HasQuorum(); i++ {
					time.Sleep(5 * time.Millisecond)
				}
				f.fb.lastQuorum.Store(time.Now().Add(-time.Minute).UnixNano())
			}
			return fmt.Errorf("test: leader busy: %w", ErrNoLeader)
		}
	})
	mustApply(t, f, registerEntry(t, "AGAIN", "1"))
	c.heal(f)
	leader := c.leader()
	c.waitFor(time.Second, "quorum back on "+f.ID(), func() bool { return !f.QuorumLost() })
	armed.Store(true)
	if _, err := f.Apply(t.Context(), registerEntry(t, "AGAIN", "2")); err != nil {
		t.Fatalf("write while quorum goes away during the replay: %v", err)
	}
	var journaled []string
	for _, rec := range f.fb.journal.Records() {
		cmd, err := fsm.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		journaled = append(journaled, cmd.Body.(*fsm.RegisterBody).Instance.InstanceID)
	}
	if !slices.Equal(journaled, []string{"1", "2"}) || !f.QuorumLost() {
		t.Fatalf("journal %v (quorum lost %v), want [1 2] without quorum", journaled, f.QuorumLost())
	}
	pass.Store(true)
	c.heal(f)
	c.waitFor(2*time.Second, "the journal replayed", func() bool { return f.fb.journal.Len() == 0 })
	if got, want := leader.committed(t, "AGAIN"), []string{"register 1", "register 2"}; !slices.Equal(got, want) {
		t.Fatalf("leader's log %v, want %v", got, want)
	}
}

// The AP fallback journal is replayed through the leader in the order the
// writes were accepted, once quorum returns; a cancel and a register again
// of the same instance come out right only in that order.
func TestMem_JournalReplayOrder(t *testing.T) {
	c, f := startCutOff(t, ModeAP, nil)
	writes := [][]byte{
		registerEntry(t, "ORD", "1"), registerEntry(t, "ORD", "2"), registerEntry(t, "ORD", "3"),
		cancelEntry(t, "ORD", "3"), registerEntry(t, "ORD", "3"), registerEntry(t, "ORD", "4"),
		cancelEntry(t, "ORD", "1"),
	}
	want := []string{"register 1", "register 2", "register 3", "cancel 3", "register 3", "register 4", "cancel 1"}
	mustApply(t, f, writes...)
	if f.fb.journal.Len() != len(writes) {
		t.Fatalf("journal holds %d entries, want %d", f.fb.journal.Len(), len(writes))
	}
	c.heal(f)
	c.waitFor(2*time.Second, "the journal replayed", func() bool { return f.fb.journal.Len() == 0 })
	leader := c.leader()
	for _, mn := range c.nodes {
		c.waitFor(time.Second, "the replayed writes on "+mn.ID(), func() bool {
			return slices.Equal(mn.committed(t, "ORD"), want) && mn.fsm.AppliedIndex() >= leader.fsm.AppliedIndex()
		})
		for id, present := range map[string]bool{"1": false, "2": true, "3": true, "4": true} {
			if inFSM(mn.Node, "ORD", id) != present {
				t.Fatalf("%s: ORD/%s present = %v, want %v", mn.ID(), id, !present, present)
			}
		}
	}
	if f.InFallback() {
		t.Fatal("still in fallback after the replay")
	}
}

// A follower's renewals reach the leader's batch; "not found" for an
// instance only the leader could judge, and "not leader" from a node that
// does not lead, come back to the caller.
func TestMem_RenewForwarding(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	fs := c.followers()
	f, other := fs[0], fs[1]
	for _, id := range []string{"1", "2"} {
		if _, err := leader.Apply(t.Context(), registerEntry(t, "REN", id)); err != nil {
			t.Fatal(err)
		}
	}
	c.waitFor(time.Second, "registrations on "+f.ID(), func() bool { return inFSM(f.Node, "REN", "2") })
	for _, id := range []string{"1", "2"} {
		if err := f.Renew(t.Context(), "REN", id, 0); err != nil {
			t.Fatalf("renew on a follower: %v", err)
		}
	}
	c.waitFor(time.Second, "the renewals in the leader's batch", func() bool {
		p := leader.renew.pendingTimes()
		_, ok1 := p[renewKey{"REN", "1"}]
		_, ok2 := p[renewKey{"REN", "2"}]
		return ok1 && ok2
	})
	if c.net.callCount(f.self.HTTPAddr, nodeapi.PathRenewBatch) == 0 {
		t.Fatal("no renewal batch went from the follower to the leader")
	}
	if c.net.callCount(f.self.HTTPAddr, nodeapi.PathRenewBatch+"?answered=true") == 0 {
		t.Fatal("the follower's renewals went to the leader to be judged again, not as answered")
	}

	// An instance the follower does not hold: the leader decides, and its
	// "not found" is the answer.
	before := c.net.callCount(f.self.HTTPAddr, nodeapi.PathRenewBatch)
	if err := f.Renew(t.Context(), "REN", "nope", 0); !errors.Is(err, fsm.ErrInstanceNotFound) {
		t.Fatalf("renew of an unknown instance: %v, want ErrInstanceNotFound", err)
	}
	if c.net.callCount(f.self.HTTPAddr, nodeapi.PathRenewBatch) != before+1 {
		t.Fatal("the unknown instance's renewal was not judged by the leader")
	}

	// Per-renewal results of a batch, over the wire.
	res, err := f.peers().RenewBatch(t.Context(), leader.self.HTTPAddr, nodeapi.RenewJudge,
		encodeRenewBatch([]renewRequest{{App: "REN", ID: "1"}, {App: "REN", ID: "nope"}}))
	if err != nil || !bytes.Equal(res, []byte{renewOK, renewNotFound}) {
		t.Fatalf("batch results %v, %v; want [ok not-found]", res, err)
	}
	// A node that does not lead answers the whole batch "not leader".
	for _, kind := range []nodeapi.RenewBatchKind{nodeapi.RenewJudge, nodeapi.RenewAnswered} {
		_, err = f.peers().RenewBatch(t.Context(), other.self.HTTPAddr, kind, encodeRenewBatch([]renewRequest{{App: "REN", ID: "1"}}))
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("renew batch of kind %d sent to a follower: %v, want ErrNotLeader", kind, err)
		}
	}

	// A batch its sender judged and answered is recorded as it is: the
	// leader does not judge it again, so a renewal of an instance it does
	// not hold is taken too, not sent again (the log's renewal of it is
	// skipped when applied).
	res, err = f.peers().RenewBatch(t.Context(), leader.self.HTTPAddr, nodeapi.RenewAnswered,
		encodeRenewBatch([]renewRequest{{App: "REN", ID: "2"}, {App: "REN", ID: "gone"}}))
	if err != nil || !bytes.Equal(res, []byte{renewOK, renewOK}) {
		t.Fatalf("answered batch results %v, %v; want [ok ok]", res, err)
	}
	if _, ok := leader.renew.pendingTimes()[renewKey{"REN", "gone"}]; !ok {
		t.Fatal("the answered renewal is not in the leader's batch")
	}
}

// Renewals a leader answers "not leader" (it stepped down mid-batch) are
// kept by the follower and sent again, not dropped.
func TestMem_RenewNotLeaderResultsRetried(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	f := c.followers()[0]
	if _, err := leader.Apply(t.Context(), registerEntry(t, "RETRY", "1")); err != nil {
		t.Fatal(err)
	}
	c.waitFor(time.Second, "the registration on "+f.ID(), func() bool { return inFSM(f.Node, "RETRY", "1") })
	var faults atomic.Int32
	faults.Store(1)
	c.net.mu.Lock()
	c.net.intercept = func(from string, r *http.Request) *http.Response {
		if from != f.self.HTTPAddr || r.URL.Path != nodeapi.PathRenewBatch || faults.Add(-1) < 0 {
			return nil
		}
		body, _ := io.ReadAll(r.Body)
		reqs, err := decodeRenewBatch(body)
		if err != nil {
			return nil
		}
		res := bytes.Repeat([]byte{renewNotLeader}, len(reqs))
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Request: r,
			Body: io.NopCloser(bytes.NewReader(res)), ContentLength: int64(len(res))}
	}
	c.net.mu.Unlock()
	if err := f.Renew(t.Context(), "RETRY", "1", 0); err != nil {
		t.Fatal(err)
	}
	c.waitFor(time.Second, "the renewal in the leader's batch after a not-leader answer", func() bool {
		_, ok := leader.renew.pendingTimes()[renewKey{"RETRY", "1"}]
		return ok
	})
	if got := c.net.callCount(f.self.HTTPAddr, nodeapi.PathRenewBatch); got < 2 {
		t.Fatalf("renewal batches sent: %d, want a retry after the not-leader answer", got)
	}
}

// lastRenewal is the FSM's last renewal time of app/id on mn (0: absent).
func lastRenewal(mn *memNode, app, id string) int64 {
	var ts int64
	mn.fsm.Read(func(r *fsm.Registry) {
		if e := r.Get(app, id); e != nil {
			ts = e.LastRenewalTs
		}
	})
	return ts
}

// Leader-only work (renewal batch flushing, lease eviction) runs on the
// leader only, stops on the old leader when leadership is transferred and
// starts on the new one.
func TestMem_LeaderWorkHandOver(t *testing.T) {
	const batchEvery = 20 * time.Millisecond
	c := startMemCluster(t, 3, ModeAP, func(_ int, cfg *Config) { cfg.RenewBatchInterval = batchEvery })
	old := c.leader()
	working := func(mn *memNode) bool { return mn.leases.tracking.Load() && mn.rd.leaderTerm.Load() != 0 }
	for _, mn := range c.nodes {
		want := mn == old
		c.waitFor(time.Second, fmt.Sprintf("leader work on %s = %v", mn.ID(), want), func() bool { return working(mn) == want })
	}
	if _, err := old.Apply(t.Context(), registerEntry(t, "HAND", "1")); err != nil {
		t.Fatal(err)
	}
	renewedOnAll := func(after int64) {
		t.Helper()
		for _, mn := range c.nodes {
			c.waitFor(time.Second, "a flushed renewal batch on "+mn.ID(), func() bool { return lastRenewal(mn, "HAND", "1") > after })
		}
	}
	f := c.followers()[0]
	c.waitFor(time.Second, "the registration on "+f.ID(), func() bool { return inFSM(f.Node, "HAND", "1") })
	reg := lastRenewal(f, "HAND", "1")
	time.Sleep(2 * time.Millisecond) // a renewal in a later millisecond than the registration
	if err := f.Renew(t.Context(), "HAND", "1", 0); err != nil {
		t.Fatal(err)
	}
	renewedOnAll(reg)

	transferred := time.Now()
	if err := old.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	next := c.leader()
	if next == old {
		t.Fatal("leadership did not move")
	}
	c.waitFor(time.Second, "leader work handed over", func() bool { return !working(old) && working(next) })
	next.leases.mu.Lock()
	since := next.leases.leaderSince
	next.leases.mu.Unlock()
	if since < transferred.UnixMilli() {
		t.Fatalf("new leader's lease grace starts at %d, before the transfer at %d", since, transferred.UnixMilli())
	}
	// The old leader asks the new one for lease numbers now.
	st, err := old.LeaseStatus(t.Context())
	if err != nil || st.From != next.ID() {
		t.Fatalf("lease status from the old leader: %+v, %v; want it from %s", st, err, next.ID())
	}

	// The new leader flushes renewals, here one accepted on the old leader.
	prev := lastRenewal(old, "HAND", "1")
	time.Sleep(2 * time.Millisecond)
	if err := old.Renew(t.Context(), "HAND", "1", 0); err != nil {
		t.Fatal(err)
	}
	renewedOnAll(prev)
	if c.net.callCount(old.self.HTTPAddr, nodeapi.PathRenewBatch) == 0 {
		t.Fatal("the old leader did not forward its renewal")
	}
	// The old leader's batcher no longer flushes: a renewal left in it
	// stays there.
	stale := fsm.Renewal{App: "HAND", ID: "1", Ts: time.Now().Add(time.Hour).UnixMilli()}
	if _, err := old.renew.add(stale); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * batchEvery)
	if _, pending := old.renew.pendingTimes()[renewKey{"HAND", "1"}]; !pending {
		t.Fatal("the old leader's batcher flushed after losing leadership")
	}
	for _, mn := range c.nodes {
		if lastRenewal(mn, "HAND", "1") == stale.Ts {
			t.Fatalf("a renewal batch from the old leader reached %s", mn.ID())
		}
	}
}

// A stale snapshot saved on a node in AP fallback holds the writes it
// acknowledged into its journal, not only the committed state: a backup
// taken during an outage must not leave acknowledged writes out.
func TestMem_StaleSnapshotHoldsJournaledWrites(t *testing.T) {
	_, f := startCutOff(t, ModeAP, nil)
	mustApply(t, f, registerEntry(t, "OUTAGE", "1"))
	var buf bytes.Buffer
	if err := f.SaveSnapshot(t.Context(), &buf, true); err != nil {
		t.Fatal(err)
	}
	st, err := fsm.ReadSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(st.Entries, func(e *fsm.Entry) bool { return e.App == "OUTAGE" && e.ID == "1" }) {
		t.Fatalf("the stale snapshot leaves out the journaled write (%d entries)", len(st.Entries))
	}
}

// A cancel a cut-off node journaled loses to a registration of the same
// instance made on the majority meanwhile, and applies when there was none:
// the newer registration was acknowledged, and replaying the older cancel
// over it would lose it. The registration here keeps its lastDirtyTimestamp,
// as a client registering again does.
func TestMem_JournaledCancelLosesToANewerRegistration(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	f := c.followers()[0]
	mustApply(t, leader, registerEntry(t, "CONF", "again"), registerEntry(t, "CONF", "gone"))
	c.waitFor(2*time.Second, "the registrations on "+f.ID(), func() bool {
		return inFSM(f.Node, "CONF", "again") && inFSM(f.Node, "CONF", "gone")
	})
	c.loseQuorum(f)
	mustApply(t, f, cancelEntry(t, "CONF", "again"), cancelEntry(t, "CONF", "gone"))
	time.Sleep(5 * time.Millisecond) // a registration time of its own
	mustApply(t, leader, registerEntry(t, "CONF", "again"))
	c.heal(f)
	c.waitFor(3*time.Second, "the journal replayed", func() bool { return f.fb.journal.Len() == 0 })
	for _, mn := range c.nodes {
		c.waitFor(time.Second, "the replay on "+mn.ID(), func() bool { return mn.fsm.AppliedIndex() >= leader.fsm.AppliedIndex() })
		if !inFSM(mn.Node, "CONF", "again") {
			t.Errorf("%s: the registration made while %s was cut off was lost to its older cancel", mn.ID(), f.ID())
		}
		if inFSM(mn.Node, "CONF", "gone") {
			t.Errorf("%s: the journaled cancel of an instance nobody registered again did not apply", mn.ID())
		}
	}
}

// Status overrides and metadata changes journaled by a node cut off carry
// the registration they were made on, as cancels do: a registration of the
// instance made elsewhere meanwhile stands, however late the journal
// reaches the cluster (a removed node hands its journal over long after).
// On the old code the replay merged the older change into the newer
// registration.
func TestMem_JournaledChangesLoseToANewerRegistration(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	f := c.followers()[0]
	mustApply(t, leader, registerEntry(t, "CONF", "md"), registerEntry(t, "CONF", "st"), registerEntry(t, "CONF", "kept"))
	c.waitFor(2*time.Second, "the registrations on "+f.ID(), func() bool {
		return inFSM(f.Node, "CONF", "md") && inFSM(f.Node, "CONF", "st") && inFSM(f.Node, "CONF", "kept")
	})
	c.loseQuorum(f)
	encode := func(typ fsm.CmdType, body any) []byte {
		t.Helper()
		e, err := fsm.Encode(typ, body)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	mustApply(t, f,
		encode(fsm.CmdMetadata, &fsm.MetadataBody{App: "CONF", ID: "md", Metadata: map[string]string{"old": "1"}}),
		encode(fsm.CmdSetOverride, &fsm.OverrideBody{App: "CONF", ID: "st", Status: fsm.StatusOutOfService}),
		encode(fsm.CmdMetadata, &fsm.MetadataBody{App: "CONF", ID: "kept", Metadata: map[string]string{"old": "1"}}))
	time.Sleep(5 * time.Millisecond) // a registration time of its own
	mustApply(t, leader, registerEntry(t, "CONF", "md"), registerEntry(t, "CONF", "st"))
	c.heal(f)
	c.waitFor(3*time.Second, "the journal replayed", func() bool { return f.fb.journal.Len() == 0 })
	for _, mn := range c.nodes {
		c.waitFor(time.Second, "the replay on "+mn.ID(), func() bool { return mn.fsm.AppliedIndex() >= leader.fsm.AppliedIndex() })
		mn.fsm.Read(func(r *fsm.Registry) {
			if e := r.Get("CONF", "md"); e == nil || e.Instance.Metadata.Map()["old"] != "" {
				t.Errorf("%s: the metadata change made on the older registration reached the newer one", mn.ID())
			}
			if e := r.Get("CONF", "st"); e == nil || e.Override != "" {
				t.Errorf("%s: the override made on the older registration reached the newer one", mn.ID())
			}
			if e := r.Get("CONF", "kept"); e == nil || e.Instance.Metadata.Map()["old"] != "1" {
				t.Errorf("%s: the journaled metadata change of an instance nobody registered again did not apply", mn.ID())
			}
		})
	}
}
