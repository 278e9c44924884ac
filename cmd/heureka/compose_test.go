package main

import (
	"net"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/e2e"
)

// The compose file and the Dockerfile are checked here, against the real
// flag parser, because no Docker engine runs where the tests do.

const composeFile = "../../docker-compose.yml"

func loadCompose(t *testing.T, profiles ...string) *types.Project {
	return e2e.LoadCompose(t, composeFile, profiles...)
}

func dockerfileEnv(t *testing.T) map[string]string { return e2e.DockerfileEnv(t, "../../Dockerfile") }

// node is a compose service as heureka sees it.
type composeNode struct {
	service  string
	cfg      *serveConfig
	httpPort string // container port the HTTP API listens on
	raftPort string
	dataDir  string
	profiles []string
	svc      types.ServiceConfig
}

// secretService is the one-shot service that writes the cluster secret.
const secretService = "cluster-secret"

// composeSecret checks the secret service (`heureka secret init FILE` on
// its own volume, run once) and returns the file as the nodes see it, its
// volume, and a local file holding a secret made by the same code, which
// stands in for it when the nodes' settings are parsed here.
func composeSecret(t *testing.T, p *types.Project) (path, volume, local string) {
	t.Helper()
	svc, ok := p.Services[secretService]
	if !ok {
		t.Fatalf("no %s service", secretService)
	}
	cmd := []string(svc.Command)
	if len(cmd) < 3 || cmd[0] != "secret" || cmd[1] != "init" {
		t.Fatalf("%s: command %q, want secret init [--owner UID:GID] FILE", secretService, cmd)
	}
	file := cmd[len(cmd)-1]
	// The nodes run as the image's user: a file written by root must be
	// given to it.
	if svc.User == "0:0" || svc.User == "root" || svc.User == "0" {
		if owner := flagValue(cmd, "--owner"); owner != "10001:10001" {
			t.Errorf("%s runs as root but gives the file to %q, not the image's user 10001:10001", secretService, owner)
		}
	}
	if svc.Restart != "no" {
		t.Errorf("%s: restart %q; a one-shot service must not restart", secretService, svc.Restart)
	}
	if len(svc.Volumes) != 1 || svc.Volumes[0].Type != types.VolumeTypeVolume || svc.Volumes[0].ReadOnly ||
		!strings.HasPrefix(file, svc.Volumes[0].Target+"/") {
		t.Fatalf("%s: volumes %+v: want one writable named volume holding %s", secretService, svc.Volumes, file)
	}
	local = t.TempDir() + "/cluster-secret"
	if created, err := initSecretFile(local); err != nil || !created {
		t.Fatalf("secret init: %v", err)
	}
	// Once written, the file is kept (a restart of the service keeps the
	// nodes' secret).
	before, _ := os.ReadFile(local)
	if created, err := initSecretFile(local); err != nil || created {
		t.Fatalf("secret init again: created %v, %v", created, err)
	}
	if after, _ := os.ReadFile(local); string(after) != string(before) {
		t.Fatal("secret init replaced an existing secret")
	}
	return file, svc.Volumes[0].Source, local
}

// composeNodes parses every node service of p with parseServe, as the
// container would run it: the image's environment overlaid by the
// service's, and the command after the image's entrypoint. Every node must
// read the cluster secret from the secret service's volume, read-only, and
// wait until that service completed.
func composeNodes(t *testing.T, p *types.Project) map[string]*composeNode {
	t.Helper()
	imageEnv := dockerfileEnv(t)
	secretPath, secretVolume, localSecret := composeSecret(t, p)
	out := map[string]*composeNode{}
	for name, svc := range p.Services {
		if name == secretService {
			continue
		}
		env := map[string]string{}
		for k, v := range imageEnv {
			env[k] = v
		}
		for k, v := range svc.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		if env["HEUREKA_CLUSTER_SECRET_FILE"] != secretPath {
			t.Errorf("%s: HEUREKA_CLUSTER_SECRET_FILE %q, want %s", name, env["HEUREKA_CLUSTER_SECRET_FILE"], secretPath)
		}
		env["HEUREKA_CLUSTER_SECRET_FILE"] = localSecret
		mounted := slices.ContainsFunc(svc.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Source == secretVolume && v.ReadOnly && strings.HasPrefix(secretPath, v.Target+"/")
		})
		if !mounted {
			t.Errorf("%s: volume %s is not mounted read-only where %s is", name, secretVolume, secretPath)
		}
		if dep, ok := svc.DependsOn[secretService]; !ok || dep.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s: should wait for %s to complete, has %+v", name, secretService, svc.DependsOn)
		}
		cmd := []string(svc.Command)
		if len(cmd) == 0 || cmd[0] != "serve" {
			t.Fatalf("%s: command %q: want serve [flags]", name, cmd)
		}
		cfg, _, err := parseServe(cmd[1:], func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("%s: heureka serve %s with %v: %v", name, strings.Join(cmd[1:], " "), env, err)
		}
		_, httpPort, _ := net.SplitHostPort(cfg.httpAddr)
		_, raftPort, _ := net.SplitHostPort(cfg.raftAddr)
		out[name] = &composeNode{service: name, cfg: cfg, httpPort: httpPort, raftPort: raftPort,
			dataDir: cfg.dataDir, profiles: svc.Profiles, svc: svc}
	}
	return out
}

