package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// mustEncode encodes and stamps a command.
func mustEncode(t testing.TB, typ CmdType, ts int64, body any) []byte {
	t.Helper()
	e, err := Encode(typ, body)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if err := Stamp(e, ts); err != nil {
		t.Fatalf("stamp: %v", err)
	}
	return e
}

func testInstance(app, id, status string, ldt int64) *Instance {
	return &Instance{InstanceID: id, HostName: id + ".local", App: app, IPAddr: "10.0.0.1", Sid: "na",
		Status: status, OverriddenStatus: StatusUnknown, Port: 8080, PortEnabled: true, SecurePort: 443,
		CountryID: 1, DataCenterInfo: DataCenterInfo{Name: "MyOwn"}, RenewalIntervalSecs: 30, DurationSecs: 90,
		Metadata: MetadataOf(map[string]string{"zone": "a", "id": id}), VIPAddress: app + "-vip,shared", LastDirtyTimestamp: ldt}
}

// randomCommands builds a reproducible sequence of commands of every kind.
func randomCommands(t testing.TB, seed uint64, n int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	apps := []string{"ORDERS", "PAYMENTS", "USERS"}
	statuses := []string{StatusUp, StatusDown, StatusStarting, StatusOutOfService, StatusUnknown}
	ts := int64(1_700_000_000_000)
	out := make([][]byte, 0, n)
	// leases is each instance's lease as the commands so far left it, as
	// far as the generator can tell: an eviction names it or another.
	leases := map[string]ExpiredLease{}
	touch := func(app, id string, idx uint64, renewedAt int64) {
		l, ok := leases[app+"/"+id]
		if !ok {
			return
		}
		if idx > 0 {
			l.ModifyIndex = idx
		}
		if renewedAt > 0 {
			l.RenewedAt = renewedAt
		}
		leases[app+"/"+id] = l
	}
	for i := 0; i < n; i++ {
		ts += int64(rng.IntN(5000))
		app := apps[rng.IntN(len(apps))]
		id := fmt.Sprintf("i-%d", rng.IntN(12))
		var e []byte
		switch rng.IntN(11) {
		case 0, 1, 2:
			in := testInstance(app, id, statuses[rng.IntN(len(statuses))], ts-int64(rng.IntN(10000)))
			if rng.IntN(4) == 0 {
				in.OverriddenStatus = StatusOutOfService
			}
			e = mustEncode(t, CmdRegister, ts, &RegisterBody{Instance: in})
			leases[app+"/"+id] = ExpiredLease{App: app, ID: id, ModifyIndex: uint64(i + 1), RenewedAt: ts}
		case 3:
			e = mustEncode(t, CmdCancel, ts, &KeyBody{App: app, ID: id})
		case 4:
			e = mustEncode(t, CmdRenewBatch, ts, &RenewBatchBody{Renewals: []Renewal{{App: app, ID: id, Ts: ts}, {App: "NONE", ID: "x", Ts: ts}}})
			touch(app, id, 0, ts)
		case 5:
			e = mustEncode(t, CmdSetOverride, ts, &OverrideBody{App: app, ID: id, Status: statuses[rng.IntN(4)], LastDirtyTimestamp: ts})
			touch(app, id, uint64(i+1), 0)
		case 6:
			e = mustEncode(t, CmdDeleteOverride, ts, &OverrideBody{App: app, ID: id, Status: StatusUnknown})
			touch(app, id, uint64(i+1), 0)
		case 7:
			e = mustEncode(t, CmdMetadata, ts, &MetadataBody{App: app, ID: id, Metadata: map[string]string{"k": fmt.Sprint(i)}})
			touch(app, id, uint64(i+1), 0)
		case 8:
			e = mustEncode(t, CmdEvict, ts, &EvictBody{Keys: []KeyBody{{App: app, ID: id}}})
		case 9:
			e = mustEncode(t, CmdRegionUpdate|CmdIgnoreUnknown, ts, randomRegionUpdate(rng, app, id, ts))
		case 10:
			// The lease as the generator last left it (evicted unless a
			// command it could not follow changed it), or one changed
			// since (kept).
			l, ok := leases[app+"/"+id]
			if !ok || rng.IntN(3) == 0 {
				l = ExpiredLease{App: app, ID: id, ModifyIndex: uint64(rng.IntN(i + 2)), RenewedAt: ts - int64(rng.IntN(5000))}
			}
			e = mustEncode(t, CmdEvictLeases, ts, &EvictLeasesBody{Leases: []ExpiredLease{l}})
		}
		out = append(out, e)
	}
	return out
}

