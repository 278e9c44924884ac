package cluster

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/store"
)

// Deps is what a node runs on besides its Config: Raft's transport and
// stores, and the directory of the AP fallback journal. heureka serve gives
// only Store, an open data directory, and gets the TCP transport (with the
// preamble, over mutual TLS when Config.RaftTLS is set, proving the
// cluster secret when Config.ClusterSecret is set) and the directory's
// bolt and file stores. Tests give Raft's in-memory transport and stores
// instead, so a multi-node cluster runs in one process without a socket or
// a disk for Raft.
type Deps struct {
	// Store is an open data directory. Its stores stand in for any store
	// left nil below, and JournalDir defaults to it.
	Store *store.Store
	// Transport carries Raft's RPCs between nodes. Nil: New listens on
	// Config.RaftBind and closes that transport on Shutdown; a transport
	// given here stays the caller's to close, and its local address must be
	// the node's advertised Raft address (Config.RaftAdvertise or RaftBind).
	Transport raft.Transport
	// LogStore, StableStore and SnapshotStore are Raft's stores.
	LogStore      raft.LogStore
	StableStore   raft.StableStore
	SnapshotStore raft.SnapshotStore
	// JournalDir is where the AP fallback journal is kept.
	JournalDir string
	// Disk says while the disk the stores write to is full (the stores
	// report to it, see store.WatchLog). Nil: Store's, else a watch of
	// JournalDir, which only the journal reports to.
	Disk *store.DiskWatch
}

// raftDeps are Deps with every default filled in.
type raftDeps struct {
	trans      raft.Transport
	ownTrans   bool // created by New, so closed by the node
	logs       raft.LogStore
	stable     raft.StableStore
	snaps      raft.SnapshotStore
	journalDir string
	disk       *store.DiskWatch
	// logSize is the log's size on disk for /v1/status (0 without a data
	// directory).
	logSize func() int64
	// ids keeps the cluster identity (the data directory; nil without one).
	ids clusterIDStore
}

// resolve fills in the stores and the journal directory from d.Store where
// they are not given; the transport comes later (listen), once the rest of
// the node is set up.
func (d Deps) resolve(cfg *Config) (raftDeps, error) {
	r := raftDeps{trans: d.Transport, logs: d.LogStore, stable: d.StableStore, snaps: d.SnapshotStore,
		journalDir: d.JournalDir, disk: d.Disk, logSize: func() int64 { return 0 }}
	if st := d.Store; st != nil {
		if r.logs == nil {
			r.logs = st.Log
		}
		if r.stable == nil {
			r.stable = st.Stable
		}
		if r.snaps == nil {
			r.snaps = st.Snapshots
		}
		if r.journalDir == "" {
			r.journalDir = st.Dir()
		}
		r.logSize = st.LogSize
		r.ids = st
		if r.disk == nil {
			r.disk = st.Disk
		}
	}
	if r.logs == nil || r.stable == nil || r.snaps == nil {
		return r, errors.New("cluster deps: raft log, stable and snapshot stores are required (or a data directory)")
	}
	if r.journalDir == "" {
		return r, errors.New("cluster deps: a journal directory is required (or a data directory)")
	}
	if r.disk == nil {
		r.disk = store.NewDiskWatch(r.journalDir)
	}
	if r.trans != nil && string(r.trans.LocalAddr()) != cfg.advertiseRaft() {
		return r, fmt.Errorf("cluster deps: transport address %q is not the advertised raft address %q",
			r.trans.LocalAddr(), cfg.advertiseRaft())
	}
	return r, nil
}

// listen creates the TCP transport when none was given: Raft listens on
// cfg.RaftBind and peers dial the advertised address.
func (r *raftDeps) listen(cfg *Config, log hclog.Logger, clusterID func() string, member func(string) bool) error {
	if r.trans != nil {
		return nil
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.advertiseRaft())
	if err != nil {
		return fmt.Errorf("resolve raft advertise address: %w", err)
	}
	stream, err := newStreamLayer(cfg.RaftBind, adv, cfg.NodeID, streamOptions{
		TLS: cfg.RaftTLS, Secret: cfg.ClusterSecret, ClusterID: clusterID, Member: member, Log: log.Named("raft-auth")})
	if err != nil {
		return fmt.Errorf("listen raft on %s: %w", cfg.RaftBind, err)
	}
	r.trans = raft.NewNetworkTransportWithLogger(stream, 3, 10*time.Second, log.Named("transport"))
	r.ownTrans = true
	return nil
}

// closeTransport closes the transport if the node created it.
func (r *raftDeps) closeTransport() {
	if c, ok := r.trans.(raft.WithClose); ok && r.ownTrans {
		_ = c.Close()
	}
}
