package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/hashicorp/raft"
)

// TestSeal_HeldRecordsHoldOnlyTheirOwnStrings: a registration's record
// is held sealed, its values unchanged, each string in its own allocation
// (a part of a longer one taking no room of its own) or a constant; a
// status change and a metadata update hold new sealed records.
func TestSeal_HeldRecordsHoldOnlyTheirOwnStrings(t *testing.T) {
	in := testInstance("A", "10.0.0.1:a:8080", StatusUp, 1)
	in.HomePageURL, in.StatusPageURL, in.HealthCheckURL = "http://h/", "http://h/info", "http://h/health"
	in.DataCenterInfo = DataCenterInfo{Class: "com.netflix.appinfo.AmazonInfo", Name: "Amazon",
		Metadata: MetadataOf(map[string]string{"instance-id": "i-1"})}
	in.InstanceID, in.SecureVIPAddress = "", in.VIPAddress
	want := *in
	f := New(0, nil)
	applyAll(f, [][]byte{mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: in})})
	e := f.reg.Get("A", "i-1") // an Amazon record is keyed by its instance-id
	if e == nil {
		t.Fatal("the registration is not held under its Amazon instance-id")
	}
	held := e.Instance
	if *held != want {
		t.Fatalf("held %+v, want %+v", *held, want)
	}
	if !sealedOnly(held) {
		t.Fatal("the registered record holds a string outside its allocation")
	}
	if unsafe.StringData(held.HomePageURL) != unsafe.StringData(held.StatusPageURL) ||
		unsafe.StringData(held.SecureVIPAddress) != unsafe.StringData(held.VIPAddress) {
		t.Fatal("a string equal to or part of one laid out before it takes room of its own")
	}
	if unsafe.StringData(held.Status) != unsafe.StringData(StatusUp) || unsafe.StringData(held.DataCenterInfo.Name) != unsafe.StringData("Amazon") {
		t.Fatal("a fixed name is held as a copy, not as the constant")
	}
	if !sealedEntryOnly(e) || e.ID != "i-1" || e.App != "A" {
		t.Fatalf("the registered entry %s/%s is not sealed with its record", e.App, e.ID)
	}

	applyAll(f, [][]byte{mustEncode(t, CmdSetOverride, 2000, &OverrideBody{App: "A", ID: "i-1", Status: StatusOutOfService})})
	changed := f.reg.Get("A", "i-1").Instance
	if changed == held || changed.Status != StatusOutOfService || !sealedOnly(changed) || changed.HostName != want.HostName {
		t.Fatalf("override did not make a new sealed record: %+v", changed)
	}
	if e := f.reg.Get("A", "i-1"); !sealedEntryOnly(e) || e.Override != StatusOutOfService || e.ActionType != ActionModified {
		t.Fatalf("the entry with the new record is not sealed with it: %+v", *e)
	}
	applyAll(f, [][]byte{mustEncode(t, CmdMetadata, 3000, &MetadataBody{App: "A", ID: "i-1", Metadata: map[string]string{"k": "v"}})})
	merged := f.reg.Get("A", "i-1").Instance
	if !sealedEntryOnly(f.reg.Get("A", "i-1")) || !sealedOnly(merged) || mdGet(merged.Metadata, "k") != "v" || mdGet(merged.Metadata, "zone") != "a" {
		t.Fatalf("after a metadata update: sealed %v, metadata %v", sealedOnly(merged), merged.Metadata)
	}
	// A status PUT that changes nothing keeps the record held.
	applyAll(f, [][]byte{mustEncode(t, CmdSetOverride, 4000, &OverrideBody{App: "A", ID: "i-1", Status: StatusOutOfService})})
	if e := f.reg.Get("A", "i-1"); e.Instance != merged || sealedEntryOnly(e) {
		t.Fatal("a status PUT that changed nothing sealed the record again")
	}
}

// TestSeal_KeepsValues seals records of random strings from a small
// alphabet, so that many are parts of others, with fixed names and empty
// views of a buffer among them: every value survives, the rule holds.
func TestSeal_KeepsValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := "ab/:UPna"
	word := func() string {
		switch rng.IntN(6) {
		case 0:
			return buf[rng.IntN(len(buf)):][:0] // empty, pointing into buf
		case 1:
			return []string{StatusUp, StatusUnknown, "MyOwn", "na"}[rng.IntN(4)]
		}
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = "ab/:"[rng.IntN(4)]
		}
		return string(b)
	}
	for range 2000 {
		in := &Instance{Port: rng.Int32(), LastDirtyTimestamp: rng.Int64()}
		for _, f := range in.sealedStrings() {
			*f = word()
		}
		want := *in
		s := seal(in, false)
		if *s != want || *in != want {
			t.Fatalf("sealed %+v, want %+v (input left %+v)", *s, want, *in)
		}
		if !sealedOnly(s) {
			t.Fatalf("a string outside the sealed allocation: %+v", *s)
		}
	}
}