func TestComposeDefaultClusterParses(t *testing.T) {
	p := loadCompose(t)
	nodes := composeNodes(t, p)
	names := sortedKeys(nodes)
	if want := []string{"heureka1", "heureka2", "heureka3"}; !slices.Equal(names, want) {
		t.Fatalf("default services %v, want %v", names, want)
	}
	checkTopology(t, p, nodes)
	// Each default node bootstraps from the same list, which names exactly
	// the default nodes, at their service names and listen ports.
	var initial string
	for _, name := range names {
		nd := nodes[name]
		if nd.cfg.join != "" {
			t.Errorf("%s: a default node must bootstrap, not join", name)
		}
		if initial == "" {
			initial = nd.cfg.initialCluster
		} else if nd.cfg.initialCluster != initial {
			t.Errorf("%s: initial cluster %q differs from %q", name, nd.cfg.initialCluster, initial)
		}
	}
	members, err := cluster.ParseInitialCluster(initial)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != len(names) {
		t.Fatalf("initial cluster lists %d members, compose starts %d nodes", len(members), len(names))
	}
	for _, m := range members {
		nd := nodeByID(nodes, m.ID)
		if nd == nil {
			t.Errorf("initial cluster member %s is no service", m.ID)
			continue
		}
		if want := nd.service + ":" + nd.raftPort; m.RaftAddr != want {
			t.Errorf("member %s: raft address %s, want %s (service %s listens on %s)", m.ID, m.RaftAddr, want, nd.service, nd.cfg.raftAddr)
		}
		if want := nd.service + ":" + nd.httpPort; m.HTTPAddr != want {
			t.Errorf("member %s: http address %s, want %s", m.ID, m.HTTPAddr, want)
		}
	}
	// The derived cluster config advertises what the others dial.
	for _, name := range names {
		checkAdvertises(t, name, nodes[name])
	}
	// Host ports 8761-8763, one per node, on loopback only.
	var hostPorts []string
	for _, name := range names {
		port := nodes[name].svc.Ports[0]
		hostPorts = append(hostPorts, port.Published)
		if port.HostIP != "127.0.0.1" {
			t.Errorf("%s: port published on %q, want 127.0.0.1 only", name, port.HostIP)
		}
	}
	if want := []string{"8761", "8762", "8763"}; !slices.Equal(hostPorts, want) {
		t.Errorf("host ports %v, want %v", hostPorts, want)
	}
}

func TestComposeFiveProfileJoins(t *testing.T) {
	def := composeNodes(t, loadCompose(t))
	p := loadCompose(t, "five")
	nodes := composeNodes(t, p)
	names := sortedKeys(nodes)
	if want := []string{"heureka1", "heureka2", "heureka3", "heureka4", "heureka5"}; !slices.Equal(names, want) {
		t.Fatalf("services with the five profile %v, want %v", names, want)
	}
	checkTopology(t, p, nodes)
	for _, name := range names {
		nd := nodes[name]
		if def[name] != nil {
			if len(nd.profiles) != 0 {
				t.Errorf("%s: default node has profiles %v", name, nd.profiles)
			}
			continue
		}
		if !slices.Equal(nd.profiles, []string{"five"}) {
			t.Errorf("%s: profiles %v, want [five]", name, nd.profiles)
		}
		if nd.cfg.initialCluster != "" {
			t.Errorf("%s: a joining node must not have an initial cluster", name)
		}
		host, port, err := net.SplitHostPort(nd.cfg.join)
		if err != nil {
			t.Fatalf("%s: join %q: %v", name, nd.cfg.join, err)
		}
		target := def[host]
		if target == nil {
			t.Errorf("%s: joins %s, which is not a default node", name, host)
			continue
		}
		if port != target.httpPort {
			t.Errorf("%s: joins %s on port %s; its HTTP API listens on %s", name, host, port, target.httpPort)
		}
		dep, ok := nd.svc.DependsOn[host]
		if !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: should depend on %s being healthy, has %+v", name, host, nd.svc.DependsOn)
		}
		checkAdvertises(t, name, nd)
	}
}

// checkAdvertises checks that the cluster config derived from a service's
// command advertises the addresses the other services dial.
func checkAdvertises(t *testing.T, name string, nd *composeNode) {
	t.Helper()
	cc, err := nd.cfg.clusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	if want := name + ":" + nd.httpPort; cc.HTTPAdvertise != want {
		t.Errorf("%s: advertises http %s, want %s", name, cc.HTTPAdvertise, want)
	}
	if want := name + ":" + nd.raftPort; cc.RaftAdvertise != want {
		t.Errorf("%s: advertises raft %s, want %s", name, cc.RaftAdvertise, want)
	}
}

