package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func newReg() *Registry { return NewRegistry(0) }

func reg(r *Registry, idx uint64, ts int64, in *Instance) {
	r.register(idx, ts, in, false, &Change{})
}

func TestRegistry_RegisterAndHash(t *testing.T) {
	r := newReg()
	reg(r, 1, 1000, testInstance("A", "1", StatusUp, 10))
	reg(r, 2, 1001, testInstance("A", "2", StatusUp, 10))
	reg(r, 3, 1002, testInstance("B", "1", StatusOutOfService, 10))
	if got := r.HashCode(); got != "OUT_OF_SERVICE_1_UP_2_" {
		t.Fatalf("hash %q", got)
	}
	if r.Count() != 3 || len(r.AppNames()) != 2 {
		t.Fatalf("count %d apps %v", r.Count(), r.AppNames())
	}
	e := r.Get("A", "1")
	if e.RegistrationTs != 1000 || e.LastRenewalTs != 1000 || e.ServiceUpTs != 1000 || e.ActionType != ActionAdded {
		t.Fatalf("lease %+v", e)
	}
	if HashCode(nil) != "" {
		t.Fatal("empty hash must be empty string")
	}
}

func TestRegistry_OverrideRuleChain(t *testing.T) {
	r := newReg()
	reg(r, 1, 1000, testInstance("A", "1", StatusUp, 10))
	if err := r.setOverride(2, 1100, &OverrideBody{App: "A", ID: "1", Status: StatusOutOfService}, &Change{}); err != nil {
		t.Fatal(err)
	}
	e := r.Get("A", "1")
	if e.Instance.Status != StatusOutOfService || e.Instance.OverriddenStatus != StatusOutOfService || e.ActionType != ActionModified {
		t.Fatalf("after override: %+v", e.Instance)
	}
	// reregister registers A/1 again with status and checks the status it
	// is given.
	reregister := func(idx uint64, ts int64, status string, ldt int64, want, what string) {
		t.Helper()
		reg(r, idx, ts, testInstance("A", "1", status, ldt))
		if s := r.Get("A", "1").Instance.Status; s != want {
			t.Fatalf("%s: status %s, want %s", what, s, want)
		}
	}
	// Re-register with UP keeps the admin override (rule 2).
	reregister(3, 1200, StatusUp, 20, StatusOutOfService, "re-register UP")
	// A client's DOWN wins over any override (rule 1).
	reregister(4, 1300, StatusDown, 30, StatusDown, "client DOWN")
	// Delete the override: status UNKNOWN, and heartbeats must 404 until re-register.
	if err := r.deleteOverride(5, 1400, &OverrideBody{App: "A", ID: "1", Status: StatusUnknown}, &Change{}); err != nil {
		t.Fatal(err)
	}
	e = r.Get("A", "1")
	if e.Instance.Status != StatusUnknown || e.Override != "" || RenewStatus(e) != StatusUnknown {
		t.Fatalf("after delete override: %+v override %q", e.Instance, e.Override)
	}
	reregister(6, 1500, StatusUp, 40, StatusUp, "re-register after delete")
	// Without an override a non-replicated re-register cannot flip UP -> OUT_OF_SERVICE (rule 3).
	reregister(7, 1600, StatusOutOfService, 50, StatusUp, "client OOS over stored UP")
}

func TestRegistry_NewerStoredRecordIsKept(t *testing.T) {
	r := newReg()
	in := testInstance("A", "1", StatusUp, 500)
	in.Metadata = MetadataOf(map[string]string{"v": "new"})
	reg(r, 1, 1000, in)
	old := testInstance("A", "1", StatusUp, 400)
	old.Metadata = MetadataOf(map[string]string{"v": "old"})
	reg(r, 2, 1100, old)
	e := r.Get("A", "1")
	if mdGet(e.Instance.Metadata, "v") != "new" || e.RegistrationTs != 1100 {
		t.Fatalf("kept %+v", e)
	}
}