// randomRegionUpdate is one chunk of a remote region's sync pass: puts
// and deletes in one of two regions, staged or final, with a status.
func randomRegionUpdate(rng *rand.Rand, app, id string, ts int64) *RegionUpdateBody {
	b := &RegionUpdateBody{Region: []string{"west", "legacy"}[rng.IntN(2)], Pass: uint64(rng.IntN(3)), Final: rng.IntN(2) == 0}
	if rng.IntN(3) > 0 {
		in := testInstance(app, id, []string{StatusUp, StatusDown}[rng.IntN(2)], ts)
		b.Put = append(b.Put, &Entry{App: app, ID: id, Instance: in, RegistrationTs: ts, LastRenewalTs: ts})
	} else {
		b.Delete = append(b.Delete, KeyBody{App: app, ID: id})
	}
	if b.Final {
		b.Status = &RegionStatus{Loaded: true, Reachable: rng.IntN(4) > 0, Kind: "heureka", SyncedAt: ts}
	}
	return b
}

func applyAll(f *FSM, entries [][]byte) []any {
	res := make([]any, len(entries))
	for i, e := range entries {
		res[i] = f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: e})
	}
	return res
}

// sameState reports whether a and b hold the same state. An entry's pos
// is where the registry holding it keeps it, and its keyCheck a hash under
// that registry's seed, neither part of the state: two registries that
// applied the same commands in another order, or one restored from the
// other's snapshot, may keep an entry elsewhere, and each seeds its own
// hashes.
func sameState(a, b *State) bool {
	return reflect.DeepEqual(withoutPositions(a), withoutPositions(b))
}

// withoutPositions is a copy of st whose entries are copies with pos and
// keyCheck 0.
func withoutPositions(st *State) *State {
	if st == nil {
		return nil
	}
	unplace := func(e *Entry) *Entry {
		if e == nil {
			return nil
		}
		c := *e
		c.pos, c.keyCheck = 0, 0
		return &c
	}
	unplaceAll := func(es []*Entry) []*Entry {
		if es == nil {
			return nil
		}
		out := make([]*Entry, len(es))
		for i, e := range es {
			out[i] = unplace(e)
		}
		return out
	}
	c := *st
	c.Entries = unplaceAll(st.Entries)
	if st.Delta != nil {
		c.Delta = slices.Clone(st.Delta)
		for i := range c.Delta {
			c.Delta[i].Deleted = unplace(c.Delta[i].Deleted)
		}
	}
	if st.Regions != nil {
		c.Regions = slices.Clone(st.Regions)
		for i := range c.Regions {
			c.Regions[i].Copy = withoutPositions(c.Regions[i].Copy)
			c.Regions[i].PendingPut = unplaceAll(c.Regions[i].PendingPut)
		}
	}
	return &c
}

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f.Export().Encode(&buf); err != nil {
		t.Fatalf("encode state: %v", err)
	}
	return buf.Bytes()
}

// snapshotBytesFormat is f's state in the given snapshot format.
func snapshotBytesFormat(t testing.TB, f *FSM, format byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f.Export().encodeFormat(&buf, format); err != nil {
		t.Fatalf("encode state: %v", err)
	}
	return buf.Bytes()
}