// checkTopology checks what must hold with any set of profiles: distinct
// node ids, one named volume per node at its data dir, distinct host ports
// that reach the HTTP API, a healthcheck that asks the node itself, one
// image for all.
func checkTopology(t *testing.T, p *types.Project, nodes map[string]*composeNode) {
	t.Helper()
	ids, volumes, hostPorts := map[string]string{}, map[string]string{}, map[string]string{}
	image := ""
	for _, name := range sortedKeys(nodes) {
		nd := nodes[name]
		if other, dup := ids[nd.cfg.nodeID]; dup {
			t.Errorf("%s and %s share node id %s", name, other, nd.cfg.nodeID)
		}
		ids[nd.cfg.nodeID] = name
		if nd.cfg.nodeID == "" {
			t.Errorf("%s: no node id", name)
		}
		if nd.svc.Hostname != "" && nd.svc.Hostname != name {
			t.Errorf("%s: hostname %s differs from the service name its peers use", name, nd.svc.Hostname)
		}
		if image == "" {
			image = nd.svc.Image
		} else if nd.svc.Image != image {
			t.Errorf("%s: image %s, others %s", name, nd.svc.Image, image)
		}

		if len(nd.svc.Volumes) != 2 {
			t.Fatalf("%s: %d volumes, want two (data, cluster secret)", name, len(nd.svc.Volumes))
		}
		v := nd.svc.Volumes[0]
		if v.Target != nd.dataDir {
			v = nd.svc.Volumes[1]
		}
		if v.Type != types.VolumeTypeVolume || v.Target != nd.dataDir {
			t.Errorf("%s: volume %s:%s (%s), want a named volume at the data dir %s", name, v.Source, v.Target, v.Type, nd.dataDir)
		}
		if other, dup := volumes[v.Source]; dup {
			t.Errorf("%s and %s share volume %s", name, other, v.Source)
		}
		volumes[v.Source] = name
		if _, ok := p.Volumes[v.Source]; !ok {
			t.Errorf("%s: volume %s is not declared", name, v.Source)
		}

		if len(nd.svc.Ports) != 1 {
			t.Fatalf("%s: %d published ports, want one (HTTP)", name, len(nd.svc.Ports))
		}
		pt := nd.svc.Ports[0]
		if strconv.Itoa(int(pt.Target)) != nd.httpPort {
			t.Errorf("%s: publishes container port %d, the HTTP API listens on %s", name, pt.Target, nd.httpPort)
		}
		if other, dup := hostPorts[pt.Published]; dup {
			t.Errorf("%s and %s both publish host port %s", name, other, pt.Published)
		}
		hostPorts[pt.Published] = name
		if host, _, _ := net.SplitHostPort(nd.cfg.httpAddr); host != "0.0.0.0" {
			t.Errorf("%s: HTTP listens on %s; a published port needs 0.0.0.0", name, nd.cfg.httpAddr)
		}

		hc := nd.svc.HealthCheck
		if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" || hc.Test[1] != "heureka" {
			t.Fatalf("%s: healthcheck %+v, want CMD heureka status ...", name, hc)
		}
		addr := flagValue(hc.Test[2:], "--addr")
		if hc.Test[2] != "status" || addr != "127.0.0.1:"+nd.httpPort {
			t.Errorf("%s: healthcheck %v should run heureka status --addr 127.0.0.1:%s", name, hc.Test, nd.httpPort)
		}
	}
	for _, v := range p.Services[secretService].Volumes {
		volumes[v.Source] = secretService
	}
	for name := range p.Volumes {
		if _, used := volumes[name]; !used && len(nodes) == 5 {
			t.Errorf("volume %s is declared but unused", name)
		}
	}
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^FROM .* AS build`),
		regexp.MustCompile(`CGO_ENABLED=0`),
		regexp.MustCompile(`(?m)^USER [1-9][0-9]*`),
		regexp.MustCompile(`(?m)^VOLUME \["/data"\]`),
		regexp.MustCompile(`(?m)^EXPOSE 8761 8762`),
		regexp.MustCompile(`(?m)^HEALTHCHECK .*\n?.*CMD \["heureka", "status"`),
		regexp.MustCompile(`(?m)^ENTRYPOINT \["heureka"\]`),
	} {
		if !want.MatchString(s) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
	// The image's own defaults make a working single node.
	env := dockerfileEnv(t)
	if _, _, err := parseServe(nil, func(k string) string { return env[k] }); err != nil {
		t.Errorf("heureka serve with the image's environment %v: %v", env, err)
	}
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func nodeByID(nodes map[string]*composeNode, id string) *composeNode {
	for _, nd := range nodes {
		if nd.cfg.nodeID == id {
			return nd
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
