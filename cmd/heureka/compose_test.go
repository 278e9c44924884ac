package main

import (
	"context"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
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

// loadComposeEnv loads the compose file as compose does where env is set
// (the variables its ${...} read).
func loadComposeEnv(t *testing.T, env []string, profiles ...string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{composeFile}, cli.WithName("heureka"), cli.WithEnv(env), cli.WithProfiles(profiles))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load %s with %v and profiles %v: %v", composeFile, env, profiles, err)
	}
	return p
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
	secret   string // the one-shot service that writes its cluster secret
}

// secretService is the one-shot service that writes the default cluster's
// secret; every service that runs `heureka secret` is such a service, one
// per cluster.
const secretService = "cluster-secret"

// clusterSecret is a one-shot service that writes a cluster secret: the
// file as the nodes see it, its volume, and a local file holding a secret
// made by the same code, which stands in for it when the nodes' settings
// are parsed here.
type clusterSecret struct {
	path, volume, local string
}

// composeSecrets checks every secret service of p and returns them by name.
func composeSecrets(t *testing.T, p *types.Project) map[string]clusterSecret {
	t.Helper()
	if _, ok := p.Services[secretService]; !ok {
		t.Fatalf("no %s service", secretService)
	}
	out := map[string]clusterSecret{}
	for name, svc := range p.Services {
		if cmd := []string(svc.Command); len(cmd) > 0 && cmd[0] == "secret" {
			out[name] = composeSecret(t, name, svc)
		}
	}
	return out
}

// composeSecret checks a secret service: `heureka secret init FILE` on its
// own volume, run once.
func composeSecret(t *testing.T, name string, svc types.ServiceConfig) clusterSecret {
	t.Helper()
	cmd := []string(svc.Command)
	if len(cmd) < 3 || cmd[0] != "secret" || cmd[1] != "init" {
		t.Fatalf("%s: command %q, want secret init [--owner UID:GID] FILE", name, cmd)
	}
	file := cmd[len(cmd)-1]
	// The nodes run as the image's user: a file written by root must be
	// given to it.
	if svc.User == "0:0" || svc.User == "root" || svc.User == "0" {
		if owner := flagValue(cmd, "--owner"); owner != "10001:10001" {
			t.Errorf("%s runs as root but gives the file to %q, not the image's user 10001:10001", name, owner)
		}
	}
	if svc.Restart != "no" {
		t.Errorf("%s: restart %q; a one-shot service must not restart", name, svc.Restart)
	}
	if len(svc.Volumes) != 1 || svc.Volumes[0].Type != types.VolumeTypeVolume || svc.Volumes[0].ReadOnly ||
		!strings.HasPrefix(file, svc.Volumes[0].Target+"/") {
		t.Fatalf("%s: volumes %+v: want one writable named volume holding %s", name, svc.Volumes, file)
	}
	local := t.TempDir() + "/cluster-secret"
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
	return clusterSecret{path: file, volume: svc.Volumes[0].Source, local: local}
}

