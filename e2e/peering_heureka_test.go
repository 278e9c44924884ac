package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// instanceLease reads one instance's status, registration time and last
// renewal from GET /eureka/apps/{app}/{id} ("" status when absent), built
// fresh (a cached document keeps the renewal time it was built with).
func instanceLease(base, app, id string) (status string, registered, renewed int64) {
	code, body, _, err := TryDo("GET", base+"/eureka/apps/"+app+"/"+id+"?consistency=linearizable", nil)
	if err != nil || code != 200 {
		return "", 0, 0
	}
	var doc struct {
		Instance struct {
			Status    string `json:"status"`
			LeaseInfo struct {
				Registration int64 `json:"registrationTimestamp"`
				LastRenewal  int64 `json:"lastRenewalTimestamp"`
			} `json:"leaseInfo"`
		} `json:"instance"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return "", 0, 0
	}
	return doc.Instance.Status, doc.Instance.LeaseInfo.Registration, doc.Instance.LeaseInfo.LastRenewal
}

// TestHeurekaAsPeerOfHeureka: a heureka cluster's outbound replication
// into another heureka's inbound endpoint, which speaks the same protocol
// as an eureka-server ring (docs/migrate-from-eureka.md). Cluster A (3
// nodes) joins B as a peer: it copies B's registry before serving reads,
// replicates its own clients' register, heartbeats, status change and
// cancel to B, never echoes what it copied, and keeps replicating after
// its leader is killed. heureka import copies B into a third cluster.
func TestHeurekaAsPeerOfHeureka(t *testing.T) {
	b := StartCluster(t, 1, Options{})
	b.WaitLeader(t, 15*time.Second)
	bBase := b.Nodes[0].BaseURL()
	RegisterJSON(t, bBase, "PRE", "p-1", nil)
	_, preReg, _ := instanceLease(bBase, "PRE", "p-1")

	a := StartCluster(t, 3, Options{ExtraArgs: []string{"--eureka-peers", b.Nodes[0].URL("/eureka/")}})
	a.WaitLeader(t, 15*time.Second)
	for _, nd := range a.Nodes {
		if !Eventually(30*time.Second, func() bool {
			s, _, _ := instanceLease(nd.BaseURL(), "PRE", "p-1")
			return s == "UP"
		}) {
			t.Fatalf("%s does not serve the copied PRE/p-1", nd.ID)
		}
	}
	aBase := a.Nodes[1].BaseURL()
	RegisterJSON(t, aBase, "MIG", "m-1", nil)
	if !Eventually(10*time.Second, func() bool { s, _, _ := instanceLease(bBase, "MIG", "m-1"); return s == "UP" }) {
		t.Fatal("MIG/m-1 registered on A did not reach B")
	}
	_, _, renewed := instanceLease(bBase, "MIG", "m-1")
	time.Sleep(20 * time.Millisecond)
	if code, _, _ := Do(t, "PUT", aBase+"/eureka/apps/MIG/m-1", nil); code != 200 {
		t.Fatalf("heartbeat on A: %d", code)
	}
	if !Eventually(10*time.Second, func() bool { _, _, r := instanceLease(bBase, "MIG", "m-1"); return r > renewed }) {
		t.Fatal("a heartbeat on A did not renew the lease on B")
	}
	if code, _, _ := Do(t, "PUT", aBase+"/eureka/apps/MIG/m-1/status?value=OUT_OF_SERVICE", nil); code != 200 {
		t.Fatalf("status on A: %d", code)
	}
	if !Eventually(10*time.Second, func() bool { s, _, _ := instanceLease(bBase, "MIG", "m-1"); return s == "OUT_OF_SERVICE" }) {
		t.Fatal("a status change on A did not reach B")
	}
	if code, _, _ := Do(t, "DELETE", aBase+"/eureka/apps/MIG/m-1", nil); code != 200 {
		t.Fatalf("cancel on A: %d", code)
	}
	if !Eventually(10*time.Second, func() bool { s, _, _ := instanceLease(bBase, "MIG", "m-1"); return s == "" }) {
		t.Fatal("a cancel on A did not reach B")
	}
	if _, reg, _ := instanceLease(bBase, "PRE", "p-1"); reg != preReg {
		t.Fatalf("B's PRE/p-1 was registered again (%d, was %d): A echoed a copied instance", reg, preReg)
	}

	// The leader that replicates dies; the next one carries on.
	leader := a.WaitLeader(t, 15*time.Second)
	leader.Kill()
	var alive string
	for _, nd := range a.Nodes {
		if nd != leader {
			alive = nd.BaseURL()
		}
	}
	a.WaitLeader(t, 15*time.Second)
	RegisterJSON(t, alive, "MIG", "m-2", nil)
	if !Eventually(15*time.Second, func() bool { s, _, _ := instanceLease(bBase, "MIG", "m-2"); return s == "UP" }) {
		t.Fatal("after the leader was killed, MIG/m-2 did not reach B")
	}

	// heureka import: a one-time copy of B into a fresh cluster C.
	cl := StartCluster(t, 1, Options{})
	cl.WaitLeader(t, 15*time.Second)
	out, err := exec.Command(Binary(t), "import", "--from", b.Nodes[0].URL("/eureka/"), "--to", cl.Nodes[0].URL("/eureka/")).CombinedOutput()
	if err != nil {
		t.Fatalf("heureka import: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "instances 2 registered 2 failed 0") {
		t.Fatalf("heureka import said %q", out)
	}
	src, dst := GetApps(t, bBase).ByKey(), GetApps(t, cl.Nodes[0].BaseURL()).ByKey()
	if len(dst) != len(src) {
		t.Fatalf("import copied %d of %d instances", len(dst), len(src))
	}
	for k, in := range src {
		if got := dst[k]; got.LastDirtyTimestamp != in.LastDirtyTimestamp || got.Status != in.Status {
			t.Errorf("%s imported as %s/%s, want %s/%s", k, got.Status, got.LastDirtyTimestamp, in.Status, in.LastDirtyTimestamp)
		}
	}
}
