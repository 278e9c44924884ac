package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
)

// A cluster has an identity, a random id its first leader writes to the log
// (fsm.CmdSetClusterID) once, and every node keeps in its data directory
// (store.ClusterIDFile) as soon as it learns it, so that it can name its
// cluster at start, before it has replayed its log. Nodes carry it on every
// Raft connection (transport.go) and node-to-node call (nodeapi), and refuse
// a peer that names another cluster: a node started on a data directory of
// another cluster, or pointed at the wrong peers, is refused with both
// identities in the log instead of mixing two clusters' state. A node that
// does not know its cluster yet (a new node before its first replication)
// names none; a node that knows its own admits such a dialer only if the
// dialer is in its Raft configuration (admitDialer).

// ErrOtherCluster is a peer that belongs to another cluster.
var ErrOtherCluster = nodeapi.ErrOtherCluster

// clusterIDStore is where a node keeps the identity (store.Store).
type clusterIDStore interface {
	ClusterID() (string, error)
	SetClusterID(id string) error
}

// ClusterID is the identity of this node's cluster, "" while unknown.
func (n *Node) ClusterID() string {
	if p := n.clusterID.Load(); p != nil {
		return *p
	}
	return ""
}

// loadClusterID takes the identity the data directory recorded.
func (n *Node) loadClusterID() {
	if n.deps.ids == nil {
		return
	}
	id, err := n.deps.ids.ClusterID()
	if err != nil {
		n.log.Warn("reading the recorded cluster id failed", "error", err)
		return
	}
	if id != "" {
		n.clusterID.Store(&id)
	}
}

// refreshClusterID takes the identity from the FSM and records it in the
// data directory the first time.
func (n *Node) refreshClusterID() {
	var id string
	n.fsm.Read(func(r *fsm.Registry) { id = r.ClusterID() })
	if id == "" {
		return
	}
	cur := n.ClusterID()
	if cur == id {
		return
	}
	if cur != "" {
		// The data directory's record and its own log disagree: the record
		// was copied in from elsewhere. The log is what Raft replicates.
		n.log.Error("the recorded cluster id differs from the log's; using the log's", "recorded", cur, "log", id)
	}
	n.clusterID.Store(&id)
	if n.deps.ids != nil {
		if err := n.deps.ids.SetClusterID(id); err != nil {
			n.log.Warn("recording the cluster id failed", "error", err)
			return
		}
	}
	n.log.Info("cluster identity", "cluster_id", id)
}

// nameCluster writes a new cluster's identity (leader only, once).
func (n *Node) nameCluster() {
	var id string
	n.fsm.Read(func(r *fsm.Registry) { id = r.ClusterID() })
	if id != "" {
		return
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		n.log.Warn("naming the cluster failed", "error", err)
		return
	}
	id = hex.EncodeToString(b)
	if err := n.applyLocalCmd(fsm.CmdSetClusterID|fsm.CmdIgnoreUnknown, &fsm.ClusterIDBody{ID: id}); err != nil {
		n.log.Warn("naming the cluster failed; the next leader will", "error", err)
	}
}

// admitDialer is the Raft acceptor's check of a dialer's identity: besides
// sameCluster, a node that knows its cluster refuses a dialer that names
// none unless it is in the node's Raft configuration (member). Only a
// leader or a candidate dials; one of this cluster is a member, and a
// member may name none for a moment (it has not applied the naming entry
// yet). A stranger naming none is a node of a new cluster that has not
// named itself yet: the other nodes of a new cluster started beside a
// reused data directory, whose leader's log sits at the same indexes and
// terms as this node's. Following it would mix the two logs.
func admitDialer(own, peer, from string, member func(string) bool) error {
	if own != "" && peer == "" && (member == nil || !member(from)) {
		return fmt.Errorf("node %q names no cluster and is not in this node's configuration; this node belongs to cluster %s: %w", from, own, ErrOtherCluster)
	}
	return sameCluster(own, peer)
}

func sameCluster(own, peer string) error {
	if own == "" || peer == "" || own == peer {
		return nil
	}
	return fmt.Errorf("the peer belongs to cluster %s; this node belongs to cluster %s: %w", peer, own, ErrOtherCluster)
}

// configured reports whether id is in this node's latest Raft
// configuration (false before Raft runs).
func (n *Node) configured(id string) bool {
	r := n.started.Load()
	if r == nil {
		return false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	return hasServer(f.Configuration().Servers, id)
}

// checkInitialCluster says at start when --initial-cluster names other
// members than the configuration the data directory holds (which is the
// one used): a directory of another cluster reused for this one, or a
// cluster whose membership changed since its first start.
func (n *Node) checkInitialCluster() {
	if len(n.cfg.InitialCluster) == 0 {
		return
	}
	servers, err := n.servers()
	if err != nil {
		return
	}
	var flag, stored []string
	for _, m := range n.cfg.InitialCluster {
		flag = append(flag, m.ID)
	}
	for _, s := range servers {
		stored = append(stored, string(s.ID))
	}
	slices.Sort(flag)
	slices.Sort(stored)
	if slices.Equal(flag, stored) {
		return
	}
	n.log.Warn("--initial-cluster names other members than the data directory holds; the directory's membership and cluster are used",
		"initial_cluster", strings.Join(flag, ","), "data_dir_members", strings.Join(stored, ","), "cluster_id", n.ClusterID())
}
