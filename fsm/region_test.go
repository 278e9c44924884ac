package fsm

import (
	"bytes"
	"io"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func regionEntry(app, id, status string, ts int64) *Entry {
	return &Entry{App: app, ID: id, Instance: testInstance(app, id, status, ts), RegistrationTs: ts, LastRenewalTs: ts}
}

func applyRegion(t *testing.T, f *FSM, idx uint64, ts int64, b *RegionUpdateBody) Change {
	t.Helper()
	var got Change
	f.Observe(func(c Change) {
		if c.Index == idx {
			got = c
		}
	})
	if res := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: mustEncode(t, CmdRegionUpdate|CmdIgnoreUnknown, ts, b)}); res != nil {
		t.Fatalf("apply region update %d: %v", idx, res)
	}
	return got
}

func westCount(f *FSM) (n int, ok bool) {
	f.Read(func(r *Registry) {
		var rr RemoteRegion
		if rr, ok = r.RemoteRegion("west"); ok {
			n = rr.Copy.Count()
		}
	})
	return n, ok
}

// A pass staged in chunks is invisible until its final chunk, which applies
// it whole; a new pass throws away the chunks of one a leader change cut
// short. The copy is the region's own: the local registry and the change's
// Keys (which leases and outbound replication follow) are untouched.
func TestRegion_StagedPassAppliesWhole(t *testing.T) {
	f := New(0, nil)
	ts := int64(1_700_000_000_000)
	applyRegion(t, f, 1, ts, &RegionUpdateBody{Region: "west", Pass: 7, Put: []*Entry{regionEntry("A", "a1", StatusUp, ts)}})
	applyRegion(t, f, 2, ts, &RegionUpdateBody{Region: "west", Pass: 7, Put: []*Entry{regionEntry("A", "a2", StatusUp, ts)}})
	if n, _ := westCount(f); n != 0 {
		t.Fatalf("staged chunks are visible: %d instances", n)
	}
	// Another pass starts: pass 7's chunks are dropped.
	c := applyRegion(t, f, 3, ts, &RegionUpdateBody{Region: "west", Pass: 8, Final: true,
		Put:    []*Entry{regionEntry("B", "b1", StatusDown, ts)},
		Status: &RegionStatus{Loaded: true, Reachable: true, Kind: "heureka", SyncedAt: ts}})
	if n, _ := westCount(f); n != 1 {
		t.Fatalf("after pass 8: %d instances, want 1 (pass 7 dropped)", n)
	}
	if c.Region != "west" || len(c.Keys) != 0 || !reflect.DeepEqual(c.Apps, []string{"B"}) {
		t.Fatalf("change = %+v, want region west, apps [B], no keys", c)
	}
	applyRegion(t, f, 4, ts+1, &RegionUpdateBody{Region: "west", Pass: 9, Put: []*Entry{regionEntry("A", "a1", StatusUp, ts)}})
	applyRegion(t, f, 5, ts+2, &RegionUpdateBody{Region: "west", Pass: 9, Final: true,
		Put: []*Entry{regionEntry("B", "b1", StatusUp, ts)}, Delete: []KeyBody{{App: "NOPE", ID: "x"}}})
	f.Read(func(r *Registry) {
		if r.Count() != 0 {
			t.Errorf("the local registry holds %d instances", r.Count())
		}
		rr, _ := r.RemoteRegion("west")
		if got := rr.Copy.HashCode(); got != "UP_2_" {
			t.Errorf("copy hash = %q, want UP_2_", got)
		}
		if !rr.Status.Loaded || rr.Status.SyncedAt != ts {
			t.Errorf("status = %+v: a final chunk without a status keeps the old one", rr.Status)
		}
		var actions []string
		for _, d := range rr.Copy.Delta(0) {
			actions = append(actions, d.Entry.ID+":"+d.Action)
		}
		if want := []string{"a1:ADDED", "b1:MODIFIED"}; !reflect.DeepEqual(actions, want) {
			t.Errorf("copy delta = %v, want %v", actions, want)
		}
	})
	c = applyRegion(t, f, 6, ts+3, &RegionUpdateBody{Region: "west", Pass: 10, Final: true, Delete: []KeyBody{{App: "A", ID: "a1"}}})
	f.Read(func(r *Registry) {
		rr, _ := r.RemoteRegion("west")
		d := rr.Copy.Delta(0)
		if last := d[len(d)-1]; last.Action != ActionDeleted || last.Entry.ID != "a1" || last.Entry.Instance == nil {
			t.Errorf("a deletion's delta entry = %+v, want a1 DELETED with its last record", last)
		}
	})
	if !reflect.DeepEqual(c.Apps, []string{"A"}) {
		t.Errorf("deletion change apps = %v, want [A]", c.Apps)
	}
}