// Snapshots of format 1 (the whole state as one value) and format 2 (each
// entry a msgpack value), what earlier releases wrote, restore to the same
// state as the current format does, and all read back as the same State.
func TestSnapshot_EarlierFormatsStillRestore(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		orig := New(0, nil)
		applyAll(orig, randomCommands(t, seed, 300))
		want := snapshotBytes(t, orig)
		one := snapshotBytesFormat(t, orig, snapshotFormatWhole)
		two := snapshotBytesFormat(t, orig, snapshotFormatMsgpackEntries)
		if bytes.Equal(one, want) || bytes.Equal(two, want) || one[len(snapshotMagic)] != 1 ||
			two[len(snapshotMagic)] != 2 || want[len(snapshotMagic)] != SnapshotFormat {
			t.Fatalf("seed %d: the formats are not distinct", seed)
		}
		for name, snap := range map[string][]byte{"format 1": one, "format 2": two, "current format": want} {
			f := New(0, nil)
			if err := f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
				t.Fatalf("seed %d, %s: %v", seed, name, err)
			}
			if !bytes.Equal(snapshotBytes(t, f), want) {
				t.Fatalf("seed %d, %s: restored state differs", seed, name)
			}
			st, err := ReadSnapshot(bytes.NewReader(snap))
			if err != nil {
				t.Fatalf("seed %d, %s: %v", seed, name, err)
			}
			if !sameState(st, orig.Export()) {
				t.Fatalf("seed %d, %s: ReadSnapshot differs from the state", seed, name)
			}
		}
	}
}

// A streamed snapshot (formats 2 and 3) cut anywhere, or claiming more
// entries than it holds, is refused, and the registry it was restoring
// over is unchanged.
func TestSnapshot_TruncatedStreamIsRefused(t *testing.T) {
	src := New(0, nil)
	applyAll(src, randomCommands(t, 3, 200))
	f := New(0, nil)
	applyAll(f, randomCommands(t, 4, 50))
	before := snapshotBytes(t, f)
	for _, format := range []byte{snapshotFormatMsgpackEntries, SnapshotFormat} {
		snap := snapshotBytesFormat(t, src, format)
		for _, cut := range []int{len(snapshotMagic) + 1, len(snap) / 3, len(snap) / 2, len(snap) - 1} {
			if err := f.Restore(io.NopCloser(bytes.NewReader(snap[:cut]))); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("format %d: restore of the first %d of %d bytes = %v, want ErrBadSnapshot", format, cut, len(snap), err)
			}
			if _, err := ReadSnapshot(bytes.NewReader(snap[:cut])); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("format %d: ReadSnapshot of the first %d of %d bytes = %v, want ErrBadSnapshot", format, cut, len(snap), err)
			}
		}
		// One entry more than the stream holds.
		st := src.Export()
		st.Entries = st.Entries[:len(st.Entries)-1]
		var lying bytes.Buffer
		if err := st.encodeFormat(&lying, format); err != nil {
			t.Fatal(err)
		}
		short := lying.Bytes()
		var again bytes.Buffer
		again.Write(short[:len(snapshotMagic)+1])
		head := stateHead{State: *st, EntryCount: len(st.Entries) + 1}
		head.Entries = nil
		if err := codec.NewEncoder(&again, msgpackHandle).Encode(&head); err != nil {
			t.Fatal(err)
		}
		var headLen bytes.Buffer
		head.EntryCount--
		if err := codec.NewEncoder(&headLen, msgpackHandle).Encode(&head); err != nil {
			t.Fatal(err)
		}
		again.Write(short[len(snapshotMagic)+1+headLen.Len():])
		if err := f.Restore(io.NopCloser(&again)); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("format %d: restore of a stream one entry short = %v, want ErrBadSnapshot", format, err)
		}
	}
	if !bytes.Equal(snapshotBytes(t, f), before) {
		t.Fatal("a refused restore changed the registry")
	}
}

