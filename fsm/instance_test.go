package fsm

import (
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
	if _, packed := packedLen(held.ownStrings()); !packed {
		t.Fatal("the registered record's strings are not packed")
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
	if _, packed := packedLen(merged.ownStrings()); !packed || mdGet(merged.Metadata, "k") != "v" || mdGet(merged.Metadata, "zone") != "a" {
		t.Fatalf("after a metadata update: packed %v, metadata %v", packed, merged.Metadata)
	}

	// A copy with one field replaced is packed anew, keeping every value.
	c := *held
	c.HostName = "other-host"
	p := c.clone()
	if _, packed := packedLen(p.ownStrings()); !packed || p.HostName != "other-host" || p.InstanceID != in.InstanceID ||
		p.Metadata != held.Metadata || p.DataCenterInfo.Metadata != held.DataCenterInfo.Metadata || p.ID() != in.InstanceID {
		t.Fatalf("repacked copy %+v", p)
	}
}
