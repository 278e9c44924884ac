package main

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
	"github.com/heureka-registry/heureka/store"
)

// A first start that fails on a port in use leaves its new data directory
// unclaimed: the corrected command (here with another node id) starts.
func TestServe_FailedFirstStartDoesNotClaimTheDataDir(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	raftAddr, err := launch.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	if code := run([]string{"serve", "--data-dir", dir, "--node-id", "typo", "--http-addr", busy.Addr().String(), "--raft-addr", raftAddr}); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	cfg := store.DefaultConfig(dir)
	cfg.NodeID = "n1"
	st, err := store.Open(cfg, nil)
	if err != nil {
		t.Fatalf("the failed first start claimed the directory: %v", err)
	}
	st.Close()
}