// TestSeal_InstanceHoldsOnlyStrings: the collector does not look inside a
// sealed record, so every pointer in an Instance must be a string seal
// lays out. A field of another pointer kind (slice, map, pointer,
// interface), or a string seal does not know, fails here.
func TestSeal_InstanceHoldsOnlyStrings(t *testing.T) {
	in := &fieldsProbe // a global: a stack variable may move, and its addresses with it
	fs := in.sealedStrings()
	checkSealedFields(t, in, fs[:], "")
}

// TestSeal_EntryHoldsOnlyStringsAndItsRecord: the same for a sealed
// entry, whose one pointer besides its strings is its record, laid out
// right after it.
func TestSeal_EntryHoldsOnlyStringsAndItsRecord(t *testing.T) {
	e := &entryProbe
	fs := e.sealedStrings()
	checkSealedFields(t, e, fs[:], "Instance")
}

var entryProbe Entry

// checkSealedFields fails t for any field of *v that is neither one of
// the strings fs nor a number, except the pointer field named record.
func checkSealedFields[T any](t *testing.T, v *T, fs []*string, record string) {
	t.Helper()
	known := map[uintptr]bool{}
	for _, f := range fs {
		known[uintptr(unsafe.Pointer(f))] = true
	}
	if len(known) != len(fs) {
		t.Fatal("sealedStrings names a field twice")
	}
	base := uintptr(unsafe.Pointer(v))
	var walk func(typ reflect.Type, off uintptr, path string)
	walk = func(typ reflect.Type, off uintptr, path string) {
		switch typ.Kind() {
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				walk(f.Type, off+f.Offset, path+"."+f.Name)
			}
		case reflect.String:
			if !known[base+off] {
				t.Errorf("%s is a string seal does not lay out", path)
			}
		case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int,
			reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint, reflect.Float32, reflect.Float64:
		default:
			if record == "" || path != reflect.TypeOf(*v).Name()+"."+record {
				t.Errorf("%s is a %s: a pointer the collector would not see in a sealed record", path, typ.Kind())
			}
		}
	}
	walk(reflect.TypeOf(*v), 0, reflect.TypeOf(*v).Name())
}

var fieldsProbe Instance

// churnHeap collects, then allocates n blocks of size bytes filled with a
// pattern, so that memory a collection freed is reused and overwritten: a
// string left pointing at it would read the pattern.
func churnHeap(n, size int) {
	runtime.GC()
	junk := make([][]byte, 0, n)
	for range n {
		junk = append(junk, bytes.Repeat([]byte{0xAA}, size))
	}
	runtime.KeepAlive(junk)
}

// TestSeal_OutlivesWhatItWasMadeFrom: records sealed from strings that
// are then dropped keep their values through collections that free those
// strings and allocations that reuse their memory.
func TestSeal_OutlivesWhatItWasMadeFrom(t *testing.T) {
	value := func(i, field int) string { return fmt.Sprintf("value-%d-of-field-%d", i, field) }
	held := make([]*Instance, 5000)
	for i := range held {
		in := &Instance{}
		for j, f := range in.sealedStrings() {
			*f = strings.Clone(value(i, j))
		}
		held[i] = seal(in, false)
	}
	for range 3 {
		churnHeap(20000, 48)
	}
	for i, in := range held {
		for j, f := range in.sealedStrings() {
			if *f != value(i, j) {
				t.Fatalf("record %d, field %d: %q after collections, want %q", i, j, *f, value(i, j))
			}
		}
	}
}