func TestFSM_RandomSequencesAreDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 25; seed++ {
		cmds := randomCommands(t, seed, 400)
		a, b := New(0, nil), New(0, nil)
		ra, rb := applyAll(a, cmds), applyAll(b, cmds)
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("seed %d: apply results differ", seed)
		}
		if !sameState(a.Export(), b.Export()) {
			t.Fatalf("seed %d: states differ", seed)
		}
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatalf("seed %d: equal states encode to different bytes", seed)
		}
	}
}

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func TestFSM_SnapshotRestoreRoundTrip(t *testing.T) {
	for seed := uint64(100); seed < 110; seed++ {
		f := New(0, nil)
		applyAll(f, randomCommands(t, seed, 300))
		snap, err := f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		// Applies after Snapshot must not leak into the persisted copy.
		before := f.Export()
		applyAll(f, randomCommands(t, seed+1000, 20))
		sink := &memSink{}
		if err := snap.Persist(sink); err != nil {
			t.Fatal(err)
		}
		restored := New(0, nil)
		var changes []Change
		restored.Observe(func(c Change) { changes = append(changes, c) })
		if err := restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if !sameState(before, restored.Export()) {
			t.Fatalf("seed %d: restored state differs from snapshot point", seed)
		}
		if len(changes) != 1 || !changes[0].All {
			t.Fatalf("restore should publish one All change, got %+v", changes)
		}
		// The restored FSM continues exactly like the original would.
		tail := randomCommands(t, seed+2000, 50)
		orig := New(0, nil)
		_ = orig.Restore(io.NopCloser(bytes.NewReader(sink.Bytes())))
		for i, e := range tail {
			l := &raft.Log{Index: before.LastIndex + uint64(i) + 1, Type: raft.LogCommand, Data: e}
			orig.Apply(l)
			restored.Apply(l)
		}
		if !bytes.Equal(snapshotBytes(t, orig), snapshotBytes(t, restored)) {
			t.Fatalf("seed %d: states diverge after restore", seed)
		}
	}
}

func TestFSM_RestoreRejectsGarbage(t *testing.T) {
	f := New(0, nil)
	applyAll(f, randomCommands(t, 7, 50))
	want := f.Export()
	for _, data := range [][]byte{nil, []byte("not a snapshot"), append(append([]byte{}, snapshotMagic...), 99), append(append([]byte{}, snapshotMagic...), 1, 0xc1)} {
		err := f.Restore(io.NopCloser(bytes.NewReader(data)))
		if !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("restore(%q) = %v, want ErrBadSnapshot", data, err)
		}
	}
	if !sameState(want, f.Export()) {
		t.Fatal("a failed restore changed the state")
	}
}

// TestFSM_RestoreRejectsInconsistentStates checks that a snapshot that
// decodes but holds what no log can produce (an operator's restore of an
// edited or foreign file) is refused whole, before it replaces anything:
// the registry's readers rely on every one of these never happening.
func TestFSM_RestoreRejectsInconsistentStates(t *testing.T) {
	src := New(0, nil)
	applyAll(src, [][]byte{
		mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: testInstance("A", "a-1", StatusUp, 1)}),
		mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: testInstance("A", "a-2", StatusUp, 1)}),
		mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: testInstance("B", "b-1", StatusUp, 1)}),
		mustEncode(t, CmdCancel, 1001, &KeyBody{App: "B", ID: "b-1"}),
	})
	good := snapshotBytes(t, src)
	deletion := func(st *State) *DeltaEntry {
		for i := range st.Delta {
			if st.Delta[i].Action == ActionDeleted {
				return &st.Delta[i]
			}
		}
		t.Fatal("no deletion in the delta")
		return nil
	}
	for name, spoil := range map[string]func(st *State){
		"entry without instance":     func(st *State) { st.Entries[0].Instance = nil },
		"entry with empty app":       func(st *State) { st.Entries[0].App = "" },
		"entry with empty id":        func(st *State) { st.Entries[0].ID = "" },
		"entry keyed by another id":  func(st *State) { st.Entries[0].ID = "other" },
		"entry keyed by another app": func(st *State) { st.Entries[0].App = "OTHER" },
		"entry twice":                func(st *State) { st.Entries = append(st.Entries, st.Entries[0]) },
		"delta with unknown action":  func(st *State) { st.Delta[0].Action = "BOGUS" },
		"delta with empty app":       func(st *State) { st.Delta[0].App = "" },
		"deletion without record":    func(st *State) { deletion(st).Deleted = nil },
		"deleted record without instance": func(st *State) {
			d := *deletion(st).Deleted
			d.Instance = nil
			deletion(st).Deleted = &d
		},
		"deleted record of another key": func(st *State) { deletion(st).ID = "b-2" },
		"delta change twice":            func(st *State) { st.Delta = append(st.Delta, st.Delta[0]) },
	} {
		st, err := ReadSnapshot(bytes.NewReader(good))
		if err != nil {
			t.Fatal(err)
		}
		spoil(st)
		var buf bytes.Buffer
		if err := st.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		f := New(0, nil)
		applyAll(f, [][]byte{mustEncode(t, CmdRegister, 500, &RegisterBody{Instance: testInstance("KEEP", "k-1", StatusUp, 1)})})
		before := snapshotBytes(t, f)
		if err := f.Restore(io.NopCloser(&buf)); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: restore = %v, want ErrBadSnapshot", name, err)
		}
		if !bytes.Equal(before, snapshotBytes(t, f)) {
			t.Errorf("%s: a refused restore changed the state", name)
		}
	}
	if err := New(0, nil).Restore(io.NopCloser(bytes.NewReader(good))); err != nil {
		t.Fatalf("the unspoiled snapshot: %v", err)
	}
}

