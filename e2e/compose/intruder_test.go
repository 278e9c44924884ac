package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/e2e"
	"github.com/heureka-registry/heureka/e2e/intruder"
)

// intruder: the README's compose cluster, started by `up -d` alone (its
// secret made by the one-shot cluster-secret service), and a container that
// is not a member: the project's image, on the compose network, running
// the intruder command (e2e/compose/intruder). It sends every attack of
// intruder.Control to every node, without a secret and with a wrong one
// (remove a member, add a voter, mode cp, restore an old snapshot, the
// internal join, remove, membership and restore calls, and registrations
// named EVIL/../X and EVIL\x01CTRL through the internal apply), and a Raft
// AppendEntries with a term 100 higher to every node's Raft port. Every one
// is refused (401, 403, the Raft connection closed without an answer),
// each node logs the refusals, and nothing changed on any node: cluster
// identity, leader, term, mode, members, registry version and content.
func TestComposeIntruder(t *testing.T) {
	p := newProject(t, "heurekaintruder", 21831)
	p.up()
	for i := 1; i <= 5; i++ {
		if err := register(client, p.url("heureka1"), "GOOD", fmt.Sprintf("good-%d", i), 3600); err != nil {
			t.Fatal(err)
		}
	}
	// The old snapshot (GET /v1/snapshot is a read, open without
	// --auth-file): five instances, where the cluster will hold ten.
	code, snap, _, err := do(client, "GET", p.url("heureka1")+"/v1/snapshot", nil)
	if err != nil || code != 200 || len(snap) == 0 {
		t.Fatalf("GET /v1/snapshot: %d %v (%d bytes)", code, err, len(snap))
	}
	for i := 6; i <= 10; i++ {
		if err := register(client, p.url("heureka1"), "GOOD", fmt.Sprintf("good-%d", i), 3600); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := 1; i <= 10; i++ {
		want = append(want, fmt.Sprintf("GOOD/good-%d", i))
	}
	slices.Sort(want)
	before := map[string]nodeView{}
	for _, svc := range defaultServices {
		e2e.WaitFor(t, 30*time.Second, func() bool {
			v, err := p.view(svc)
			before[svc] = v
			return err == nil && slices.Equal(v.Registry, want)
		}, svc+" to hold the ten instances")
	}

	dir := buildIntruder(t, snap)
	var nodes, rafts []string
	for _, svc := range defaultServices {
		nodes, rafts = append(nodes, svc+":8761"), append(rafts, svc+":8762")
	}
	name := p.name + "-intruder"
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", name).Run() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--name", name, "--network", p.network(),
		"-v", dir+":/intruder:ro", "--entrypoint", "/intruder/intruder", image,
		"--http", strings.Join(nodes, ","), "--raft", strings.Join(rafts, ","), "--victim", "n3", "--snapshot", "/intruder/old.snap")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	attacks, err := intruder.Control("n3", nil)
	if err != nil {
		t.Fatal(err)
	}
	var results []intruder.Result
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r intruder.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("intruder output %q: %v (exit: %v)\n%s", line, err, runErr, stderr.String())
		}
		results = append(results, r)
		if !r.Refused {
			t.Errorf("not refused: %s, secret %s, on %s: %d %s", r.Attack, r.Secret, r.Node, r.Code, r.Detail)
		}
	}
	if wantN := len(defaultServices) * (2*len(attacks) + 1); len(results) != wantN || runErr != nil {
		t.Fatalf("intruder: %d results, want %d; exit: %v\n%s", len(results), wantN, runErr, stderr.String())
	}
	for _, r := range results {
		if r.Attack == "raft append entries" {
			t.Logf("%s on %s: refused: %s", r.Attack, r.Node, r.Detail)
		}
	}
	t.Logf("%d attempts from a container on %s, every one refused", len(results), p.network())

	// Each node logged the refused Raft connection and calls, with the
	// intruder's address.
	for _, svc := range defaultServices {
		e2e.WaitFor(t, 15*time.Second, func() bool {
			logs, err := p.compose(time.Minute, "logs", "--no-color", svc)
			return err == nil && strings.Contains(logs, "raft connection refused") &&
				strings.Contains(logs, "claimed_node=intruder") && strings.Contains(logs, "cluster call refused")
		}, svc+" to log the refusals")
	}

	// Nothing changed, on any node.
	for _, svc := range defaultServices {
		after, err := p.view(svc)
		if err != nil {
			t.Fatalf("%s after the attacks: %v", svc, err)
		}
		if b := before[svc]; !after.equal(b) {
			t.Errorf("%s changed:\nbefore %+v\nafter  %+v", svc, b, after)
		}
	}
}

// nodeView is what an intruder must not change on a node.
type nodeView struct {
	ClusterID, Leader, Mode string
	Term, RegistryVersion   uint64
	Instances               int
	Members                 []string // id and suffrage
	Registry                []string // APP/id, a linearizable read
}

func (v nodeView) equal(o nodeView) bool {
	return v.ClusterID == o.ClusterID && v.Leader == o.Leader && v.Mode == o.Mode && v.Term == o.Term &&
		v.RegistryVersion == o.RegistryVersion && v.Instances == o.Instances &&
		slices.Equal(v.Members, o.Members) && slices.Equal(v.Registry, o.Registry)
}

// view reads svc's nodeView through its published port.
func (p *project) view(svc string) (nodeView, error) {
	st, err := p.status(svc)
	if err != nil {
		return nodeView{}, err
	}
	v := nodeView{ClusterID: st.ClusterID, Leader: st.Leader, Mode: st.Mode, Term: st.Term,
		RegistryVersion: st.RegistryVersion, Instances: st.Instances}
	members, err := p.members(svc)
	if err != nil {
		return v, err
	}
	for _, m := range members {
		v.Members = append(v.Members, fmt.Sprintf("%s voter=%v", m.ID, m.Voter))
	}
	slices.Sort(v.Members)
	code, body, _, err := do(client, "GET", p.url(svc)+"/eureka/apps?consistency=linearizable", nil)
	if err != nil || code != 200 {
		return v, fmt.Errorf("linearizable read on %s: %d %v", svc, code, err)
	}
	apps, err := e2e.ParseApps(body)
	if err != nil {
		return v, err
	}
	for k := range apps.ByKey() {
		v.Registry = append(v.Registry, k)
	}
	slices.Sort(v.Registry)
	return v, nil
}

// buildIntruder builds the intruder command (static, for the image's empty
// base) into a new directory that also holds snap as old.snap, readable by
// the image's user; the container mounts the directory.
func buildIntruder(t *testing.T, snap []byte) string {
	t.Helper()
	dir := t.TempDir()
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-o", filepath.Join(dir, "intruder"), "./e2e/compose/intruder")
	build.Dir = repoPath("")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the intruder: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.snap"), snap, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
