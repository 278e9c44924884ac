package cluster

import (
	"errors"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

// TestCheckFromPeer: the leader's backend refuses, before anything is
// appended, client commands that break the input limits (with
// StrictInput), the leader's own command types, and member records that do
// not match the Raft configuration; what followers do forward passes.
func TestCheckFromPeer(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, func(_ int, cfg *Config) { cfg.StrictInput = true })
	l := c.leader()
	enc := func(ct fsm.CmdType, body any) []byte {
		e, err := fsm.Encode(ct, body)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	reg := func(app string) []byte {
		return enc(fsm.CmdRegister, &fsm.RegisterBody{Instance: &fsm.Instance{InstanceID: "i-1", HostName: "h", App: app,
			IPAddr: "10.0.0.1", Status: "UP", DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}}})
	}
	other := c.followers()[0].self
	cases := []struct {
		name  string
		entry []byte
		ok    bool
	}{
		{"register", reg("SVC"), true},
		{"register EVIL/../X", reg("EVIL/../X"), false},
		{"override bad status", enc(fsm.CmdSetOverride, &fsm.OverrideBody{App: "SVC", ID: "i-1", Status: "EVIL"}), false},
		{"mode", enc(fsm.CmdSetMode, &fsm.ModeBody{Mode: ModeAP}), true},
		{"mode bad", enc(fsm.CmdSetMode, &fsm.ModeBody{Mode: "ca"}), false},
		{"evict", enc(fsm.CmdEvict, &fsm.EvictBody{Keys: []fsm.KeyBody{{App: "SVC", ID: "i-1"}}}), false},
		{"evict leases", enc(fsm.CmdEvictLeases, &fsm.EvictLeasesBody{Leases: []fsm.ExpiredLease{{App: "SVC", ID: "i-1"}}}), false},
		{"renew batch", enc(fsm.CmdRenewBatch, &fsm.RenewBatchBody{}), false},
		{"remove member", enc(fsm.CmdRemoveMember, &fsm.KeyBody{ID: other.ID}), false},
		{"own member record", enc(fsm.CmdSetMember, &other), true},
		{"member record moved", enc(fsm.CmdSetMember, &fsm.Member{ID: other.ID, RaftAddr: "10.6.6.6:1", HTTPAddr: "10.6.6.6:2"}), false},
		{"invented member", enc(fsm.CmdSetMember, &fsm.Member{ID: "ghost", RaftAddr: "10.6.6.6:1", HTTPAddr: "10.6.6.6:2"}), false},
	}
	b := backend{l.Node}
	for _, tc := range cases {
		_, err := b.Apply(tc.entry)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, fsm.ErrBadCommand) && !errors.Is(err, ErrUnknownMember) {
			t.Errorf("%s: %v is neither a bad command nor an unknown member", tc.name, err)
		}
	}
	results, _, err := b.ApplyBatch([][]byte{reg("EVIL/../X"), reg("GOOD")}, false)
	if err != nil || results[0] == nil || results[1] != nil {
		t.Fatalf("batch: %v %v", results, err)
	}
	l.fsm.Read(func(r *fsm.Registry) {
		if r.Get("EVIL/../X", "i-1") != nil {
			t.Error("the refused registration was stored")
		}
		if r.Get("GOOD", "i-1") == nil {
			t.Error("the good registration of the batch was not stored")
		}
	})
}
