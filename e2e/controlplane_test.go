package e2e

// The control plane (docs/security.md, "Who may call what"): with a
// cluster secret, a process that does not hold it cannot change the
// cluster, whichever door it knocks on: the operator API's changes and the
// internal endpoints are refused 401 or 403 and nothing changes. The
// operator CLI, given the secret as serve takes it (variable or file),
// makes the same changes.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/e2e/intruder"
)

func TestControlPlaneClosedToOutsiders(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: []string{"--cluster-secret", e2eSecret}})
	leader := c.WaitLeader(t, 15*time.Second)
	f := c.Followers(leader)[0]
	victim := c.Followers(leader)[1]
	if code, b, _ := Do(t, "POST", leader.URL("/eureka/apps/GOOD"), RegisterBody("GOOD", "good-1", nil)); code != 204 {
		t.Fatalf("register: %d %s", code, b)
	}
	code, snap, _ := Do(t, "GET", leader.URL("/v1/snapshot"), nil)
	if code != 200 || len(snap) == 0 {
		t.Fatalf("snapshot download (a read, open without --auth-file): %d", code)
	}
	// The snapshot is old now: it lacks good-2.
	if code, b, _ := Do(t, "POST", leader.URL("/eureka/apps/GOOD"), RegisterBody("GOOD", "good-2", nil)); code != 204 {
		t.Fatalf("register: %d %s", code, b)
	}
	before := leader.Status(t)
	views := map[string]Status{}
	for _, nd := range c.Nodes {
		WaitFor(t, 10*time.Second, func() bool {
			views[nd.ID] = nd.Status(t)
			return views[nd.ID].RegistryVersion == before.RegistryVersion
		}, nd.ID+" to apply good-2")
	}
	attacks, err := intruder.Control(victim.ID, snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range []*Node{leader, f} {
		for _, a := range attacks {
			for _, extra := range [][]string{nil, intruder.WrongSecret} {
				code, b, err := a.Send(nd.Client(), nd.BaseURL(), extra...)
				if want := intruder.RefusedStatus(extra); err != nil || code != want {
					t.Errorf("%s (%s %s) on %s (wrong secret %v): %d %s %v, want %d", a.Name, a.Method, a.Path, nd.ID, extra != nil, code, b, err, want)
				}
			}
		}
	}
	after := leader.Status(t)
	if after.Mode != before.Mode || after.Leader != before.Leader || after.Term != before.Term {
		t.Fatalf("status moved: mode %s→%s, leader %s→%s, term %d→%d", before.Mode, after.Mode, before.Leader, after.Leader, before.Term, after.Term)
	}
	ms := leader.Members(t).Members
	if len(ms) != 3 || Voters(ms) != 3 {
		t.Fatalf("members changed: %+v", ms)
	}
	for _, m := range ms {
		if m.ID == "evil" {
			t.Fatalf("a fake voter was added: %+v", ms)
		}
	}
	for _, nd := range c.Nodes {
		if _, apps, _ := Do(t, "GET", nd.URL("/eureka/apps?consistency=linearizable"), nil); strings.Contains(string(apps), "evil-1") {
			t.Fatalf("%s stored an intruder's registration: %s", nd.ID, apps)
		}
		b, st := views[nd.ID], nd.Status(t)
		if st.Leader != b.Leader || st.Term != b.Term || st.Mode != b.Mode || st.RegistryVersion != b.RegistryVersion || st.Instances != 2 {
			t.Fatalf("%s moved: leader %q→%q, term %d→%d, mode %s→%s, registry version %d→%d, %d instances",
				nd.ID, b.Leader, st.Leader, b.Term, st.Term, b.Mode, st.Mode, b.RegistryVersion, st.RegistryVersion, st.Instances)
		}
	}

	// The CLI without the secret is refused (exit 1) and says why; with it,
	// from the variable or from a file, the change is made.
	res := RunBinary(t, 30*time.Second, nil, "mode", "cp", "--addr", f.HTTPAddr)
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "cluster secret") {
		t.Fatalf("heureka mode cp without the secret: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = RunBinary(t, 30*time.Second, []string{"HEUREKA_CLUSTER_SECRET=" + e2eSecret}, "mode", "cp", "--addr", f.HTTPAddr)
	if res.ExitCode != 0 {
		t.Fatalf("heureka mode cp with $HEUREKA_CLUSTER_SECRET: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte(e2eSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res = RunBinary(t, 30*time.Second, nil, "mode", "ap", "--addr", f.HTTPAddr, "--cluster-secret-file", file)
	if res.ExitCode != 0 {
		t.Fatalf("heureka mode ap --cluster-secret-file: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if st := leader.Status(t); st.Mode != "ap" {
		t.Fatalf("mode after the CLI: %s", st.Mode)
	}
}

// TestControlPlaneSingleNodeLocal: the quick start (`heureka serve`, no
// flags) still takes `heureka mode cp` from this host.
func TestControlPlaneSingleNodeLocal(t *testing.T) {
	c := StartCluster(t, 1, Options{})
	n := c.WaitLeader(t, 15*time.Second)
	res := RunBinary(t, 30*time.Second, nil, "mode", "cp", "--addr", n.HTTPAddr)
	if res.ExitCode != 0 {
		t.Fatalf("heureka mode cp on a default single node: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if st := n.Status(t); st.Mode != "cp" {
		t.Fatalf("mode: %s", st.Mode)
	}
	// The CLI reads the secret only for a change: a missing secret file
	// fails `mode ap`, not `status` (a container's healthcheck).
	env := []string{"HEUREKA_CLUSTER_SECRET_FILE=" + t.TempDir() + "/none"}
	if res := RunBinary(t, 30*time.Second, env, "status", "--addr", n.HTTPAddr); res.ExitCode != 0 {
		t.Fatalf("status with a missing secret file: exit %d\n%s", res.ExitCode, res.Stderr)
	}
	if res := RunBinary(t, 30*time.Second, env, "mode", "ap", "--addr", n.HTTPAddr); res.ExitCode != 1 || !strings.Contains(res.Stderr, "cluster-secret-file") {
		t.Fatalf("mode ap with a missing secret file: exit %d\n%s", res.ExitCode, res.Stderr)
	}
}

// TestClusterBeyondLoopbackNeedsSecret: `heureka serve` for a multi-node
// cluster on all interfaces without a secret exits 2 with the fix; with
// --insecure-cluster it starts.
func TestClusterBeyondLoopbackNeedsSecret(t *testing.T) {
	raft, http := FreeAddr(t), FreeAddr(t)
	_, raftPort, _ := strings.Cut(raft, ":")
	_, httpPort, _ := strings.Cut(http, ":")
	args := []string{"serve", "--node-id", "n1", "--data-dir", t.TempDir(),
		"--http-addr", "0.0.0.0:" + httpPort, "--raft-addr", "0.0.0.0:" + raftPort,
		"--initial-cluster", "n1=127.0.0.1:" + raftPort + "@127.0.0.1:" + httpPort + ",n2=127.0.0.1:3@127.0.0.1:4"}
	res := RunBinary(t, 20*time.Second, nil, args...)
	if res.ExitCode != 2 || !strings.Contains(res.Stderr, "--cluster-secret-file") || !strings.Contains(res.Stderr, "--insecure-cluster") {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	t.Logf("refused: %s", strings.TrimSpace(res.Stderr))
	// With --insecure-cluster it runs (until the timeout stops it).
	res = RunBinary(t, 2*time.Second, nil, append(args, "--insecure-cluster")...)
	if !res.TimedOut {
		t.Fatalf("with --insecure-cluster: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}

	// A member of a cluster restarted from its data directory, without
	// cluster flags, on all interfaces: its stored configuration counts.
	c := StartCluster(t, 3, Options{})
	c.WaitLeader(t, 15*time.Second)
	nd := c.Nodes[2]
	nd.Stop()
	_, port, _ := strings.Cut(nd.HTTPAddr, ":")
	res = RunBinary(t, 20*time.Second, nil, "serve", "--node-id", nd.ID, "--data-dir", nd.DataDir,
		"--http-addr", "0.0.0.0:"+port, "--raft-addr", nd.RaftAddr, "--http-advertise", nd.HTTPAddr)
	if res.ExitCode != 2 || !strings.Contains(res.Stderr, "3-member cluster") || !strings.Contains(res.Stderr, "--cluster-secret-file") {
		t.Fatalf("restart on all interfaces: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	t.Logf("refused: %s", strings.TrimSpace(res.Stderr))
	// The same member restarted with basic auth and no secret: its peers'
	// calls would be refused, as for a new node given --auth-file.
	res = RunBinary(t, 20*time.Second, nil, "serve", "--node-id", nd.ID, "--data-dir", nd.DataDir,
		"--http-addr", nd.HTTPAddr, "--raft-addr", nd.RaftAddr, "--auth-file", auFile(t))
	if res.ExitCode != 2 || !strings.Contains(res.Stderr, "3-member cluster") || !strings.Contains(res.Stderr, "--cluster-secret") {
		t.Fatalf("restart with --auth-file and no secret: exit %d (timed out %v), stderr %q", res.ExitCode, res.TimedOut, res.Stderr)
	}
	t.Logf("refused: %s", strings.TrimSpace(res.Stderr))
}