func TestFSM_UndecodableEntryPanics(t *testing.T) {
	f := New(0, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("want panic for an undecodable entry")
		}
	}()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{byte(CmdRegister), bodyVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0xc1}})
}

func TestFSM_UnknownCommandWithIgnoreBitIsSkipped(t *testing.T) {
	f := New(0, nil)
	entry := []byte{byte(CmdIgnoreUnknown | 0x7f), bodyVersion, 0, 0, 0, 0, 0, 0, 0, 0, 0x80}
	if res := f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: entry}); res != nil {
		t.Fatalf("got %v", res)
	}
	if f.AppliedIndex() != 3 {
		t.Fatalf("applied index %d", f.AppliedIndex())
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, e := range randomCommands(f, 1, 30) {
		f.Add(e)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := Decode(data)
		if err != nil {
			return
		}
		// Whatever decodes must apply without panicking.
		fs := New(0, nil)
		fs.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
		_ = cmd
	})
}

// TestCommandTableCoversEveryType checks that each command type has a row in
// the command table (name, body, apply), so Decode, String and Apply agree.
func TestCommandTableCoversEveryType(t *testing.T) {
	names := map[string]bool{}
	// CmdBatch is a frame of other commands (packed.go), not a row.
	types := []CmdType{CmdEvictLeases}
	for ct := CmdRegister; ct <= CmdRegionUpdate; ct++ {
		types = append(types, ct)
	}
	for _, ct := range types {
		spec, ok := commands[ct]
		if !ok || spec.name == "" || spec.newBody == nil || spec.apply == nil {
			t.Errorf("command type %d has no complete row in the command table", ct)
			continue
		}
		if names[spec.name] {
			t.Errorf("name %q used twice", spec.name)
		}
		names[spec.name] = true
		if got := (ct | CmdIgnoreUnknown).String(); got != spec.name {
			t.Errorf("%d with the ignore bit: String() = %q, want %q", ct, got, spec.name)
		}
	}
	if len(commands) != len(types) {
		t.Errorf("the table has %d rows for %d command types", len(commands), len(types))
	}
}

// TestRegistry_CloneLeavesSharedEntriesAlone: Clone copies the live
// registry's entries, which share their sealed records, and must not
// write to the entries it copies (readers of the live registry hold only
// a read lock).
func TestRegistry_CloneLeavesSharedEntriesAlone(t *testing.T) {
	f := New(time.Minute, nil)
	applyAll(f, randomCommands(t, 7, 200))
	before := map[*Entry]*Instance{}
	f.Read(func(r *Registry) {
		r.Each(func(e *Entry) { before[e] = e.Instance })
		r.Clone()
	})
	if len(before) == 0 {
		t.Fatal("no entries to check")
	}
	for e, in := range before {
		if e.Instance != in {
			t.Fatalf("Clone replaced the instance of shared entry %s/%s", e.App, e.ID)
		}
	}
}