// The copy, its status, its delta queue and a staged pass survive a
// snapshot and a restore byte for byte, and a restored FSM holds the
// copy before any entry is replayed: a restart never shows a remote
// region empty.
func TestRegion_SnapshotKeepsCopyAndStagedPass(t *testing.T) {
	f := New(0, nil)
	ts := int64(1_700_000_000_000)
	applyRegion(t, f, 1, ts, &RegionUpdateBody{Region: "west", Pass: 1, Final: true,
		Put:    []*Entry{regionEntry("A", "a1", StatusUp, ts), regionEntry("A", "a2", StatusUp, ts)},
		Status: &RegionStatus{Loaded: true, Reachable: true, Kind: "eureka", SyncedAt: ts}})
	applyRegion(t, f, 2, ts, &RegionUpdateBody{Region: "west", Pass: 2, Put: []*Entry{regionEntry("C", "c1", StatusUp, ts)}})
	snap := snapshotBytes(t, f)

	restored := New(0, nil)
	if err := restored.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if n, ok := westCount(restored); !ok || n != 2 {
		t.Fatalf("restored copy: %d instances (known %v), want 2", n, ok)
	}
	if !bytes.Equal(snapshotBytes(t, restored), snap) {
		t.Fatal("a restored state snapshots to other bytes")
	}
	// The staged chunk came through: pass 2's final chunk applies it.
	applyRegion(t, restored, 3, ts, &RegionUpdateBody{Region: "west", Pass: 2, Final: true})
	if n, _ := westCount(restored); n != 3 {
		t.Fatalf("after the staged pass: %d instances, want 3", n)
	}
	// Clone (the AP overlay's base) carries the copies too.
	restored.Read(func(r *Registry) {
		if rr, ok := r.Clone().RemoteRegion("west"); !ok || rr.Copy.Count() != 3 {
			t.Fatal("a clone lost the remote region's copy")
		}
	})
}

// A snapshot whose remote region copy is inconsistent is refused like a
// damaged local registry.
func TestRegion_RestoreRejectsDamagedCopy(t *testing.T) {
	ts := int64(1_700_000_000_000)
	bad := []*State{
		{Regions: []RegionState{{Name: ""}}},
		{Regions: []RegionState{{Name: "w"}, {Name: "w"}}},
		{Regions: []RegionState{{Name: "w", Copy: &State{Entries: []*Entry{{App: "A", ID: "1"}}}}}},
		{Regions: []RegionState{{Name: "w", Copy: &State{Regions: []RegionState{{Name: "x"}}}}}},
		{Regions: []RegionState{{Name: "w", Copy: &State{Entries: []*Entry{regionEntry("A", "a1", StatusUp, ts), regionEntry("A", "a1", StatusUp, ts)}}}}},
	}
	for i, st := range bad {
		st.Format = SnapshotFormat
		var buf bytes.Buffer
		if err := st.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		if err := New(0, nil).Restore(io.NopCloser(&buf)); err == nil {
			t.Errorf("state %d restored without an error", i)
		}
	}
}

