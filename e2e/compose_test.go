package e2e

import (
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// docker-compose.yml run as local processes: every service becomes a
// heureka process with the service's own command and environment (over the
// image's), its host name mapped to 127.0.0.1 with a free port for each
// container port, and its volume mapped to a data directory. The default
// services must form a healthy 3-node cluster by themselves; the five
// profile's services must join it.

const composePath = "../docker-compose.yml"

// composeService is a compose service mapped onto loopback.
type composeService struct {
	name  string
	svc   types.ServiceConfig
	node  *Node
	ports map[string]string // container port -> loopback host:port
}

// composeRun maps the services of the compose file onto a harness cluster.
type composeRun struct {
	t        *testing.T
	c        *Cluster
	services map[string]*composeService
	// oneShots are the services that run a command other than serve once
	// (the cluster secret's), by name.
	oneShots map[string]types.ServiceConfig
	// shared maps a named volume that is not a node's data directory to
	// a directory of this run's.
	shared   map[string]string
	imageEnv map[string]string
}

func loadComposeProject(t *testing.T, profiles ...string) *types.Project {
	return LoadCompose(t, composePath, profiles...)
}

func imageEnvironment(t *testing.T) map[string]string { return DockerfileEnv(t, "../Dockerfile") }

// newComposeRun allocates a node (ports, data dir) for every service of p.
func newComposeRun(t *testing.T, p *types.Project) *composeRun {
	r := &composeRun{t: t, c: newCluster(t, Options{}), services: map[string]*composeService{},
		oneShots: map[string]types.ServiceConfig{}, shared: map[string]string{}, imageEnv: imageEnvironment(t)}
	for _, name := range sortedServiceNames(p) {
		svc := p.Services[name]
		if cmd := []string(svc.Command); len(cmd) == 0 || cmd[0] != "serve" {
			r.oneShots[name] = svc
			continue
		}
		env := r.env(svc)
		id := env["HEUREKA_NODE_ID"]
		if id == "" {
			t.Fatalf("%s: no HEUREKA_NODE_ID", name)
		}
		nd := r.c.newNode(id)
		cs := &composeService{name: name, svc: svc, node: nd, ports: map[string]string{}}
		for key, addr := range map[string]string{"HEUREKA_HTTP_ADDR": nd.HTTPAddr, "HEUREKA_RAFT_ADDR": nd.RaftAddr} {
			_, port, err := net.SplitHostPort(env[key])
			if err != nil {
				t.Fatalf("%s: %s=%q: %v", name, key, env[key], err)
			}
			cs.ports[port] = addr
		}
		r.services[name] = cs
	}
	return r
}

// env is the container's environment: the image's, then the service's.
func (r *composeRun) env(svc types.ServiceConfig) map[string]string {
	env := map[string]string{}
	for k, v := range r.imageEnv {
		env[k] = v
	}
	for k, v := range svc.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	return env
}

var addrRE = regexp.MustCompile(`([A-Za-z0-9_.-]+):([0-9]+)`)

// volumeDir is where a service's volume lives in this run: a node's data
// volume is its data directory; any other named volume is one directory
// shared by every service that mounts it.
func (r *composeRun) volumeDir(self *composeService, vol types.ServiceVolumeConfig) string {
	if self != nil && r.env(self.svc)["HEUREKA_DATA_DIR"] == vol.Target {
		return self.node.DataDir
	}
	dir, ok := r.shared[vol.Source]
	if !ok {
		dir = r.t.TempDir()
		r.shared[vol.Source] = dir
	}
	return dir
}

// mapPath maps a path inside a container of svc to this run's directories.
func (r *composeRun) mapPath(self *composeService, svc types.ServiceConfig, v string) (string, bool) {
	for _, vol := range svc.Volumes {
		if v == vol.Target {
			return r.volumeDir(self, vol), true
		}
		if rest, ok := strings.CutPrefix(v, vol.Target+"/"); ok {
			return r.volumeDir(self, vol) + "/" + rest, true
		}
	}
	return v, false
}

// runOneShots runs the one-shot services (`docker compose up` runs them
// before the services that wait for their completion) and fails the test
// unless each exits 0.
func (r *composeRun) runOneShots() {
	r.t.Helper()
	var names []string
	for name := range r.oneShots {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		svc := r.oneShots[name]
		var args []string
		cmd := []string(svc.Command)
		for i := 0; i < len(cmd); i++ {
			// Processes here run as the test's user, not the container's:
			// giving a file to another user needs root.
			if cmd[i] == "--owner" && os.Geteuid() != 0 {
				i++
				continue
			}
			mapped, _ := r.mapPath(nil, svc, cmd[i])
			args = append(args, mapped)
		}
		res := RunBinary(r.t, 30*time.Second, nil, args...)
		if res.ExitCode != 0 {
			r.t.Fatalf("%s: heureka %s: exit %d\n%s%s", name, strings.Join(args, " "), res.ExitCode, res.Stdout, res.Stderr)
		}
		r.t.Logf("%s: heureka %s: %s", name, strings.Join(args, " "), strings.TrimSpace(res.Stdout))
	}
}

// mapValue rewrites the addresses in a value as seen from service self:
// service host names, 0.0.0.0 and the container's own loopback become
// loopback addresses with the ports allocated for them; a path under a
// volume's mount point becomes the same path under the volume's directory.
func (r *composeRun) mapValue(self *composeService, v string) string {
	if mapped, ok := r.mapPath(self, self.svc, v); ok {
		return mapped
	}
	return addrRE.ReplaceAllStringFunc(v, func(m string) string {
		host, port, _ := net.SplitHostPort(m)
		target := r.services[host]
		switch host {
		case "0.0.0.0", "127.0.0.1", "localhost":
			target = self
		}
		if target == nil {
			return m
		}
		addr, ok := target.ports[port]
		if !ok {
			r.t.Fatalf("%s: %s names port %s of %s, which it does not listen on", self.name, m, port, target.name)
		}
		return addr
	})
}

// start launches the service's process the way its container would run.
func (r *composeRun) start(name string) *Node {
	r.t.Helper()
	cs := r.services[name]
	args := []string(cs.svc.Command)
	if len(args) == 0 || args[0] != "serve" {
		r.t.Fatalf("%s: command %v", name, args)
	}
	mapped := []string{}
	for _, a := range args {
		mapped = append(mapped, r.mapValue(cs, a))
	}
	var env []string
	for k, v := range r.env(cs.svc) {
		env = append(env, k+"="+r.mapValue(cs, v))
	}
	sort.Strings(env)
	cs.node.Argv = mapped
	cs.node.Env = launch.Env(env, "HEUREKA_")
	r.t.Logf("%s as %s: heureka %s with %s", name, cs.node.ID, strings.Join(mapped, " "), strings.Join(env, " "))
	if err := cs.node.Start(); err != nil {
		r.t.Fatalf("start %s: %v", name, err)
	}
	cs.node.waitReady(r.t)
	return cs.node
}

// healthy runs the service's healthcheck command, mapped, and reports
// whether it exits 0.
func (r *composeRun) healthy(name string) bool {
	r.t.Helper()
	cs := r.services[name]
	test := []string(cs.svc.HealthCheck.Test)
	if len(test) < 2 || test[0] != "CMD" || test[1] != "heureka" {
		r.t.Fatalf("%s: healthcheck %v is not CMD heureka ...", name, test)
	}
	var args []string
	for _, a := range test[2:] {
		args = append(args, r.mapValue(cs, a))
	}
	return RunBinary(r.t, 10*time.Second, nil, args...).ExitCode == 0
}

func sortedServiceNames(p *types.Project) []string {
	var names []string
	for name := range p.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func TestComposeTopologyRunsAsProcesses(t *testing.T) {
	def := loadComposeProject(t)
	all := loadComposeProject(t, "five")
	r := newComposeRun(t, all)

	// docker compose up: the one-shot services, then the default nodes,
	// all at once.
	r.runOneShots()
	var defaults []string
	for _, name := range sortedServiceNames(def) {
		if _, ok := r.services[name]; ok {
			defaults = append(defaults, name)
		}
	}
	for _, name := range defaults {
		r.start(name)
	}
	leader := r.c.WaitLeader(t, 20*time.Second)
	for _, name := range defaults {
		name := name
		WaitFor(t, 20*time.Second, func() bool { return r.healthy(name) }, name+" healthcheck passes")
	}
	if got := len(leader.Members(t).Members); got != len(defaults) {
		t.Fatalf("default topology: %d members, want %d", got, len(defaults))
	}
	first := r.services[defaults[0]].node
	last := r.services[defaults[len(defaults)-1]].node
	RegisterJSON(t, first.BaseURL(), "compose", "compose-1", nil)
	WaitFor(t, 45*time.Second, func() bool {
		code, _, _, err := TryDo("GET", last.URL("/eureka/apps/COMPOSE/compose-1"), nil)
		return err == nil && code == 200
	}, "an instance registered on the first node is served by the last")

	// docker compose --profile five up: the joiners, once what they depend on is healthy.
	var joiners []string
	for _, name := range sortedServiceNames(all) {
		if _, isDefault := def.Services[name]; !isDefault && r.services[name] != nil {
			joiners = append(joiners, name)
		}
	}
	if len(joiners) != 2 {
		t.Fatalf("the five profile adds %v, want two services", joiners)
	}
	for _, name := range joiners {
		for dep := range r.services[name].svc.DependsOn {
			if _, oneShot := r.oneShots[dep]; oneShot {
				continue // ran to completion above
			}
			if !r.healthy(dep) {
				t.Fatalf("%s depends on %s, which is not healthy", name, dep)
			}
		}
		r.start(name)
	}
	WaitFor(t, 30*time.Second, func() bool {
		return Voters(leader.Members(t).Members) == 5
	}, "five voters")
	leader = r.c.WaitLeader(t, 20*time.Second)
	for _, name := range joiners {
		name := name
		WaitFor(t, 20*time.Second, func() bool { return r.healthy(name) }, name+" healthcheck passes")
		nd := r.services[name].node
		WaitFor(t, 45*time.Second, func() bool {
			code, _, _, err := TryDo("GET", nd.URL("/eureka/apps/COMPOSE/compose-1"), nil)
			return err == nil && code == 200
		}, name+" serves the registry")
	}
	// Members advertise loopback addresses only (the mapping reached every setting).
	for _, m := range leader.Members(t).Members {
		if !strings.HasPrefix(m.HTTPAddr, "127.0.0.1:") || !strings.HasPrefix(m.RaftAddr, "127.0.0.1:") {
			t.Errorf("member %+v advertises a non-loopback address", m)
		}
	}
	// The nodes share the secret the one-shot service wrote: a change
	// without it is refused.
	if code, b, _ := Do(t, "PUT", leader.URL("/v1/mode?mode=cp"), nil); code != 401 {
		t.Errorf("a mode change without the cluster secret: %d %s, want 401", code, b)
	}
	t.Logf("compose topology: %d nodes, leader %s", len(r.c.Nodes), leader.ID)
}
