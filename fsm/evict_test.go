package fsm

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// TestEvictLeases_KeepsWhatChangedAfterTheLook: an eviction removes a lease
// only as the leader found it expired. A renewal, a registration again or
// a status override that the log put between the leader's look and the
// eviction keeps the instance, and the answer says how many were kept; an
// instance already gone is neither. CmdEvict, which older leaders write,
// still removes what it names.
func TestEvictLeases_KeepsWhatChangedAfterTheLook(t *testing.T) {
	f := New(0, nil)
	const t0 = int64(1_700_000_000_000)
	idx := uint64(0)
	apply := func(typ CmdType, ts int64, body any) any {
		idx++
		return f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: mustEncode(t, typ, ts, body)})
	}
	ids := []string{"quiet", "renewed", "again", "overridden"}
	for _, id := range ids {
		apply(CmdRegister, t0, &RegisterBody{Instance: testInstance("SVC", id, StatusUp, t0)})
	}
	// What the leader saw when it found the four expired.
	var seen []ExpiredLease
	f.Read(func(r *Registry) {
		for _, id := range ids {
			seen = append(seen, ExpiredLeaseOf(r.Get("SVC", id)))
		}
	})
	seen = append(seen, ExpiredLease{App: "SVC", ID: "never-held", ModifyIndex: 1, RenewedAt: t0})
	// What reached the log before the eviction did.
	apply(CmdRenewBatch, t0+91_000, &RenewBatchBody{Renewals: []Renewal{{App: "SVC", ID: "renewed", Ts: t0 + 91_000}}})
	apply(CmdRegister, t0+91_000, &RegisterBody{Instance: testInstance("SVC", "again", StatusUp, t0+91_000)})
	apply(CmdSetOverride, t0+91_000, &OverrideBody{App: "SVC", ID: "overridden", Status: StatusOutOfService, LastDirtyTimestamp: t0 + 91_000})

	res := apply(CmdEvictLeases, t0+92_000, &EvictLeasesBody{Leases: seen})
	var kept *LeasesKept
	if err, _ := res.(error); !errors.As(err, &kept) || kept.Evicted != 1 || kept.Kept != 3 {
		t.Fatalf("eviction answered %v, want 1 evicted and 3 kept", res)
	}
	f.Read(func(r *Registry) {
		if r.Get("SVC", "quiet") != nil {
			t.Error("the lease nothing changed was not evicted")
		}
		for _, id := range ids[1:] {
			if r.Get("SVC", id) == nil {
				t.Errorf("%s, changed after the leader's look, was evicted", id)
			}
		}
	})
	if res := apply(CmdEvictLeases, t0+93_000, &EvictLeasesBody{Leases: seen[:1]}); res != nil {
		t.Fatalf("evicting a lease already gone answered %v, want nil", res)
	}
	apply(CmdEvict, t0+93_000, &EvictBody{Keys: []KeyBody{{App: "SVC", ID: "renewed"}}})
	f.Read(func(r *Registry) {
		if r.Get("SVC", "renewed") != nil {
			t.Error("CmdEvict left the instance it names")
		}
	})
}