func TestRegistry_CancelRenewDeltaAndErrors(t *testing.T) {
	r := newReg()
	reg(r, 1, 1000, testInstance("A", "1", StatusUp, 10))
	r.renew([]Renewal{{App: "A", ID: "1", Ts: 2000}, {App: "A", ID: "nope", Ts: 2000}})
	if e := r.Get("A", "1"); e.LastRenewalTs != 2000 || r.Version() != 1 {
		t.Fatalf("renew: %+v version %d", e, r.Version())
	}
	if err := r.cancel(2, 3000, "A", "1", &Change{}); err != nil {
		t.Fatal(err)
	}
	if err := r.cancel(3, 3001, "A", "1", &Change{}); !errors.Is(err, ErrInstanceNotFound) {
		t.Fatalf("second cancel: %v", err)
	}
	for _, err := range []error{
		r.setOverride(4, 1, &OverrideBody{App: "A", ID: "1", Status: StatusUp}, &Change{}),
		r.deleteOverride(4, 1, &OverrideBody{App: "A", ID: "1", Status: StatusUp}, &Change{}),
		r.updateMetadata(4, 1, &MetadataBody{App: "A", ID: "1"}, &Change{}),
	} {
		if !errors.Is(err, ErrInstanceNotFound) {
			t.Fatalf("got %v", err)
		}
	}
	d := r.Delta(0)
	if len(d) != 1 || d[0].Action != ActionDeleted || d[0].Entry.EvictionTs != 3000 || d[0].Entry.ActionType != ActionDeleted {
		t.Fatalf("delta %+v", d)
	}
	if len(r.AppNames()) != 0 {
		t.Fatal("empty application must disappear")
	}
	// Retention: an old delta entry is pruned by a later command's clock.
	r.pruneDelta(3000 + DefaultDeltaRetention.Milliseconds() + 1)
	if len(r.Delta(0)) != 0 {
		t.Fatal("delta entry outlived retention")
	}
}

func TestRegistry_MetadataMergesInPlace(t *testing.T) {
	r := newReg()
	reg(r, 1, 1000, testInstance("A", "1", StatusUp, 10))
	before := r.Get("A", "1")
	c := &Change{}
	if err := r.updateMetadata(2, 2000, &MetadataBody{App: "A", ID: "1", Metadata: map[string]string{"zone": "b", "new": "x"}}, c); err != nil {
		t.Fatal(err)
	}
	e := r.Get("A", "1")
	if mdGet(e.Instance.Metadata, "zone") != "b" || mdGet(e.Instance.Metadata, "new") != "x" || mdGet(e.Instance.Metadata, "id") != "1" {
		t.Fatalf("metadata %v", e.Instance.Metadata)
	}
	if mdGet(before.Instance.Metadata, "zone") != "a" {
		t.Fatal("an older entry was mutated in place")
	}
	if e.RegistrationTs != 1000 || e.ActionType != ActionModified {
		t.Fatalf("metadata update must not re-register: %+v", e)
	}
	if len(c.Apps) == 0 || c.Apps[0] != "A" || len(c.VIPs) != 2 {
		t.Fatalf("change %+v", c)
	}
}

func TestInstance_ID(t *testing.T) {
	in := &Instance{HostName: "h"}
	if in.ID() != "h" {
		t.Fatal(in.ID())
	}
	in.DataCenterInfo = DataCenterInfo{Name: "Amazon", Metadata: MetadataOf(map[string]string{"instance-id": "i-1"})}
	if in.ID() != "i-1" {
		t.Fatal(in.ID())
	}
	in.InstanceID = "x"
	if in.ID() != "x" {
		t.Fatal(in.ID())
	}
}

// TestDeltaRetentionIsConfiguredOnce checks that the retention given to New
// is the one the registry (and so every reader of the delta) reports.
func TestDeltaRetentionIsConfiguredOnce(t *testing.T) {
	if got := New(5*time.Second, nil).reg.DeltaRetention(); got != 5*time.Second {
		t.Errorf("New(5s): registry retention %s", got)
	}
	if got := NewRegistry(0).DeltaRetention(); got != DefaultDeltaRetention {
		t.Errorf("NewRegistry(0): retention %s, want the default %s", got, DefaultDeltaRetention)
	}
	if got := NewRegistry(0).Clone().DeltaRetention(); got != DefaultDeltaRetention {
		t.Errorf("a clone's retention %s, want %s", got, DefaultDeltaRetention)
	}
}

// mdGet returns key's value in m, "" when absent.
func mdGet(m Metadata, key string) string {
	v, _ := m.Get(key)
	return v
}

