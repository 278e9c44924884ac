package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

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
// names none and is not refused for it.

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

// checkPeerCluster refuses a peer that names another cluster than this
// node's; a peer or node that names none passes.
func (n *Node) checkPeerCluster(peer string) error {
	return sameCluster(n.ClusterID(), peer)
}

func sameCluster(own, peer string) error {
	if own == "" || peer == "" || own == peer {
		return nil
	}
	return fmt.Errorf("the peer belongs to cluster %s; this node belongs to cluster %s: %w", peer, own, ErrOtherCluster)
}
