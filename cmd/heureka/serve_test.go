package main

import (
	"os"
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
		c.api.Cache.PushWindow != 50*time.Millisecond || c.api.Cache.UpdateInterval != 30*time.Second {
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
		{[]string{"--http-addr", "127.0.0.1:99999"}, "--http-addr"},
		{[]string{"--http-addr", "127.0.0.1:http"}, "--http-addr"},
		{[]string{"--raft-addr", "127.0.0.1:70000"}, "--raft-addr"},
		{[]string{"--raft-advertise", "127.0.0.1:-1"}, "--raft-advertise"},
		{[]string{"--join", "127.0.0.1:99999"}, "--join"},
		{[]string{"--data-dir", ""}, "--data-dir"},
		{[]string{"--max-body-bytes", "16777216"}, "--max-body-bytes"},
		{[]string{"--eureka-peers", "host:8761/eureka/"}, "--eureka-peers"},
		{[]string{"--eureka-peers", "http://u:pw-hidden@:8761/eureka/"}, "u:xxxxx@"},
		{[]string{"--eureka-peers", "http://127.0.0.1:8761/eureka/", "--eureka-sync-timeout", "0s"}, "--eureka-sync-timeout"},
		{[]string{"--http-advertise", "garbage"}, "--http-advertise"},
		{[]string{"--http-advertise", "0.0.0.0:8761"}, "--http-advertise"},
		{[]string{"--http-advertise", "127.0.0.1:0"}, "--http-advertise"},
		{[]string{"--http-advertise", "127.0.0.1:99999"}, "--http-advertise"},
		{[]string{"--http-addr", "127.0.0.1:0"}, "--http-advertise"},
		{[]string{"--http-addr", "0.0.0.0:8761", "--raft-addr", "0.0.0.0:9", "--raft-advertise", "10.0.0.1:9"}, ""},
		{[]string{"--http-addr", "0.0.0.0:8761", "--http-advertise", "10.0.0.1:8761"}, ""},
		{[]string{"--response-cache-update-interval", "1ns"}, "--response-cache-update-interval"},
		{[]string{"--response-cache-update-interval", "10ms"}, ""},
		{[]string{"--dashboard-trend-interval", "1ns"}, "--dashboard-trend-interval"},
		{[]string{"--dashboard-trend-interval", "0"}, "--dashboard-trend-interval"},
		{[]string{"--dashboard-trend-interval", "100ms"}, ""},
		{[]string{"--dashboard-trend-interval", "99ms"}, "--dashboard-trend-interval"},
		{[]string{"--renew-batch-interval", "1ns"}, "--renew-batch-interval"},
		{[]string{"--renew-batch-interval", "0"}, ""},
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

// An HTTP listen address on all interfaces (0.0.0.0, ::, no host) is not an
// address peers can dial: unless --http-advertise or the initial cluster
// names one, the node advertises its Raft advertise address's host with the
// HTTP port, never 0.0.0.0 (followers forward writes to the leader's).
func TestParseServe_HTTPAdvertiseOfAnUnspecifiedListenAddress(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http-addr", "0.0.0.0:8761"}, "127.0.0.1:8761"},
		{[]string{"--http-addr", ":8761", "--raft-addr", "0.0.0.0:8762", "--raft-advertise", "n1.example:8762"}, "n1.example:8761"},
		{[]string{"--http-addr", "[::]:8761", "--raft-addr", "[fd00::1]:8762"}, "[fd00::1]:8761"},
		{[]string{"--http-addr", "0.0.0.0:8761", "--http-advertise", "h:1"}, "h:1"},
		{[]string{"--http-addr", "0.0.0.0:8761", "--node-id", "a", "--initial-cluster", "a=10.0.0.1:1@10.0.0.1:2"}, "10.0.0.1:2"},
	} {
		c, _, err := parseServe(tc.args, noEnv)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		cc, err := c.clusterConfig()
		if err != nil || cc.HTTPAdvertise != tc.want {
			t.Errorf("%v: advertises %q (%v), want %q", tc.args, cc.HTTPAdvertise, err, tc.want)
		}
	}
}

// TestReadmeServeCommandsParse: the README's three-node example starts
// nodes parseServe accepts, advertising what the list names.
func TestReadmeServeCommandsParse(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if name, v, ok := strings.Cut(line, "="); ok && name == "C" {
			vars["$"+name] = v
			continue
		}
		rest, ok := strings.CutPrefix(line, "./heureka serve ")
		if !ok {
			continue
		}
		var args []string
		for _, a := range strings.Fields(strings.TrimSuffix(rest, "&")) {
			if v, ok := vars[a]; ok {
				a = v
			}
			args = append(args, a)
		}
		c, _, err := parseServe(args, noEnv)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if cc, _ := c.clusterConfig(); cc.HTTPAdvertise != c.httpAddr {
			t.Errorf("%s: advertises %s, listens on %s", line, cc.HTTPAdvertise, c.httpAddr)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("found %d serve commands in the README, want 3", n)
	}
}