// TestRegistry_DeltaSupersededAndPruned: an instance changed again while
// its earlier change is queued is listed once, with its latest action; the
// earlier change's record is let go, pruning it leaves the latest in place,
// and pruning the latest empties the queue.
func TestRegistry_DeltaSupersededAndPruned(t *testing.T) {
	r := NewRegistry(time.Second)
	reg(r, 1, 1000, testInstance("A", "1", StatusUp, 10))
	if err := r.cancel(2, 1100, "A", "1", &Change{}); err != nil {
		t.Fatal(err)
	}
	cancelled := r.deltaOrder[1]
	reg(r, 3, 1600, testInstance("A", "1", StatusUp, 20))
	reg(r, 4, 1700, testInstance("B", "1", StatusUp, 20))
	if d := r.Delta(0); len(d) != 2 || d[0].Action != ActionAdded || d[0].Entry.ModifyIndex != 3 {
		t.Fatalf("delta %+v", d)
	}
	if cancelled.Deleted != nil {
		t.Fatal("a superseded cancel keeps the instance's last record")
	}
	r.pruneDelta(2200) // drops changes before 1200: the first two, superseded
	if d := r.Delta(0); len(d) != 2 || len(r.deltaOrder) != 2 {
		t.Fatalf("after pruning the superseded changes: delta %+v, order %d", d, len(r.deltaOrder))
	}
	r.pruneDelta(2650) // drops A/1's latest change, keeps B/1's
	if d := r.Delta(0); len(d) != 1 || d[0].Entry.App != "B" {
		t.Fatalf("after pruning A/1: %+v", d)
	}
	r.pruneDelta(5000)
	if len(r.Delta(0)) != 0 || len(r.delta) != 0 || len(r.deltaOrder) != 0 {
		t.Fatalf("queue not empty: %d %d", len(r.delta), len(r.deltaOrder))
	}
}

// The bootstrap mode applies only while no mode is set: a first leader
// writing it after an operator's change does not undo that change.
func TestRegistry_BootstrapModeDoesNotOverride(t *testing.T) {
	r := NewRegistry(0)
	for i, b := range []*ModeBody{{Mode: "cp"}, {Mode: "ap", IfUnset: true}} {
		cmd, err := Decode(mustEncode(t, CmdSetMode, 1, b))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Apply(uint64(i+1), cmd, &Change{}); err != nil {
			t.Fatal(err)
		}
	}
	if r.Mode() != "cp" {
		t.Fatalf("mode %q: the bootstrap write undid the operator's cp", r.Mode())
	}
	cmd, _ := Decode(mustEncode(t, CmdSetMode, 1, &ModeBody{Mode: "ap", IfUnset: true}))
	fresh := NewRegistry(0)
	_ = fresh.Apply(1, cmd, &Change{})
	if fresh.Mode() != "ap" {
		t.Fatalf("bootstrap mode on a fresh registry: %q", fresh.Mode())
	}
}

