package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/opapi"
)

func TestOpsFlagsAnywhere(t *testing.T) {
	c, pos, err := newOps("snapshot", []string{"save", "--addr", "10.0.0.1:9000", "f.snap", "--json", "--timeout=3s"}, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pos, []string{"save", "f.snap"}) || c.base != "http://10.0.0.1:9000" || !c.json || c.client.Timeout != 3*time.Second {
		t.Fatalf("pos %v base %s json %v timeout %v", pos, c.base, c.json, c.client.Timeout)
	}
	c, _, err = newOps("status", []string{"--addr", "https://n1.example:8761/"}, time.Second, nil)
	if err != nil || c.base != "https://n1.example:8761" {
		t.Fatalf("base %q, %v", c.base, err)
	}
	if _, _, err := newOps("status", []string{"--nope"}, time.Second, nil); !errors.Is(err, errUsage) {
		t.Fatalf("unknown flag: %v, want a usage error", err)
	}
}

// TestStatusSummary renders heureka status from a server's /v1/status body
// (the one opapi.Status type both sides share).
func TestStatusSummary(t *testing.T) {
	body, err := json.Marshal(opapi.Status{
		NodeStatus: opapi.NodeStatus{Node: "n1", State: "Follower", Mode: "ap", Fallback: true, Instances: 3, Applications: 2,
			DiskFull: true, DiskFullForMs: 4200, DiskFullRefused: 7, DiskFullCause: "write raft.db: no space left on device"},
		Leases: &opapi.LeaseStatus{SelfPreservationEnabled: true, SelfPreservationActive: true, RenewsLastMin: 4, Threshold: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	c, _, err := newOps("status", []string{"--addr", srv.URL}, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	c.stdout = &out
	if err := c.status(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"n1 (Follower)", "quorum no, AP fallback ACTIVE", "2 applications, 3 instances", "renews 4/min, threshold 5", "EMERGENCY",
		"FULL for 4s: writes refused (7 so far) until there is room; write raft.db: no space left on device"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestMembersRemoveEscapesID: the id is one path segment whatever it holds
// (ids from before the id charset check may hold '/', '%' or '?'), and an
// empty id is a usage error, not DELETE /v1/members/.
func TestMembersRemoveEscapesID(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.EscapedPath())
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	if code := run([]string{"members", "remove", "--addr", srv.URL, "a/b%c?d"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if want := "DELETE /v1/members/a%2Fb%25c%3Fd"; len(got) != 1 || got[0] != want {
		t.Fatalf("requests %v, want [%s]", got, want)
	}
	got = nil
	if code := run([]string{"members", "remove", "--addr", srv.URL, ""}); code != 2 || len(got) != 0 {
		t.Fatalf("empty id: exit %d, requests %v; want 2 and none", code, got)
	}
}

// TestRun_UsageErrors: bad usage exits 2 before any request, for every
// subcommand: stray positional arguments, an empty file name, an --addr
// that is no URL. --help exits 0.
func TestRun_UsageErrors(t *testing.T) {
	body := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(body, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	const closed = "127.0.0.1:1" // nothing listens: a request would exit 1
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"status", "extra", "--addr", closed}, 2},
		{[]string{"status", "--addr", "http://[::1"}, 2},
		{[]string{"status", "--addr", "ftp://127.0.0.1:1"}, 2},
		{[]string{"status", "--addr", "http://"}, 2},
		{[]string{"status", "--addr", closed}, 1},
		{[]string{"members", "list", "extra", "--addr", closed}, 2},
		{[]string{"members", "remove", "a", "b", "--addr", closed}, 2},
		{[]string{"mode", "ap", "cp", "--addr", closed}, 2},
		{[]string{"snapshot", "save", "", "--addr", closed}, 2},
		{[]string{"snapshot", "restore", "", "--addr", closed}, 2},
		{[]string{"snapshot", "save", "f", "extra", "--addr", closed}, 2},
		{[]string{"import", "--from", "http://" + closed + "/eureka/", "extra"}, 2},
		{[]string{"auth", "hash", "extra"}, 2},
		{[]string{"bench", "extra"}, 2},
		{[]string{"lab", "extra"}, 2},
		{[]string{"limit-server", "--body-file", body, "--addr", closed, "extra"}, 2},
		{[]string{"lab", "--help"}, 0},
		{[]string{"limit-server", "--help"}, 0},
		{[]string{"status", "--help"}, 0},
		{[]string{"help", "status"}, 2},
		{[]string{"members", "remove", "n1", "--id", "n1", "--addr", closed}, 2},
		{[]string{"members", "--http-addr", "127.0.0.1:2", "--addr", closed}, 2},
		{[]string{"snapshot", "restore", "f", "--stale", "--addr", closed}, 2},
	} {
		if got := run(tc.args); got != tc.want {
			t.Errorf("heureka %q: exit %d, want %d", tc.args, got, tc.want)
		}
	}
}

// A node URL refused as a usage error is shown without its password.
func TestOps_BadAddrDoesNotShowItsPassword(t *testing.T) {
	for _, addr := range []string{"http://ops:hunter2-secret@127.0.0.1:99999", "http://ops:hunter2-secret@127.0.0.1:8761/eur%zz", "ftp://ops:hunter2-secret@host/"} {
		_, _, err := newOps("status", []string{"--addr", addr}, time.Second, nil)
		if err == nil || strings.Contains(err.Error(), "hunter2-secret") || !strings.Contains(err.Error(), "ops:xxxxx@") {
			t.Errorf("--addr %s: %v", addr, err)
		}
		var stderr bytes.Buffer
		if code := importCmd([]string{"--from", addr}, &bytes.Buffer{}, &stderr); code != 2 || strings.Contains(stderr.String(), "hunter2-secret") {
			t.Errorf("import --from %s: exit %d, %s", addr, code, stderr.String())
		}
	}
}
