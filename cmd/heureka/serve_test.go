package main

import (
	"strings"
	"testing"
	"time"
)

func noEnv(string) string { return "" }

func TestParseServe_Defaults(t *testing.T) {
	c, _, err := parseServe(nil, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.httpAddr != "127.0.0.1:8761" || c.raftAddr != "127.0.0.1:8762" || c.dataDir != "heureka-data" || c.cluster.Mode != "ap" ||
		c.api.Cache.PushWindow != 2*time.Millisecond || c.api.Cache.UpdateInterval != 30*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
	cc, err := c.clusterConfig()
	if err != nil || cc.HTTPAdvertise != "127.0.0.1:8761" || len(cc.InitialCluster) != 0 {
		t.Fatalf("cluster config: %+v %v", cc, err)
	}
}

func TestParseServe_EnvAndFlags(t *testing.T) {
	env := map[string]string{
		"HEUREKA_NODE_ID":           "from-env",
		"HEUREKA_MODE":              "cp",
		"HEUREKA_INITIAL_CLUSTER":   "a=127.0.0.1:1@127.0.0.1:2,b=127.0.0.1:3@127.0.0.1:4",
		"HEUREKA_EVICTION_INTERVAL": "5s",
	}
	c, _, err := parseServe([]string{"--node-id", "b"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.nodeID != "b" || c.cluster.Mode != "cp" || c.cluster.Lease.EvictionInterval != 5*time.Second {
		t.Fatalf("flag must beat env, env must beat default: %+v", c)
	}
	cc, _ := c.clusterConfig()
	if cc.RaftAdvertise != "127.0.0.1:3" || cc.HTTPAdvertise != "127.0.0.1:4" {
		t.Fatalf("advertise from initial cluster: %+v", cc)
	}
}

// Flags write the cluster's and the HTTP API's settings in place: what a
// flag says is what the node and the cache get.
func TestParseServe_FlagsReachConfigs(t *testing.T) {
	c, _, err := parseServe([]string{"--raft-commit-timeout", "7ms", "--snapshot-threshold", "99",
		"--enable-self-preservation=false", "--journal-max-entries", "5",
		"--response-cache-push-window", "0", "--use-read-only-response-cache=false", "--max-body-bytes", "4096", "--pprof"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := c.clusterConfig()
	if err != nil || cc.CommitTimeout != 7*time.Millisecond || cc.SnapshotThreshold != 99 || cc.Lease.SelfPreservation ||
		cc.JournalMaxEntries != 5 || cc.Lease.EvictionInterval != 60*time.Second {
		t.Fatalf("cluster config: %+v %v", cc, err)
	}
	if a := c.api; a.Cache.PushWindow != 0 || a.Cache.UseReadOnly || a.MaxBodyBytes != 4096 || !a.Pprof ||
		a.Cache.AutoExpiration != 180*time.Second || !a.StrictInput {
		t.Fatalf("http api config: %+v", a)
	}
}

func TestParseServe_BadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "xy"}, "mode"},
		{[]string{"--bogus"}, "bogus"},
		{[]string{"--http-addr", "nope"}, "--http-addr"},
		{[]string{"--initial-cluster", "a=1.2.3.4:1"}, "initial-cluster"},
		{[]string{"--node-id", "c", "--initial-cluster", "a=127.0.0.1:1@127.0.0.1:2"}, "does not list"},
		{[]string{"--initial-cluster", "a=127.0.0.1:1@127.0.0.1:2,a=127.0.0.1:3@127.0.0.1:4", "--node-id", "a"}, "repeats"},
		{[]string{"--renewal-percent-threshold", "2"}, "threshold"},
		{[]string{"--log-level", "loud"}, "log-level"},
		{[]string{"--response-cache-push-window", "-1ms"}, "push-window"},
		{[]string{"--join", "127.0.0.1:1", "--initial-cluster", "a=127.0.0.1:1@127.0.0.1:2", "--node-id", "a"}, "exclude"},
		{[]string{"extra"}, "unexpected"},
		{[]string{"--raft-addr", "0.0.0.0:9"}, "raft-advertise"},
		{[]string{"--raft-addr", "0.0.0.0:9", "--raft-advertise", "127.0.0.1:9"}, ""},
		{[]string{"--renewal-percent-threshold", "NaN"}, "threshold"},
		{[]string{"--raft-heartbeat-timeout", "5s"}, "heartbeat timeout must not exceed the election timeout"},
		{[]string{"--raft-leader-lease-timeout", "1ms"}, "at least 5ms"},
		{[]string{"--raft-leader-lease-timeout", "-5s"}, "at least 5ms"},
		{[]string{"--raft-commit-timeout", "1ns"}, "commit timeout"},
		{[]string{"--snapshot-interval", "1ns"}, "snapshot interval"},
		{[]string{"--eviction-interval", "1ns"}, "eviction interval"},
		{[]string{"--node-id", "a/b"}, "member id"},
		{[]string{"--node-id", "n 1"}, "member id"},
		{[]string{"--node-id", "n1", "--initial-cluster", "n1=127.0.0.1:1@127.0.0.1:2,b%41=127.0.0.1:3@127.0.0.1:4"}, "member id"},
	} {
		_, _, err := parseServe(tc.args, noEnv)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: unexpected error %v", tc.args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want error mentioning %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error is not one line: %q", tc.args, err)
		}
	}
}

func TestRun_ExitCodes(t *testing.T) {
	if code := run([]string{"serve", "--mode", "nope"}); code != 2 {
		t.Fatalf("bad flag exit %d", code)
	}
	if code := run([]string{"frobnicate"}); code != 2 {
		t.Fatalf("unknown command exit %d", code)
	}
	if code := run([]string{"serve", "--help"}); code != 0 {
		t.Fatalf("help exit %d", code)
	}
}