// DeltaAfter lists exactly the changes after a sequence number, each
// instance once with its latest change, and says when changes after it
// aged out of the queue (or were lost in a restore).
func TestRegistry_DeltaAfter(t *testing.T) {
	r := NewRegistry(time.Minute)
	ts := int64(1_700_000_000_000)
	apply := func(idx uint64, at int64, typ CmdType, body any) {
		t.Helper()
		cmd, err := Decode(mustEncode(t, typ, at, body))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Apply(idx, cmd, &Change{}); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, ts, CmdRegister, &RegisterBody{Instance: testInstance("A", "a1", StatusUp, ts)})
	apply(2, ts, CmdRegister, &RegisterBody{Instance: testInstance("A", "a2", StatusUp, ts)})
	seq := r.DeltaSeq()
	apply(3, ts+1, CmdRegister, &RegisterBody{Instance: testInstance("A", "a3", StatusUp, ts)})
	apply(4, ts+2, CmdCancel, &KeyBody{App: "A", ID: "a1"})
	apply(5, ts+3, CmdSetOverride, &OverrideBody{App: "A", ID: "a3", Status: StatusOutOfService, LastDirtyTimestamp: ts})
	got, ok := r.DeltaAfter(seq)
	var items []string
	for _, d := range got {
		items = append(items, d.Entry.ID+":"+d.Action)
	}
	if !ok || strings.Join(items, " ") != "a1:DELETED a3:MODIFIED" {
		t.Fatalf("after %d: %v (complete %v), want a1:DELETED a3:MODIFIED", seq, items, ok)
	}
	if got, ok := r.DeltaAfter(r.DeltaSeq()); !ok || len(got) != 0 {
		t.Fatalf("after the latest: %d changes, complete %v", len(got), ok)
	}
	if _, ok := r.DeltaAfter(^uint64(0)); !ok {
		t.Fatal("a sequence number from the future is not complete")
	}
	// A minute later the first changes age out: asking from before them
	// is incomplete, from after them complete.
	last := r.DeltaSeq()
	apply(6, ts+61_000, CmdRegister, &RegisterBody{Instance: testInstance("B", "b1", StatusUp, ts)})
	if _, ok := r.DeltaAfter(seq); ok {
		t.Fatal("changes after an aged-out one reported complete")
	}
	if got, ok := r.DeltaAfter(last); !ok || len(got) != 1 {
		t.Fatalf("after %d: %d changes (complete %v), want b1", last, len(got), ok)
	}
	// A restored queue counts what came before its oldest change as gone.
	c := r.Clone()
	if _, ok := c.DeltaAfter(last - 1); ok {
		t.Fatal("a clone reports changes before its oldest as complete")
	}
	if got, ok := c.DeltaAfter(last); !ok || len(got) != 1 {
		t.Fatalf("clone after %d: %d changes (complete %v)", last, len(got), ok)
	}
}

// A Clone's staged chunks are its own: the next chunk applied to the clone
// (the read gate replays uncommitted entries into one) must not land in
// the registry it was cloned from, nor the other way round.
func TestRegion_CloneStagesItsOwnChunks(t *testing.T) {
	f := New(0, nil)
	ts := int64(1_700_000_000_000)
	for i, id := range []string{"a1", "a2", "a3"} {
		applyRegion(t, f, uint64(i+1), ts, &RegionUpdateBody{Region: "west", Pass: 5, Put: []*Entry{regionEntry("A", id, StatusUp, ts)}})
	}
	chunk := func(id string) Command {
		cmd, err := Decode(mustEncode(t, CmdRegionUpdate|CmdIgnoreUnknown, ts, &RegionUpdateBody{Region: "west", Pass: 5, Put: []*Entry{regionEntry("A", id, StatusUp, ts)}}))
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	final, err := Decode(mustEncode(t, CmdRegionUpdate|CmdIgnoreUnknown, ts, &RegionUpdateBody{Region: "west", Pass: 5, Final: true}))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(r *Registry) []string {
		rr, _ := r.RemoteRegion("west")
		var out []string
		rr.Copy.Range(func(e *Entry) { out = append(out, e.ID) })
		sort.Strings(out)
		return out
	}
	f.Read(func(r *Registry) {
		clone := r.Clone()
		if err := clone.Apply(4, chunk("clone-only"), &Change{}); err != nil {
			t.Fatal(err)
		}
		if err := r.Apply(4, chunk("orig"), &Change{}); err != nil {
			t.Fatal(err)
		}
		if err := r.Apply(5, final, &Change{}); err != nil {
			t.Fatal(err)
		}
		if err := clone.Apply(5, final, &Change{}); err != nil {
			t.Fatal(err)
		}
		if got, want := ids(r), []string{"a1", "a2", "a3", "orig"}; !reflect.DeepEqual(got, want) {
			t.Errorf("the registry's pass = %v, want %v", got, want)
		}
		if got, want := ids(clone), []string{"a1", "a2", "a3", "clone-only"}; !reflect.DeepEqual(got, want) {
			t.Errorf("the clone's pass = %v, want %v", got, want)
		}
	})
}
