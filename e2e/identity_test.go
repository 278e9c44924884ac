package e2e

// Cluster identity (docs/security.md, "Who may call what"): every cluster
// is named by its first leader; a node started on the data directory of
// another cluster is refused by its would-be peers, and refuses them, with
// both identities in the logs, and the cluster it was dropped into goes on
// without it.

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/runtime/tick"
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

// TestReusedDataDirNewCluster is the reused data directory: a single-node
// registry (100 instances) is stopped, and a new 3-node cluster is started
// with n1 on that directory and n2, n3 on new ones, every node with the same
// --initial-cluster. n1 does not follow the new cluster: it keeps to the
// cluster its directory holds, and the logs name both identities. Meanwhile
// every node's registry is read every few milliseconds, with the Raft index
// of its last change (X-Heureka-Index) and the node's cluster identity:
// no two nodes of one cluster ever serve different registries at the same
// index.
func TestReusedDataDirNewCluster(t *testing.T) {
	c := newCluster(t, Options{ExtraArgs: edCacheArgs})
	planned, err := c.lc.Plan(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range planned {
		c.add(nd)
	}
	n1 := c.Node("n1")
	clusterArgv := n1.Argv
	n1.Argv = c.lc.ServeArgs(n1.Node) // a single node, on the directory n1 reuses
	if err := n1.Start(); err != nil {
		t.Fatal(err)
	}
	n1.waitReady(t)
	WaitFor(t, 15*time.Second, func() bool { return n1.Status(t).State == "Leader" }, "the single node to lead")
	for i := range 100 {
		RegisterJSON(t, n1.BaseURL(), "OLD", fmt.Sprintf("old-%03d", i), nil)
	}
	oldID := n1.Status(t).ClusterID
	n1.Stop()

	n1.Argv = clusterArgv
	samples := make(chan riSample, 1<<16)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, nd := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			read := riSampler(nd)
			for !tick.Stopped(stop) {
				if s, ok := read(); ok {
					samples <- s
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	if err := c.lc.StartAll(readyTimeout); err != nil {
		t.Fatal(err)
	}
	// The new cluster's leader (n2 or n3) takes 50 registrations.
	var leader *Node
	WaitFor(t, 20*time.Second, func() bool {
		for _, nd := range []*Node{c.Node("n2"), c.Node("n3")} {
			if st, err := nd.TryStatus(); err == nil && st.State == "Leader" && st.ClusterID != "" {
				leader = nd
				return true
			}
		}
		return false
	}, "n2 or n3 to lead a named cluster")
	for i := range 50 {
		WaitFor(t, 10*time.Second, func() bool {
			return TryRegisterJSON(leader.BaseURL(), "NEW", fmt.Sprintf("new-%03d", i), nil) == nil
		}, "a registration on the new cluster")
	}
	newID := leader.Status(t).ClusterID
	if newID == oldID {
		t.Fatalf("the new cluster took the old one's identity %s", oldID)
	}
	both := func(nd *Node) func() bool {
		return func() bool {
			for _, line := range strings.Split(readLog(t, nd.LogPath), "\n") {
				if strings.Contains(line, oldID) && strings.Contains(line, newID) {
					t.Logf("%s: %s", nd.ID, line)
					return true
				}
			}
			return false
		}
	}
	WaitFor(t, 15*time.Second, both(leader), "the new leader's log to name both clusters")
	WaitFor(t, 15*time.Second, both(n1), "n1's log to name both clusters")
	time.Sleep(3 * time.Second) // more samples, with the cluster at rest
	close(stop)
	wg.Wait()
	close(samples)

	// The comparison: per cluster identity and index, one registry.
	type key struct {
		cluster string
		index   string
	}
	seen := map[key]riSample{}
	n, compared, across := 0, 0, 0
	for s := range samples {
		n++
		if s.node == "n1" && (s.cluster == newID || s.leader == "n2" || s.leader == "n3") {
			t.Fatalf("n1 followed the new cluster: %+v", s.brief())
		}
		if s.node != "n1" && s.cluster == oldID {
			t.Fatalf("%s took the old cluster's identity: %+v", s.node, s.brief())
		}
		k := key{s.cluster, s.index}
		first, ok := seen[k]
		if !ok {
			seen[k] = s
			continue
		}
		compared++
		if s.node != first.node {
			across++
		}
		if !slices.Equal(first.keys, s.keys) {
			t.Fatalf("cluster %q at index %s: %s serves %d instances, %s serves %d:\n%s: %v\n%s: %v", s.cluster, s.index,
				first.node, len(first.keys), s.node, len(s.keys), first.node, head(first.keys, 5), s.node, head(s.keys, 5))
		}
	}
	t.Logf("%d registry reads, %d compared with an earlier read at the same cluster and index, %d of them another node's; old cluster %s, new %s",
		n, compared, across, oldID, newID)
	if across == 0 {
		t.Fatal("no two nodes were read at the same index: the comparison compared nothing")
	}
	// n1 still serves the old registry, as the old cluster's only member;
	// n2 and n3 the new one.
	for _, nd := range c.Nodes {
		want := 50
		if nd.ID == "n1" {
			want = 100
		}
		var last riSample
		WaitFor(t, 10*time.Second, func() bool {
			s, ok := riSampler(nd)()
			last = s
			return ok && len(s.keys) == want
		}, fmt.Sprintf("%s to serve %d instances", nd.ID, want))
		if nd.ID == "n1" && (last.cluster != oldID || last.leader != "n1") {
			t.Errorf("n1: %s, want the old cluster, led by itself", last.brief())
		}
	}
	// n1 said at start that its directory holds another membership.
	if log := readLog(t, n1.LogPath); !strings.Contains(log, `initial_cluster="n1,n2,n3" data_dir_members=n1 cluster_id=`+oldID) {
		t.Errorf("n1's log does not say that its directory holds another membership:\n%s", n1.LogTail(30))
	}
}

// riSample is one registry read of the reused-directory test.
type riSample struct {
	node, cluster, leader, index string
	keys                         []string
}

func (s riSample) brief() string {
	return fmt.Sprintf("%s cluster %q leader %q index %s (%d instances)", s.node, s.cluster, s.leader, s.index, len(s.keys))
}

// riSampler returns a function that reads nd's status, its registry (as
// a client would, stale allowed, with the index of its last change), and
// its status again; a read whose two statuses differ in cluster or leader
// is dropped.
func riSampler(nd *Node) func() (riSample, bool) {
	return func() (riSample, bool) {
		st1, err := nd.TryStatus()
		if err != nil {
			return riSample{}, false
		}
		code, body, hdr, err := TryDo("GET", nd.URL("/eureka/apps?consistency=stale"), nil)
		if err != nil || code != http.StatusOK || hdr.Get("X-Heureka-Index") == "" {
			return riSample{}, false
		}
		st2, err := nd.TryStatus()
		if err != nil || st1.ClusterID != st2.ClusterID || st1.Leader != st2.Leader {
			return riSample{}, false
		}
		apps, err := ParseApps(body)
		if err != nil {
			return riSample{}, false
		}
		keys := make([]string, 0, len(apps.Instances))
		for k := range apps.ByKey() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return riSample{node: nd.ID, cluster: st1.ClusterID, leader: st1.Leader, index: hdr.Get("X-Heureka-Index"), keys: keys}, true
	}
}