func TestHasVIP_AgreesWithVIPs(t *testing.T) {
	lists := []string{"", "a", "a,b", " a , b ,", ",,a", "ab,b", "a b", " , "}
	vips := []string{"", "a", "b", "ab", "a b", " a"}
	for _, list := range lists {
		for _, vip := range vips {
			want := slices.Contains(VIPs(list), vip)
			if got := HasVIP(list, vip); got != want {
				t.Errorf("HasVIP(%q, %q) = %v, VIPs says %v", list, vip, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { HasVIP("one, two ,three", "three") }); n != 0 {
		t.Errorf("HasVIP allocates %.0f times", n)
	}
}

// TestIntern_KeepsOneCopyAtAMillionInstances: with 100,000 strings
// interned (the names of 50,000 applications and as many others, more
// than a million instances' registry repeats), an entry registered after
// all of them still gets the copy the first one got, not one of its own.
func TestIntern_KeepsOneCopyAtAMillionInstances(t *testing.T) {
	first := string([]byte("INTERN-TEST-APP-0"))
	intern(&first)
	for i := range 50_000 {
		app, vip := fmt.Sprintf("INTERN-TEST-APP-%d", i), fmt.Sprintf("intern-test-app-%d", i)
		intern(&app, &vip)
	}
	again := string([]byte("INTERN-TEST-APP-0"))
	intern(&again)
	if unsafe.StringData(again) != unsafe.StringData(first) {
		t.Fatal("the application name interned again after 50,000 applications is a new copy, not the one held")
	}
}

// TestRenew_KeepsNoViewOfTheBatch: a renewal batch's strings are views
// into the decoded batch; after it is applied, neither the registry's map
// keys nor the delta queue may point into it, or every batch of a round of
// renewals stays alive (48 MB at a million instances). The keys must be
// the held record's own strings.
func TestRenew_KeepsNoViewOfTheBatch(t *testing.T) {
	f := New(0, nil)
	var entries [][]byte
	var renewals []Renewal
	for i := range 20 {
		id := fmt.Sprintf("host-%d:a:8080", i)
		entries = append(entries, mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: testInstance("A", id, StatusUp, 1)}))
		renewals = append(renewals, Renewal{App: "A", ID: id, Ts: 2000})
	}
	entries = append(entries, mustEncode(t, CmdRenewBatch, 2000, &RenewBatchBody{Renewals: renewals}))
	entries = append(entries, mustEncode(t, CmdCancel, 3000, &KeyBody{App: "A", ID: "host-0:a:8080"}))
	for _, r := range applyAll(f, entries) {
		if err, ok := r.(error); ok && err != nil {
			t.Fatal(err)
		}
	}
	a := f.reg.apps["A"]
	if len(a.entries) != 19 {
		t.Fatalf("held %d instances, want 19", len(a.entries))
	}
	for _, e := range a.entries {
		if e.LastRenewalTs != 2000 {
			t.Fatalf("%s: last renewal %d, want 2000", e.ID, e.LastRenewalTs)
		}
		if unsafe.StringData(e.ID) != unsafe.StringData(e.Instance.InstanceID) {
			t.Fatalf("%s: the entry's id is not the held record's instance id (a view into a command?)", e.ID)
		}
	}
	for k, d := range f.reg.delta {
		if k.id == "host-0:a:8080" && (unsafe.StringData(k.id) != unsafe.StringData(d.Deleted.Instance.InstanceID) ||
			unsafe.StringData(d.ID) != unsafe.StringData(d.Deleted.Instance.InstanceID)) {
			t.Fatal("the cancel's delta entry points into the cancel command, not at the held record")
		}
	}
}

// TestSeal_EveryHeldRecordAfterEveryCommand: after every command of random
// sequences (every kind, remote regions included), after a restore and in
// a clone, every record the registry holds keeps the sealed rule; with
// collections and memory reuse between the commands, the state is still
// the one a second registry applying the same commands holds.
func TestSeal_EveryHeldRecordAfterEveryCommand(t *testing.T) {
	check := func(r *Registry, when string) {
		t.Helper()
		regs := []*Registry{r}
		for _, rc := range r.regions {
			regs = append(regs, rc.reg)
		}
		for _, reg := range regs {
			reg.Each(func(e *Entry) {
				if !sealedOnly(e.Instance) {
					t.Fatalf("%s: %s/%s holds a string outside its sealed record", when, e.App, e.ID)
				}
				// An entry laid out in front of its record is a sealed
				// entry and keeps the rule for its own strings too.
				if laidOutBefore(e) && !sealedEntryOnly(e) {
					t.Fatalf("%s: %s/%s is a sealed entry holding a string outside its allocation", when, e.App, e.ID)
				}
			})
		}
	}
	for seed := uint64(1); seed <= 10; seed++ {
		cmds := randomCommands(t, seed, 300)
		a, b := New(time.Minute, nil), New(time.Minute, nil)
		for i, c := range cmds {
			a.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c})
			check(a.reg, fmt.Sprintf("seed %d, command %d", seed, i))
			if i%50 == 0 {
				churnHeap(5000, 64)
			}
		}
		applyAll(b, cmds)
		if !sameState(a.Export(), b.Export()) {
			t.Fatalf("seed %d: the state differs from a second registry's after collections", seed)
		}
		restored := New(time.Minute, nil)
		if err := restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, a)))); err != nil {
			t.Fatal(err)
		}
		check(restored.reg, fmt.Sprintf("seed %d, restored", seed))
		a.Read(func(r *Registry) { check(r.Clone(), fmt.Sprintf("seed %d, clone", seed)) })
	}
}
