package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/heureka-registry/heureka/internal/runtime/collect"
)

// The operator CLI against a live cluster: status, members (list, remove,
// join), mode, their --json forms and exit codes; and /metrics of real
// nodes, where hashicorp/raft's own timings must carry samples.
func TestOperatorCLI(t *testing.T) {
	c := StartCluster(t, 3, Options{})
	leader := c.WaitLeader(t, 10*time.Second)
	follower := c.Followers(leader)[0]
	heureka := func(args ...string) Result {
		t.Helper()
		res := RunBinary(t, 30*time.Second, nil, args...)
		if res.TimedOut {
			t.Fatalf("heureka %s timed out", strings.Join(args, " "))
		}
		return res
	}
	ok := func(args ...string) string {
		t.Helper()
		res := heureka(args...)
		if res.ExitCode != 0 {
			t.Fatalf("heureka %s: exit %d\n%s%s", strings.Join(args, " "), res.ExitCode, res.Stdout, res.Stderr)
		}
		return res.Stdout
	}

	// status, human and JSON.
	out := ok("status", "--addr", follower.HTTPAddr)
	for _, want := range []string{"node", follower.ID + " (Follower)", "leader", leader.ID + " at " + leader.HTTPAddr, "quorum yes", "self-preservation"} {
		if !strings.Contains(out, want) {
			t.Errorf("heureka status lacks %q:\n%s", want, out)
		}
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(ok("status", "--json", "--addr", "http://"+leader.HTTPAddr)), &st); err != nil || st["node"] != leader.ID {
		t.Errorf("heureka status --json: %v %v", err, st)
	}

	// members list; remove a node; join it again.
	out = ok("members", "--addr", follower.HTTPAddr)
	for _, nd := range c.Nodes {
		if !strings.Contains(out, nd.ID) || !strings.Contains(out, nd.HTTPAddr) {
			t.Errorf("heureka members lacks %s:\n%s", nd.ID, out)
		}
	}
	if !strings.Contains(out, "leader") {
		t.Errorf("heureka members names no leader:\n%s", out)
	}
	n4 := c.StartNode(t, "n4", leader.HTTPAddr)
	WaitFor(t, 15*time.Second, func() bool { return len(leader.Members(t).Members) == 4 }, "n4 joined")
	if out := ok("members", "remove", "n4", "--addr", follower.HTTPAddr); !strings.Contains(out, "removed n4") {
		t.Errorf("members remove: %q", out)
	}
	var ms Members
	if err := json.Unmarshal([]byte(ok("members", "list", "--json", "--addr", leader.HTTPAddr)), &ms); err != nil || len(ms.Members) != 3 {
		t.Fatalf("members after remove: %v %+v", err, ms)
	}
	out = ok("members", "join", "--id", "n4", "--raft-addr", n4.RaftAddr, "--http-addr", n4.HTTPAddr, "--addr", follower.HTTPAddr)
	if !strings.Contains(out, "joined n4") {
		t.Errorf("members join: %q", out)
	}
	WaitFor(t, 15*time.Second, func() bool {
		st, err := n4.TryStatus()
		return err == nil && st.Leader == leader.ID && len(leader.Members(t).Members) == 4
	}, "n4 back in the cluster and following the leader")
	if res := heureka("members", "remove", "n9", "--addr", leader.HTTPAddr); res.ExitCode != 1 || !strings.Contains(res.Stderr, "404") {
		t.Errorf("members remove n9: exit %d %q, want 1 and the 404", res.ExitCode, res.Stderr)
	}

	// mode: show, switch, show as JSON.
	if out := ok("mode", "--addr", follower.HTTPAddr); strings.TrimSpace(out) != "mode ap" {
		t.Errorf("heureka mode: %q, want mode ap", out)
	}
	if out := ok("mode", "cp", "--addr", follower.HTTPAddr); !strings.Contains(out, "mode set to cp") {
		t.Errorf("heureka mode cp: %q", out)
	}
	WaitFor(t, 10*time.Second, func() bool {
		var m struct{ Mode string }
		return json.Unmarshal([]byte(ok("mode", "--json", "--addr", follower.HTTPAddr)), &m) == nil && m.Mode == "cp"
	}, "mode cp visible on a follower")
	ok("mode", "AP", "--addr", leader.HTTPAddr)

	// Exit codes: bad usage 2, unreachable node 1.
	for _, args := range [][]string{{"mode", "xp"}, {"members", "frob"}, {"snapshot", "save"}, {"status", "--bogus"}, {"members", "join", "--id", "x"},
		{"status", "extra", "--addr", leader.HTTPAddr}, {"snapshot", "save", "", "--addr", leader.HTTPAddr}, {"status", "--addr", "http://[::1"},
		{"members", "remove", "", "--addr", leader.HTTPAddr}} {
		if res := heureka(args...); res.ExitCode != 2 {
			t.Errorf("heureka %s: exit %d, want 2 (usage)\n%s", strings.Join(args, " "), res.ExitCode, res.Stderr)
		}
	}
	dead := FreeAddr(t)
	if res := heureka("status", "--addr", dead, "--timeout", "2s"); res.ExitCode != 1 || res.Stderr == "" {
		t.Errorf("status of a dead address: exit %d %q, want 1 and a reason", res.ExitCode, res.Stderr)
	}

	// /metrics of a real leader and follower: valid text, Raft's own apply
	// and commit timings bridged in with samples.
	for i := range 5 {
		RegisterJSON(t, follower.BaseURL(), "metrics", "m-"+string(rune('a'+i)), nil)
	}
	lf := scrapeNode(t, leader)
	ff := scrapeNode(t, follower)
	checkSeries := func(fams map[string]*dto.MetricFamily, who, name, label, value string, min float64) {
		t.Helper()
		var want map[string]string // "" label: any series
		if label != "" {
			want = map[string]string{label: value}
		}
		v, found := collect.Find(fams, name, want)
		if !found || v < min {
			t.Errorf("%s: %s{%s=%q} = %v (found %v), want at least %v", who, name, label, value, v, found, min)
		}
	}
	checkSeries(lf, "leader", "heureka_raft_state", "state", "Leader", 1)
	checkSeries(ff, "follower", "heureka_raft_state", "state", "Follower", 1)
	checkSeries(lf, "leader", "heureka_raft_commitTime", "", "", 1)
	checkSeries(lf, "leader", "heureka_raft_apply", "", "", 5)
	checkSeries(ff, "follower", "heureka_raft_fsm_apply", "", "", 5)
	checkSeries(ff, "follower", "heureka_raft_rpc_appendEntries", "", "", 1)
	checkSeries(lf, "leader", "heureka_raft_term", "", "", 1)
	checkSeries(ff, "follower", "heureka_raft_applied_index", "", "", 5)
	checkSeries(ff, "follower", "heureka_registry_instances", "", "", 5)
	checkSeries(ff, "follower", "heureka_http_requests_total", "route", "eureka_register", 1)
	checkSeries(ff, "follower", "heureka_cluster_members", "", "", 4)
	checkSeries(ff, "follower", "heureka_lease_status_up", "", "", 1)
	checkSeries(ff, "follower", "heureka_self_preservation_threshold", "", "", 0)
	checkSeries(ff, "follower", "heureka_mode", "mode", "ap", 1)
}

// scrapeNode fetches and parses a node's /metrics.
func scrapeNode(t *testing.T, nd *Node) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := scrape(nd)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// scrape fetches and parses a node's /metrics.
func scrape(nd *Node) (map[string]*dto.MetricFamily, error) {
	resp, err := httpClient.Get(nd.URL("/metrics"))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: GET /metrics: %s", nd.ID, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: /metrics is not valid Prometheus text: %w", nd.ID, err)
	}
	return fams, nil
}
