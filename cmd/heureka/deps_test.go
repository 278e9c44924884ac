package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServerBinaryLeavesOutBenchClients checks that the binary operators
// deploy links no etcd client, gRPC or zap: those come with the etcd column
// of heureka bench, which only a build with -tags etcdclient carries
// (docs/bench.md, "The etcd column"). bbolt, raft-boltdb's storage engine,
// lives under go.etcd.io too and is the one package from there allowed.
func TestServerBinaryLeavesOutBenchClients(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed only %d packages:\n%s", len(deps), out)
	}
	for _, p := range deps {
		banned := strings.HasPrefix(p, "go.etcd.io/") && !strings.HasPrefix(p, "go.etcd.io/bbolt") ||
			strings.HasPrefix(p, "google.golang.org/grpc") || strings.HasPrefix(p, "go.uber.org/zap")
		if banned {
			t.Errorf("./cmd/heureka links %s", p)
		}
	}
}