// The lease shapes the registry counts as entries change are what a scan
// of its entries counts, after any sequence of commands, a restore and a
// clone.
func TestRegistry_LeaseShapesMatchAScan(t *testing.T) {
	scan := func(r *Registry) map[LeaseShape]int {
		out := map[LeaseShape]int{}
		r.Range(func(e *Entry) { out[shapeOf(e)]++ })
		return out
	}
	counted := func(r *Registry) map[LeaseShape]int {
		out := map[LeaseShape]int{}
		shapes := r.LeaseShapes()
		for i, sh := range shapes {
			out[sh.LeaseShape] = sh.Instances
			if i > 0 && (sh.RenewalIntervalSecs < shapes[i-1].RenewalIntervalSecs ||
				sh.RenewalIntervalSecs == shapes[i-1].RenewalIntervalSecs && sh.DurationSecs <= shapes[i-1].DurationSecs) {
				t.Fatalf("shapes out of order: %v", shapes)
			}
		}
		return out
	}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		cmds := randomCommands(t, seed, 300)
		// Registrations with other intervals and durations, in between.
		for i := range 60 {
			in := testInstance([]string{"ORDERS", "USERS"}[i%2], fmt.Sprintf("i-%d", rng.IntN(12)), StatusUp, 1)
			in.RenewalIntervalSecs, in.DurationSecs = int32(rng.IntN(4)*10), int32(rng.IntN(3)*45)
			at := rng.IntN(len(cmds) + 1)
			cmds = slices.Insert(cmds, at, mustEncode(t, CmdRegister, 1_700_000_000_000+int64(at), &RegisterBody{Instance: in}))
		}
		f := New(0, nil)
		for i, c := range cmds {
			f.Apply(&raft.Log{Index: uint64(i + 1), Data: c})
			var got, want map[LeaseShape]int
			f.Read(func(r *Registry) { got, want = counted(r), scan(r) })
			if !maps.Equal(got, want) {
				t.Fatalf("seed %d, after command %d: counted %v, a scan finds %v", seed, i, got, want)
			}
		}
		restored := New(0, nil)
		if err := restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
			t.Fatal(err)
		}
		restored.Read(func(r *Registry) {
			if got, want := counted(r), scan(r); !maps.Equal(got, want) {
				t.Fatalf("seed %d, restored: counted %v, a scan finds %v", seed, got, want)
			}
			c := r.Clone()
			if got, want := counted(c), scan(c); !maps.Equal(got, want) {
				t.Fatalf("seed %d, clone: counted %v, a scan finds %v", seed, got, want)
			}
		})
	}
}

// A registry that only renews after its registrations still lets them
// age out of the delta queue: renewal batches advance the queue's clock,
// so the queue and its index are emptied once the retention has passed,
// not kept until the next content change.
func TestRegistry_RenewalsAgeTheDeltaQueue(t *testing.T) {
	r := newReg()
	for i := range 50 {
		reg(r, uint64(i+1), 1000, testInstance("A", fmt.Sprint(i), StatusUp, 10))
	}
	renewAt := func(idx uint64, ts int64) {
		t.Helper()
		cmd := Command{Type: CmdRenewBatch, Ts: ts, Body: &RenewBatchBody{Renewals: []Renewal{{App: "A", ID: "3", Ts: ts}}}}
		if err := r.Apply(idx, cmd, &Change{}); err != nil {
			t.Fatal(err)
		}
	}
	renewAt(100, 1000+DefaultDeltaRetention.Milliseconds())
	if len(r.delta) != 50 || len(r.deltaOrder) != 50 {
		t.Fatalf("within the retention the queue holds %d (%d in order), want 50", len(r.delta), len(r.deltaOrder))
	}
	renewAt(101, 1000+DefaultDeltaRetention.Milliseconds()+1)
	if len(r.delta) != 0 || len(r.deltaOrder) != 0 || len(r.Delta(0)) != 0 {
		t.Fatalf("past the retention the queue holds %d (%d in order), want none", len(r.delta), len(r.deltaOrder))
	}
	if e := r.Get("A", "3"); e == nil || e.LastRenewalTs != 1000+DefaultDeltaRetention.Milliseconds()+1 {
		t.Fatalf("the renewal was not applied: %+v", e)
	}
}

// A registration without an application name or instance id (the HTTP
// edge refuses both; a crafted or peer entry may still carry one) is
// refused as a bad command and leaves nothing: the FSM must never hold an
// entry its own snapshot check refuses, or the node could not restore its
// own snapshot after a restart.
func TestRegister_WithoutNamesIsRefusedAndLeavesNothing(t *testing.T) {
	f := New(0, nil)
	ts := int64(1_700_000_000_000)
	noApp := testInstance("", "i-1", StatusUp, ts)
	noID := testInstance("ORDERS", "", StatusUp, ts)
	noID.HostName = ""
	for i, in := range []*Instance{noApp, noID} {
		res := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: mustEncode(t, CmdRegister, ts, &RegisterBody{Instance: in})})
		err, _ := res.(error)
		if !errors.Is(err, ErrBadCommand) {
			t.Fatalf("register %q/%q answered %v, want ErrBadCommand", in.App, in.ID(), res)
		}
	}
	f.Read(func(r *Registry) {
		if r.Count() != 0 || len(r.AppNames()) != 0 {
			t.Fatalf("refused registrations left %d instances in %v", r.Count(), r.AppNames())
		}
	})
	restored := New(0, nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatalf("the FSM's own snapshot is refused: %v", err)
	}
}
