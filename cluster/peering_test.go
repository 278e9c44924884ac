package cluster

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/nodeapi"
)

// TestReplicatedRenewals: heartbeats an Eureka peer replicated renew the
// lease and count for self-preservation like a client's, but only a
// client's heartbeat reaches the OnLocalRenew hook (outbound replication),
// also when a follower forwards it in a batch marked replicated.
func TestReplicatedRenewals(t *testing.T) {
	n := singleNode(t, DefaultLeaseConfig())
	var mu sync.Mutex
	var local []string
	n.OnLocalRenew(func(app, id string) {
		mu.Lock()
		local = append(local, app+"/"+id)
		mu.Unlock()
	})
	register(t, n, "A", "1", 30)
	ctx := context.Background()
	before := n.leases.rate.perMinute(time.Now())
	if err := n.RenewReplicated(ctx, "A", "1", 0); err != nil {
		t.Fatal(err)
	}
	if err := n.RenewReplicated(ctx, "A", "nobody", 0); err == nil {
		t.Fatal("a replicated heartbeat of an unknown instance must be refused")
	}
	srv := httptest.NewServer(n.InternalHandler(nil))
	defer srv.Close()
	resp, err := http.Post(srv.URL+nodeapi.PathRenewBatch+"?replicated=true", "application/octet-stream",
		bytes.NewReader(encodeRenewBatch([]renewRequest{{App: "A", ID: "1"}})))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("forwarded replicated batch: %v %v", err, resp)
	}
	resp.Body.Close()
	mu.Lock()
	if len(local) != 0 {
		t.Fatalf("replicated heartbeats reached the local hook: %v", local)
	}
	mu.Unlock()
	// The counter leaves out the second still filling: read it a second on.
	// The same heartbeat replicated to several nodes counts once.
	if after := n.leases.rate.perMinute(time.Now().Add(time.Second)); after <= before {
		t.Fatalf("replicated heartbeats must count for self-preservation: %d -> %d", before, after)
	}
	var counted int64
	n.leases.rate.mu.Lock()
	for i := range n.leases.rate.buckets {
		counted += n.leases.rate.buckets[i]
	}
	n.leases.rate.mu.Unlock()
	if counted != 1 {
		t.Fatalf("one heartbeat replicated twice within a batch counted %d times, want 1", counted)
	}
	if err := n.Renew(ctx, "A", "1", 0); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(local) != 1 || local[0] != "A/1" {
		t.Fatalf("local hook saw %v, want [A/1]", local)
	}
}

// TestAddLeaderWork: work added while leading starts at once and stops
// when leadership ends (here: at shutdown).
func TestAddLeaderWork(t *testing.T) {
	n := singleNode(t, DefaultLeaseConfig())
	started, stopped := make(chan struct{}), make(chan struct{})
	deadline := time.Now().Add(5 * time.Second)
	for n.rd.leaderTerm.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	n.AddLeaderWork(func(stop <-chan struct{}) {
		close(started)
		<-stop
		close(stopped)
	})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("leader work added while leading did not start")
	}
	_ = n.Shutdown()
	select {
	case <-stopped:
	default:
		t.Fatal("leader work still running after shutdown")
	}
}
