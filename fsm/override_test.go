package fsm

import "testing"

// TestRegistry_OverrideSameStatusRecordsNothing: like eureka-server, PUT
// status with the status the instance already has records no override and
// no delta, so a later DELETE status finds nothing to remove and leaves the
// instance as it was (not UNKNOWN, whose heartbeats would 404).
func TestRegistry_OverrideSameStatusRecordsNothing(t *testing.T) {
	r := newReg()
	reg(r, 1, 1000, testInstance("A", "1", StatusUp, 10))
	before := r.Version()
	c := &Change{}
	if err := r.setOverride(2, 1100, &OverrideBody{App: "A", ID: "1", Status: StatusUp}, c); err != nil {
		t.Fatal(err)
	}
	e := r.Get("A", "1")
	if e.Override != "" || e.Instance.OverriddenStatus != StatusUnknown || e.ActionType != ActionAdded {
		t.Fatalf("same-status override recorded: override %q %+v", e.Override, e.Instance)
	}
	if r.Version() != before || !c.Empty() || len(r.Delta(0)) != 1 {
		t.Fatalf("same-status override changed the registry: version %d->%d change %+v delta %d", before, r.Version(), c, len(r.Delta(0)))
	}
	if e.LastRenewalTs != 1100 {
		t.Fatalf("same-status override must count as a heartbeat: last renewal %d", e.LastRenewalTs)
	}
	if err := r.deleteOverride(3, 1200, &OverrideBody{App: "A", ID: "1", Status: StatusUnknown}, &Change{}); err != nil {
		t.Fatal(err)
	}
	e = r.Get("A", "1")
	if e.Instance.Status != StatusUp || RenewStatus(e) != StatusUp {
		t.Fatalf("after delete: status %s renew status %s, want UP", e.Instance.Status, RenewStatus(e))
	}
}
