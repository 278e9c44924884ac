package e2e

// Cluster identity (docs/security.md, "Who may call what"): every cluster
// is named by its first leader; a node started on the data directory of
// another cluster is refused by its would-be peers, and refuses them, with
// both identities in the logs, and the cluster it was dropped into goes on
// without it.

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

func TestClusterIdentityRefusesForeignDataDir(t *testing.T) {
	a := StartCluster(t, 3, Options{})
	b := StartCluster(t, 3, Options{})
	aLeader, bLeader := a.WaitLeader(t, 15*time.Second), b.WaitLeader(t, 15*time.Second)
	idOf := func(c *Cluster) string {
		var id string
		WaitFor(t, 10*time.Second, func() bool {
			id = ""
			for _, nd := range c.Live() {
				st := nd.Status(t)
				if st.ClusterID == "" || (id != "" && st.ClusterID != id) {
					return false
				}
				id = st.ClusterID
			}
			return true
		}, "every node to know its cluster's identity")
		return id
	}
	aID, bID := idOf(a), idOf(b)
	if aID == bID {
		t.Fatalf("two clusters share the identity %s", aID)
	}
	t.Logf("cluster A %s (leader %s), cluster B %s (leader %s)", aID, aLeader.ID, bID, bLeader.ID)

	// A node-to-node call naming another cluster is refused, both named.
	code, body, _ := Do(t, "GET", aLeader.URL("/internal/v1/read-index"), nil, "X-Heureka-Cluster-ID", bID)
	if code != http.StatusConflict || !strings.Contains(string(body), aID) || !strings.Contains(string(body), bID) {
		t.Fatalf("read-index from cluster B: %d %s, want 409 naming both", code, body)
	}

	// A's follower gets B's copy of its data directory.
	victim := a.Followers(aLeader)[0]
	var donor *Node
	for _, nd := range b.Nodes {
		if nd.ID == victim.ID {
			donor = nd
		}
	}
	for _, nd := range b.Nodes {
		nd.Stop()
	}
	victim.Stop()
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(victim.DataDir, os.DirFS(donor.DataDir)); err != nil {
		t.Fatal(err)
	}
	victim.Restart(t)
	if st := victim.Status(t); st.ClusterID != bID {
		t.Fatalf("%s on B's data directory names cluster %q, want %s", victim.ID, st.ClusterID, bID)
	}
	// The leader's heartbeats to it are refused: both logs name both.
	both := func(nd *Node) func() bool {
		return func() bool {
			for _, line := range strings.Split(readLog(t, nd.LogPath), "\n") {
				if strings.Contains(line, "peer_cluster=") && strings.Contains(line, aID) && strings.Contains(line, bID) {
					t.Logf("%s: %s", nd.ID, line)
					return true
				}
			}
			return false
		}
	}
	WaitFor(t, 15*time.Second, both(aLeader), "the leader's log to name both clusters")
	WaitFor(t, 15*time.Second, both(victim), "the foreign node's log to name both clusters")
	// A goes on with two nodes; the foreign node gets none of A's writes.
	if code, b, _ := Do(t, "POST", aLeader.URL("/eureka/apps/GOOD"), RegisterBody("GOOD", "good-1", nil)); code != 204 {
		t.Fatalf("register on A: %d %s", code, b)
	}
	time.Sleep(2 * time.Second)
	if code, _, _ := Do(t, "GET", victim.URL("/eureka/apps/GOOD/good-1?consistency=stale"), nil); code == 200 {
		t.Fatal("the node on B's data directory got A's registration")
	}
	if st := victim.Status(t); st.Leader == aLeader.ID {
		t.Fatalf("the node on B's data directory follows A's leader")
	}
	if st := aLeader.Status(t); st.State != "Leader" || st.ClusterID != aID {
		t.Fatalf("A's leader: %+v", st.NodeStatus)
	}
}
