package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// New refuses incomplete dependencies before it starts anything: stores
// missing without a data directory, no journal directory, or a transport
// that does not answer at the node's advertised Raft address.
func TestNew_DepsChecked(t *testing.T) {
	self := fsm.Member{ID: "n1", RaftAddr: "127.0.0.1:17901", HTTPAddr: "127.0.0.1:18901"}
	cfg := fastConfig(self, nil, ModeAP, nil)
	store := raft.NewInmemStore()
	_, trans := raft.NewInmemTransport(raft.ServerAddress(self.RaftAddr))
	defer trans.Close()
	_, elsewhere := raft.NewInmemTransport("127.0.0.1:17902")
	defer elsewhere.Close()
	full := Deps{Transport: trans, LogStore: store, StableStore: store,
		SnapshotStore: raft.NewInmemSnapshotStore(), JournalDir: t.TempDir()}
	for name, tc := range map[string]struct {
		edit func(d *Deps)
		want string
	}{
		"no log store":        {func(d *Deps) { d.LogStore = nil }, "stores are required"},
		"no snapshots":        {func(d *Deps) { d.SnapshotStore = nil }, "stores are required"},
		"no journal dir":      {func(d *Deps) { d.JournalDir = "" }, "journal directory"},
		"transport elsewhere": {func(d *Deps) { d.Transport = elsewhere }, "not the advertised raft address"},
	} {
		d := full
		tc.edit(&d)
		if _, err := New(cfg, d, fsm.New(time.Minute, nil), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v, want an error containing %q", name, err, tc.want)
		}
	}
	n, err := New(cfg, full, fsm.New(time.Minute, nil), nil)
	if err != nil {
		t.Fatalf("New with every dependency given: %v", err)
	}
	waitFor(t, time.Second, "a single in-memory node leading", n.IsLeader)
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
}