// composeNodes parses every node service of p with parseServe, as the
// container would run it: the image's environment overlaid by the
// service's, and the command after the image's entrypoint. Every node must
// wait until one secret service completed and read the cluster secret from
// that service's volume, read-only.
func composeNodes(t *testing.T, p *types.Project) map[string]*composeNode {
	t.Helper()
	imageEnv := dockerfileEnv(t)
	secrets := composeSecrets(t, p)
	out := map[string]*composeNode{}
	for name, svc := range p.Services {
		if _, ok := secrets[name]; ok {
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
		var waits []string
		for dep := range svc.DependsOn {
			if _, ok := secrets[dep]; ok {
				waits = append(waits, dep)
			}
		}
		if len(waits) != 1 || svc.DependsOn[waits[0]].Condition != types.ServiceConditionCompletedSuccessfully {
			t.Fatalf("%s: should wait for one secret service (%v) to complete, has %+v", name, sortedKeys(secrets), svc.DependsOn)
		}
		sec := secrets[waits[0]]
		if env["HEUREKA_CLUSTER_SECRET_FILE"] != sec.path {
			t.Errorf("%s: HEUREKA_CLUSTER_SECRET_FILE %q, want %s", name, env["HEUREKA_CLUSTER_SECRET_FILE"], sec.path)
		}
		env["HEUREKA_CLUSTER_SECRET_FILE"] = sec.local
		mounted := slices.ContainsFunc(svc.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Source == sec.volume && v.ReadOnly && strings.HasPrefix(sec.path, v.Target+"/")
		})
		if !mounted {
			t.Errorf("%s: volume %s is not mounted read-only where %s is", name, sec.volume, sec.path)
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
			dataDir: cfg.dataDir, profiles: svc.Profiles, svc: svc, secret: waits[0]}
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
	// One cluster: every default node bootstraps from the same list, which
	// names exactly the default nodes (checkTopology).
	if clusters := checkTopology(t, p, nodes); !slices.EqualFunc(clusters, [][]string{names}, slices.Equal) {
		t.Fatalf("clusters %v, want one of %v", clusters, names)
	}
	for _, name := range names {
		if nodes[name].cfg.join != "" {
			t.Errorf("%s: a default node must bootstrap, not join", name)
		}
	}
	// Host ports 8761-8763, one per node.
	if hostPorts := publishedPorts(nodes, names); !slices.Equal(hostPorts, []string{"8761", "8762", "8763"}) {
		t.Errorf("host ports %v, want [8761 8762 8763]", hostPorts)
	}
	// HEUREKA_REMOTE_REGIONS is passed on empty where compose runs without
	// it, and empty is no remote region: a plain `docker compose up` runs a
	// cluster of one region.
	for _, name := range names {
		if v, ok := nodes[name].svc.Environment["HEUREKA_REMOTE_REGIONS"]; !ok || v == nil || *v != "" {
			t.Errorf("%s: HEUREKA_REMOTE_REGIONS set %v to %q, want it passed on, empty", name, ok, derefOr(v, "(no value)"))
		}
		if r := nodes[name].cfg.regions.parsed; len(r) != 0 {
			t.Errorf("%s: copies remote regions %v without HEUREKA_REMOTE_REGIONS", name, r)
		}
	}
}

// publishedPorts lists the host ports of names, in order.
func publishedPorts(nodes map[string]*composeNode, names []string) []string {
	var out []string
	for _, name := range names {
		out = append(out, nodes[name].svc.Ports[0].Published)
	}
	return out
}

func TestComposeFiveProfileJoins(t *testing.T) {
	def := composeNodes(t, loadCompose(t))
	p := loadCompose(t, "five")
	nodes := composeNodes(t, p)
	names := sortedKeys(nodes)
	if want := []string{"heureka1", "heureka2", "heureka3", "heureka4", "heureka5"}; !slices.Equal(names, want) {
		t.Fatalf("services with the five profile %v, want %v", names, want)
	}
	if clusters := checkTopology(t, p, nodes); len(clusters) != 1 {
		t.Fatalf("clusters %v, want one", clusters)
	}
	for _, name := range names {
		nd := nodes[name]
		if def[name] != nil {
			if len(nd.profiles) != 0 {
				t.Errorf("%s: default node has profiles %v", name, nd.profiles)
			}
			continue
		}
		if !slices.Equal(nd.profiles, []string{"five", "zones"}) {
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
	}
}

// The regions profile (docs/regions.md, "Two regions with compose"): a
// second cluster, west, that the default nodes copy when
// HEUREKA_REMOTE_REGIONS names it, as the docs and the file's header give it.
func TestComposeRegionsProfile(t *testing.T) {
	regions := docRemoteRegions(t)
	env := []string{"HEUREKA_REMOTE_REGIONS=" + regions}
	p := loadComposeEnv(t, env, "regions")
	nodes := composeNodes(t, p)
	names := sortedKeys(nodes)
	east, west := []string{"heureka1", "heureka2", "heureka3"}, []string{"west1", "west2", "west3"}
	if want := append(slices.Clone(east), west...); !slices.Equal(names, want) {
		t.Fatalf("services with the regions profile %v, want %v", names, want)
	}
	// Two clusters, each from its own list, with its own secret.
	if clusters := checkTopology(t, p, nodes); !slices.EqualFunc(clusters, [][]string{east, west}, slices.Equal) {
		t.Fatalf("clusters %v, want %v and %v", clusters, east, west)
	}
	if nodes["west1"].cfg.initialCluster == nodes["heureka1"].cfg.initialCluster {
		t.Errorf("west bootstraps from east's list")
	}
	for _, name := range west {
		if nd := nodes[name]; !slices.Equal(nd.profiles, []string{"regions"}) || nd.secret == secretService {
			t.Errorf("%s: profiles %v, secret of %s; want [regions] and a secret of its own", name, nd.profiles, nd.secret)
		}
	}
	if sec := p.Services[nodes["west1"].secret]; !slices.Equal(sec.Profiles, []string{"regions"}) {
		t.Errorf("%s: profiles %v, want [regions]", sec.Name, sec.Profiles)
	}
	if ports := publishedPorts(nodes, west); !slices.Equal(ports, []string{"18761", "18762", "18763"}) {
		t.Errorf("west host ports %v, want [18761 18762 18763]", ports)
	}
	// East copies west, by the URLs of its nodes on the compose network;
	// west copies nobody.
	for _, name := range east {
		checkCopiesWest(t, name, nodes, west)
	}
	for _, name := range west {
		if r := nodes[name].cfg.regions.parsed; len(r) != 0 {
			t.Errorf("%s: copies %v; a region must not copy itself", name, r)
		}
	}
	// The docs' commands reach published ports of this project.
	for _, m := range regexp.MustCompile(`127\.0\.0\.1:([0-9]+)`).FindAllStringSubmatch(composeDocSection(t), -1) {
		if !slices.ContainsFunc(names, func(n string) bool { return nodes[n].svc.Ports[0].Published == m[1] }) {
			t.Errorf("docs/regions.md names %s, which no service publishes", m[0])
		}
	}

	// Without the variable the same profile runs two clusters that copy nothing.
	for name, nd := range composeNodes(t, loadComposeEnv(t, nil, "regions")) {
		if r := nd.cfg.regions.parsed; len(r) != 0 {
			t.Errorf("%s: copies %v without HEUREKA_REMOTE_REGIONS", name, r)
		}
	}
	// With the five profile too, n4 and n5 copy west as n1-n3 do, and
	// every declared volume is used.
	all := loadComposeEnv(t, env, "five", "regions")
	allNodes := composeNodes(t, all)
	if clusters := checkTopology(t, all, allNodes); len(clusters) != 2 || len(clusters[0]) != 5 {
		t.Fatalf("clusters %v, want east with five nodes and west", clusters)
	}
	for _, name := range []string{"heureka4", "heureka5"} {
		checkCopiesWest(t, name, allNodes, west)
	}
}

// zoneLabel is the container label that names a node's zone in region
// east (docs/regions.md, "Zones inside a region").
const zoneLabel = "heureka.zone"

// The zone layout (docs/regions.md, "The compose file's zones"): the east
// nodes carry their zone as a label, west's none; the docs' Spring client
// properties list the zones in order, and under each exactly the host
// ports of the default nodes labelled with it.
func TestComposeZones(t *testing.T) {
	want := map[string]string{"heureka1": "zone-a", "heureka2": "zone-a", "heureka3": "zone-b", "heureka4": "zone-a", "heureka5": "zone-b"}
	for name, nd := range composeNodes(t, loadComposeEnv(t, nil, "five", "regions")) {
		got, ok := nd.svc.Labels[zoneLabel]
		if w, east := want[name]; east && got != w {
			t.Errorf("%s: label %s=%q, want %q", name, zoneLabel, got, w)
		} else if !east && ok {
			t.Errorf("%s: label %s=%q; only region east's nodes have zones", name, zoneLabel, got)
		}
	}

	// The zones profile: five nodes, zone-a a majority, so that zone-b
	// down leaves a quorum.
	perZone := map[string]int{}
	zoned := composeNodes(t, loadCompose(t, "zones"))
	for _, nd := range zoned {
		perZone[nd.svc.Labels[zoneLabel]]++
	}
	if len(zoned) != 5 || 2*perZone["zone-a"] <= len(zoned) || perZone["zone-b"] == 0 {
		t.Errorf("zones profile: %d nodes, by zone %v: want five with zone-a a majority", len(zoned), perZone)
	}

	// The default nodes' host ports, by zone.
	nodes := composeNodes(t, loadCompose(t))
	ports := map[string][]string{}
	for _, name := range sortedKeys(nodes) {
		nd := nodes[name]
		zone := nd.svc.Labels[zoneLabel]
		ports[zone] = append(ports[zone], nd.svc.Ports[0].Published)
	}
	if !slices.Equal(sortedKeys(ports), []string{"zone-a", "zone-b"}) {
		t.Fatalf("default nodes' zones %v, want zone-a and zone-b", sortedKeys(ports))
	}
	sec := regionsDocSection(t, "### The compose file's zones")
	zones := regexp.MustCompile(`(?m)^eureka\.client\.availability-zones\.east=(\S+)$`).FindAllStringSubmatch(sec, -1)
	if len(zones) != 1 || zones[0][1] != "zone-a,zone-b" {
		t.Errorf("docs: availability-zones.east lines %q, want one listing zone-a,zone-b", zones)
	}
	urls := regexp.MustCompile(`(?m)^eureka\.client\.service-url\.([a-z0-9-]+)=(\S+)$`).FindAllStringSubmatch(sec, -1)
	seen := map[string]bool{}
	for _, m := range urls {
		zone := m[1]
		if seen[zone] {
			t.Errorf("docs: service-url.%s given twice", zone)
		}
		seen[zone] = true
		var got []string
		for _, raw := range strings.Split(m[2], ",") {
			u, err := url.Parse(raw)
			if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Path != "/eureka/" {
				t.Errorf("docs: service-url.%s URL %q, want http://127.0.0.1:PORT/eureka/", zone, raw)
				continue
			}
			got = append(got, u.Port())
		}
		if !slices.Equal(got, ports[zone]) {
			t.Errorf("docs: service-url.%s names ports %v; the nodes labelled %s publish %v", zone, got, zone, ports[zone])
		}
	}
	if !slices.Equal(sortedKeys(seen), sortedKeys(ports)) {
		t.Errorf("docs: service-url lines for zones %v, the nodes are in %v", sortedKeys(seen), sortedKeys(ports))
	}
	// The compose file's header gives the same lines.
	header, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range append(zones, urls...) {
		if !strings.Contains(string(header), "#   "+m[0]+"\n") {
			t.Errorf("docker-compose.yml's header lacks %q", m[0])
		}
	}
}

// checkCopiesWest checks that name copies one remote region, west, from
// the HTTP ports of the west services, in order, at their Eureka path.
func checkCopiesWest(t *testing.T, name string, nodes map[string]*composeNode, west []string) {
	t.Helper()
	r := nodes[name].cfg.regions.parsed
	if len(r) != 1 || r[0].Name != "west" || len(r[0].URLs) != len(west) {
		t.Fatalf("%s: remote regions %+v, want west with the URLs of %v", name, r, west)
	}
	for i, raw := range r[0].URLs {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if want := west[i] + ":" + nodes[west[i]].httpPort; u.Scheme != "http" || u.Host != want || u.Path != "/eureka/" {
			t.Errorf("%s: west URL %s, want http://%s/eureka/", name, raw, want)
		}
	}
}

// composeDocSection is the section of docs/regions.md that runs the
// regions profile.
func composeDocSection(t *testing.T) string {
	return regionsDocSection(t, "## Two regions with compose")
}

// regionsDocSection is the section of docs/regions.md under heading (a
// "## " or "### " line), up to the next heading of its level or above.
func regionsDocSection(t *testing.T, heading string) string {
	t.Helper()
	data, err := os.ReadFile("../../docs/regions.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/regions.md has no section %q", heading)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	if strings.HasPrefix(heading, "### ") {
		sec, _, _ = strings.Cut(sec, "\n### ")
	}
	return sec
}

var remoteRegionsRE = regexp.MustCompile(`HEUREKA_REMOTE_REGIONS='([^']*)'`)

// docRemoteRegions is the HEUREKA_REMOTE_REGIONS the docs' compose section
// runs the regions profile with; the compose file's header must give the same.
func docRemoteRegions(t *testing.T) string {
	t.Helper()
	m := remoteRegionsRE.FindAllStringSubmatch(composeDocSection(t), -1)
	if len(m) == 0 {
		t.Fatal("docs/regions.md, Two regions with compose: no HEUREKA_REMOTE_REGIONS='...'")
	}
	for _, o := range m[1:] {
		if o[1] != m[0][1] {
			t.Errorf("docs/regions.md gives HEUREKA_REMOTE_REGIONS %q and %q", m[0][1], o[1])
		}
	}
	header, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	if h := remoteRegionsRE.FindStringSubmatch(string(header)); h == nil || h[1] != m[0][1] {
		t.Errorf("docker-compose.yml's header gives %q, docs/regions.md HEUREKA_REMOTE_REGIONS %q", h, m[0][1])
	}
	return m[0][1]
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
// on loopback that reach the HTTP API, a healthcheck that asks the node
// itself, one image for all, and clusters that hold together
// (checkClusters, whose clusters it returns).
func checkTopology(t *testing.T, p *types.Project, nodes map[string]*composeNode) [][]string {
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
		if pt.HostIP != "127.0.0.1" {
			t.Errorf("%s: port published on %q, want 127.0.0.1 only", name, pt.HostIP)
		}
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
	for name, svc := range p.Services {
		if _, isNode := nodes[name]; !isNode {
			for _, v := range svc.Volumes {
				volumes[v.Source] = name
			}
		}
	}
	for name := range p.Volumes {
		// With every profile on, every declared volume has a user.
		if _, used := volumes[name]; !used && len(p.DisabledServices) == 0 {
			t.Errorf("volume %s is declared but unused", name)
		}
	}
	return checkClusters(t, nodes)
}

// checkClusters groups the nodes into clusters and checks each: its
// bootstrapping nodes share one initial cluster list, which names exactly
// them at their service names and listen ports; a joining node joins a
// node of the cluster; every node advertises what the others dial; all
// share one secret service, and no two clusters share one. It returns the
// clusters' services, sorted.
func checkClusters(t *testing.T, nodes map[string]*composeNode) [][]string {
	t.Helper()
	byList := map[string][]string{} // initial cluster list -> its bootstrapping services
	for _, name := range sortedKeys(nodes) {
		nd := nodes[name]
		checkAdvertises(t, name, nd)
		if nd.cfg.initialCluster != "" {
			byList[nd.cfg.initialCluster] = append(byList[nd.cfg.initialCluster], name)
		}
	}
	clusterOf := map[string]int{}
	var clusters [][]string
	for _, list := range sortedKeys(byList) {
		boot := byList[list]
		checkBootstrapList(t, nodes, list, boot)
		for _, name := range boot {
			clusterOf[name] = len(clusters)
		}
		clusters = append(clusters, boot)
	}
	for _, name := range sortedKeys(nodes) {
		nd := nodes[name]
		if nd.cfg.initialCluster != "" {
			continue
		}
		host, _, _ := net.SplitHostPort(nd.cfg.join)
		c, ok := clusterOf[host]
		if !ok || nodes[host].cfg.initialCluster == "" {
			t.Errorf("%s: neither bootstraps nor joins a bootstrapping node (join %q)", name, nd.cfg.join)
			continue
		}
		clusters[c] = append(clusters[c], name)
	}
	secretOf := map[string]int{}
	for i, c := range clusters {
		sort.Strings(c)
		for _, name := range c {
			sec := nodes[name].secret
			if other, seen := secretOf[sec]; seen && other != i {
				t.Errorf("%s: clusters %v and %v share the secret of %s", name, clusters[other], c, sec)
			}
			secretOf[sec] = i
			if first := nodes[c[0]].secret; sec != first {
				t.Errorf("%s: reads the secret of %s, %s of the same cluster that of %s", name, sec, c[0], first)
			}
		}
	}
	slices.SortFunc(clusters, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return clusters
}

// checkBootstrapList checks that boot, the services given list as their
// initial cluster, are exactly the members it names, at their service
// names and listen ports.
func checkBootstrapList(t *testing.T, nodes map[string]*composeNode, list string, boot []string) {
	t.Helper()
	members, err := cluster.ParseInitialCluster(list)
	if err != nil {
		t.Fatalf("%v: initial cluster %q: %v", boot, list, err)
	}
	if len(members) != len(boot) {
		t.Errorf("initial cluster %q lists %d members, %d services bootstrap from it: %v", list, len(members), len(boot), boot)
	}
	for _, m := range members {
		nd := nodeByID(nodes, m.ID)
		if nd == nil || !slices.Contains(boot, nd.service) {
			t.Errorf("initial cluster member %s is none of the services that bootstrap from the list (%v)", m.ID, boot)
			continue
		}
		if want := nd.service + ":" + nd.raftPort; m.RaftAddr != want {
			t.Errorf("member %s: raft address %s, want %s (service %s listens on %s)", m.ID, m.RaftAddr, want, nd.service, nd.cfg.raftAddr)
		}
		if want := nd.service + ":" + nd.httpPort; m.HTTPAddr != want {
			t.Errorf("member %s: http address %s, want %s", m.ID, m.HTTPAddr, want)
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

func derefOr(p *string, none string) string {
	if p == nil {
		return none
	}
	return *p
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
