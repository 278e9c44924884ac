package fsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestInstance_PackHoldsOwnStringsTogether: a registration's own strings
// and metadata end up in one string with their values unchanged, and the
// copy a status change makes shares that string instead of copying it.
func TestInstance_PackHoldsOwnStringsTogether(t *testing.T) {
	in := testInstance("A", "10.0.0.1:a:8080", StatusUp, 1)
	in.HomePageURL, in.StatusPageURL, in.HealthCheckURL = "http://h/", "http://h/info", "http://h/health"
	in.DataCenterInfo = DataCenterInfo{Name: "Amazon", Metadata: MetadataOf(map[string]string{"instance-id": "i-1"})}
	want := *in
	f := New(0, nil)
	applyAll(f, [][]byte{mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: in})})
	held := f.reg.Get("A", in.InstanceID).Instance
	for i, p := range held.ownStrings() {
		if w := *want.ownStrings()[i]; *p != w {
			t.Fatalf("field %d is %q after packing, want %q", i, *p, w)
		}
	}
	if !packed(held.ownStrings()) {
		t.Fatal("the registered record's strings are not packed")
	}
	if unsafe.StringData(held.HomePageURL) != unsafe.StringData(held.StatusPageURL) {
		t.Fatal("the home page URL, a prefix of the status page URL, takes room of its own")
	}
	applyAll(f, [][]byte{mustEncode(t, CmdSetOverride, 2000, &OverrideBody{App: "A", ID: in.InstanceID, Status: StatusOutOfService})})
	changed := f.reg.Get("A", in.InstanceID).Instance
	if changed == held || changed.Status != StatusOutOfService {
		t.Fatalf("override did not make a new record: %+v", changed)
	}
	if unsafe.StringData(changed.InstanceID) != unsafe.StringData(held.InstanceID) ||
		unsafe.StringData(changed.Metadata.b) != unsafe.StringData(held.Metadata.b) {
		t.Fatal("the status change copied the packed strings")
	}

	// A metadata update packs the merged block with the record's strings.
	applyAll(f, [][]byte{mustEncode(t, CmdMetadata, 3000, &MetadataBody{App: "A", ID: in.InstanceID, Metadata: map[string]string{"k": "v"}})})
	merged := f.reg.Get("A", in.InstanceID).Instance
	if packed := packed(merged.ownStrings()); !packed || mdGet(merged.Metadata, "k") != "v" || mdGet(merged.Metadata, "zone") != "a" {
		t.Fatalf("after a metadata update: packed %v, metadata %v", packed, merged.Metadata)
	}

	// A copy with one field replaced is packed anew, keeping every value.
	c := *held
	c.HostName = "other-host"
	p := c.clone()
	if !packed(p.ownStrings()) || p.HostName != "other-host" || p.InstanceID != in.InstanceID ||
		p.Metadata != held.Metadata || p.DataCenterInfo.Metadata != held.DataCenterInfo.Metadata || p.ID() != in.InstanceID {
		t.Fatalf("repacked copy %+v", p)
	}
}

// TestInstance_PackKeepsValues packs random strings from a small alphabet,
// so that many are parts of others, and checks every value survives and
// a second pack shares the first one's string.
func TestInstance_PackKeepsValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = "ab/:"[rng.IntN(4)]
		}
		return string(b)
	}
	for range 2000 {
		in := &Instance{}
		fs := in.ownStrings()
		want := make([]string, len(fs))
		for i, f := range fs {
			*f = word()
			want[i] = *f
		}
		in.pack()
		for i, f := range in.ownStrings() {
			if *f != want[i] {
				t.Fatalf("field %d is %q after packing, want %q", i, *f, want[i])
			}
		}
		if !packed(in.ownStrings()) {
			t.Fatalf("not packed: %q", want)
		}
		before := in.InstanceID
		again := *in
		again.pack()
		if again.InstanceID != "" && unsafe.StringData(again.InstanceID) != unsafe.StringData(before) {
			t.Fatalf("a packed record was packed again: %q", want)
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

// TestIntern_KeepsOneCopyAtAMillionInstances: with the names and VIPs of
// 50,000 applications interned (a million instances' worth), a record
// registered after all of them still gets the copy the first one got,
// not a copy of its own.
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
	if len(a.Instances) != 19 {
		t.Fatalf("held %d instances, want 19", len(a.Instances))
	}
	for k, e := range a.Instances {
		if e.LastRenewalTs != 2000 {
			t.Fatalf("%s: last renewal %d, want 2000", k, e.LastRenewalTs)
		}
		if unsafe.StringData(k) != unsafe.StringData(e.Instance.InstanceID) {
			t.Fatalf("%s: the map key is not the held record's instance id (a view into a command?)", k)
		}
	}
	for k, d := range f.reg.delta {
		if k.id == "host-0:a:8080" && (unsafe.StringData(k.id) != unsafe.StringData(d.Deleted.Instance.InstanceID) ||
			unsafe.StringData(d.ID) != unsafe.StringData(d.Deleted.Instance.InstanceID)) {
			t.Fatal("the cancel's delta entry points into the cancel command, not at the held record")
		}
	}
}