// TestFSM_SnapshotEntriesSorted: Snapshot takes the entries in map order
// (under the lock, no sort), and Persist and Export still give them in
// application and id order, so equal states encode to equal bytes.
func TestFSM_SnapshotEntriesSorted(t *testing.T) {
	f := New(0, nil)
	var entries [][]byte
	for i := range 200 {
		in := testInstance(fmt.Sprintf("APP-%d", i%7), fmt.Sprintf("i-%03d", (i*37)%200), StatusUp, 1)
		entries = append(entries, mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: in}))
	}
	applyAll(f, entries)
	sorted := func(what string, es []*Entry) {
		t.Helper()
		if len(es) != 200 {
			t.Fatalf("%s: %d entries, want 200", what, len(es))
		}
		for i := 1; i < len(es); i++ {
			a, b := es[i-1], es[i]
			if a.App > b.App || a.App == b.App && a.ID >= b.ID {
				t.Fatalf("%s: entry %d (%s %s) after (%s %s)", what, i, b.App, b.ID, a.App, a.ID)
			}
		}
	}
	st, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	sorted("persisted snapshot", st.Entries)
	sorted("Export", f.Export().Entries)
	n := 0
	f.Read(func(r *Registry) { r.Range(func(*Entry) { n++ }) })
	if n != 200 {
		t.Fatalf("Range visited %d entries, want 200", n)
	}
}

func TestModeOf(t *testing.T) {
	cp, err := Encode(CmdSetMode, &ModeBody{Mode: "cp"})
	if err != nil {
		t.Fatal(err)
	}
	if mode, ok := ModeOf(cp); !ok || mode != "cp" {
		t.Errorf("ModeOf(set_mode cp) = %q, %v", mode, ok)
	}
	member, err := Encode(CmdSetMember, &Member{ID: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, entry := range map[string][]byte{"set_member": member, "truncated": cp[:headerLen-1], "empty": nil} {
		if mode, ok := ModeOf(entry); ok {
			t.Errorf("ModeOf(%s) = %q, true; want false", name, mode)
		}
	}
}

// TestFSM_AppliedRenewalsKeepNothingOfTheEntry: Apply reads a renewal
// batch's keys as views of the entry's bytes (decodeApplied). Nothing may
// keep them: with the entry's bytes overwritten after the batch applied,
// the registry still finds, lists and snapshots every instance by its key
// and keeps the leases the batch set.
func TestFSM_AppliedRenewalsKeepNothingOfTheEntry(t *testing.T) {
	f := New(0, nil)
	const n = 50
	var renewals []Renewal
	for i := range n {
		id := fmt.Sprintf("i-%d", i)
		data := mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: testInstance("ORDERS", id, StatusUp, 1)})
		if res := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data}); res != nil {
			t.Fatalf("register %s: %v", id, res)
		}
		renewals = append(renewals, Renewal{App: "ORDERS", ID: id, Ts: 5000 + int64(i)})
	}
	data := EncodeRenewBatch(renewals)
	if err := Stamp(data, 5000); err != nil {
		t.Fatal(err)
	}
	if res := f.Apply(&raft.Log{Index: n + 1, Type: raft.LogCommand, Data: data}); res != nil {
		t.Fatalf("renew batch: %v", res)
	}
	for i := range data {
		data[i] = 'X'
	}
	f.Read(func(reg *Registry) {
		if got := reg.Count(); got != n {
			t.Fatalf("%d instances held after the batch, want %d", got, n)
		}
		for i := range n {
			id := fmt.Sprintf("i-%d", i)
			e := reg.Get("ORDERS", id)
			if e == nil || e.ID != id || e.App != "ORDERS" {
				t.Fatalf("ORDERS/%s: got %+v after the batch's bytes changed", id, e)
			}
			if got := e.RenewedAt(); got != 5000+int64(i) {
				t.Fatalf("ORDERS/%s renewed at %d, want %d", id, got, 5000+i)
			}
		}
		if got := len(reg.AppEntries("ORDERS")); got != n {
			t.Fatalf("ORDERS lists %d instances, want %d", got, n)
		}
	})
}
