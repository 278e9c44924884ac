package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/e2e"
	"github.com/heureka-registry/heureka/internal/testkit/instance"
)

const (
	image       = "heureka:latest"
	composeFile = "../../docker-compose.yml"
	// upTimeout bounds docker-compose up (the five profile waits for
	// healthchecks) and down.
	upTimeout = 3 * time.Minute
)

// cases records each test's outcome for the summary line TestMain prints.
var cases struct {
	sync.Mutex
	list []string
}

func TestMain(m *testing.M) {
	code := m.Run()
	cases.Lock()
	if len(cases.list) > 0 {
		fmt.Printf("compose: %d cases run: %s\n", len(cases.list), strings.Join(cases.list, ", "))
	} else {
		fmt.Println("compose: 0 cases run (no usable Docker engine, or none selected)")
	}
	cases.Unlock()
	os.Exit(code)
}

// countCase adds the running test to the summary with its outcome.
func countCase(t *testing.T) {
	start := time.Now()
	t.Cleanup(func() {
		outcome := "ok"
		if t.Failed() {
			outcome = "FAIL"
		}
		cases.Lock()
		cases.list = append(cases.list, fmt.Sprintf("%s %s (%s)", strings.TrimPrefix(t.Name(), "TestCompose"), outcome, time.Since(start).Round(time.Second)))
		cases.Unlock()
	})
}

var tools struct {
	once    sync.Once
	compose []string // docker-compose, or docker compose
	err     error
}

// needDocker skips the test (fails it under HEUREKA_REQUIRE_TOOLS=1) unless
// a Docker engine answers and a compose command exists; the first call
// builds the image from this tree (make image), so the containers run the
// code under test. Under go test -short (make unit) it skips whatever the
// machine has: these tests take minutes.
func needDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts containers; skipped with -short (make unit), run by make e2e and make test")
	}
	tools.once.Do(func() {
		if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
			tools.err = fmt.Errorf("no usable Docker engine (run `make deps` as root: it installs docker.io and starts dockerd): docker info: %v: %s", err, bytes.TrimSpace(out))
			return
		}
		if _, err := exec.LookPath("docker-compose"); err == nil {
			tools.compose = []string{"docker-compose"}
		} else if exec.Command("docker", "compose", "version").Run() == nil {
			tools.compose = []string{"docker", "compose"}
		} else {
			tools.err = fmt.Errorf("neither docker-compose nor docker compose found (run `make deps`)")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "sh", "../../scripts/image.sh").CombinedOutput(); err != nil {
			tools.err = fmt.Errorf("make image: %v: %s", err, out)
		}
	})
	e2e.ToolOrSkip(t, "container", tools.err)
	countCase(t)
}

// project is one compose project of the repository's docker-compose.yml,
// with its own name and host ports.
type project struct {
	t     *testing.T
	name  string
	ports map[string]int // service -> host port
	env   []string       // more variables for compose (KEY=value)
}

// services of the default cluster, and of the five profile.
var defaultServices = []string{"heureka1", "heureka2", "heureka3"}

// westServices are the second cluster's, of the regions profile.
var westServices = []string{"west1", "west2", "west3"}

// everyProfile selects every service of the file (for down and logs).
var everyProfile = []string{"--profile", "five", "--profile", "regions"}

// newProject prepares project name with host ports base..base+4 for
// heureka1..5 and base+5..base+7 for west1..3, and takes it down with its
// volumes when the test ends (after printing the logs of a failed test).
func newProject(t *testing.T, name string, base int) *project {
	t.Helper()
	if base < 21700 || base+7 >= 21900 {
		t.Fatalf("project %s: host ports %d..%d leave the block 21700–21899 reserved for these tests", name, base, base+7)
	}
	needDocker(t)
	p := &project{t: t, name: name, ports: map[string]int{}}
	for i := 1; i <= 5; i++ {
		p.ports[fmt.Sprintf("heureka%d", i)] = base + i - 1
	}
	for i, svc := range westServices {
		p.ports[svc] = base + 5 + i
	}
	down := append(slices.Clone(everyProfile), "down", "-v", "--remove-orphans", "-t", "2")
	p.compose(upTimeout, down...) // leftovers of an interrupted run
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := p.compose(time.Minute, append(slices.Clone(everyProfile), "logs", "--no-color", "--tail", "40")...)
			t.Logf("container logs:\n%s", out)
		}
		if out, err := p.compose(upTimeout, down...); err != nil {
			t.Logf("compose down: %v\n%s", err, out)
		}
	})
	return p
}

// portVar is the compose file's variable for svc's host port:
// HEUREKA1_PORT for heureka1, HEUREKA_WEST1_PORT for west1.
func portVar(svc string) string {
	v := strings.ToUpper(svc) + "_PORT"
	if !strings.HasPrefix(v, "HEUREKA") {
		v = "HEUREKA_" + v
	}
	return v
}

// compose runs the compose command on this project.
func (p *project) compose(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := append(append([]string(nil), tools.compose[1:]...), "-p", p.name, "-f", composeFile)
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, tools.compose[0], full...)
	cmd.Env = os.Environ()
	for svc, port := range p.ports {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", portVar(svc), port))
	}
	cmd.Env = append(cmd.Env, "HEUREKA_EVICTION_INTERVAL=2s")
	cmd.Env = append(cmd.Env, p.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", tools.compose[0], strings.Join(full, " "), err)
	}
	return string(out), nil
}

// must runs compose and fails the test on error.
func (p *project) must(timeout time.Duration, args ...string) string {
	p.t.Helper()
	out, err := p.compose(timeout, args...)
	if err != nil {
		p.t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// docker runs the docker CLI.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// container is the id of service's container.
func (p *project) container(svc string) string {
	p.t.Helper()
	id := strings.TrimSpace(p.must(time.Minute, "ps", "-q", svc))
	if id == "" {
		p.t.Fatalf("no container for %s", svc)
	}
	return id
}

// network is the project's default network.
func (p *project) network() string {
	p.t.Helper()
	out := docker(p.t, "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", p.container("heureka1"))
	nets := strings.Fields(out)
	if len(nets) != 1 {
		p.t.Fatalf("heureka1 is on networks %v, want one", nets)
	}
	return nets[0]
}

// url is the base URL of service through its published port.
func (p *project) url(svc string) string {
	return "http://127.0.0.1:" + strconv.Itoa(p.ports[svc])
}

// up starts the project (with profiles) and waits until every service of
// it is healthy and the nodes of each cluster agree on a leader.
func (p *project) up(profiles ...string) {
	p.t.Helper()
	args := []string{}
	clusters := [][]string{slices.Clone(defaultServices)}
	for _, pr := range profiles {
		args = append(args, "--profile", pr)
		switch pr {
		case "five", "zones":
			clusters[0] = append(clusters[0], "heureka4", "heureka5")
		case "regions":
			clusters = append(clusters, westServices)
		}
	}
	p.must(upTimeout, append(args, "up", "-d", "--no-build")...)
	for _, svcs := range clusters {
		p.waitHealthy(svcs...)
	}
	for _, svcs := range clusters {
		p.waitLeader(svcs...)
	}
}

// waitHealthy waits for Docker's healthcheck (heureka status) to pass.
func (p *project) waitHealthy(svcs ...string) {
	p.t.Helper()
	for _, svc := range svcs {
		id := p.container(svc)
		e2e.WaitFor(p.t, 90*time.Second, func() bool {
			out, err := exec.Command("docker", "inspect", "-f", "{{.State.Health.Status}}", id).Output()
			return err == nil && strings.TrimSpace(string(out)) == "healthy"
		}, svc+" healthy")
	}
}

// status is the part of /v1/status the tests read.
type status struct {
	Node           string `json:"node"`
	ClusterID      string `json:"cluster_id"`
	State          string `json:"state"`
	Leader         string `json:"leader"`
	Term           uint64 `json:"term"`
	CommitIndex    uint64 `json:"commit_index"`
	AppliedIndex   uint64 `json:"applied_index"`
	Mode           string `json:"mode"`
	Quorum         bool   `json:"quorum"`
	QuorumLost     bool   `json:"quorum_lost"`
	Ready          bool   `json:"ready"`
	JournalEntries int    `json:"journal_entries"`
	Instances      int    `json:"instances"`
	// RegistryVersion is the Raft index of the last change to the registry.
	RegistryVersion uint64 `json:"registry_version"`
}

// client reaches nodes through their published ports; a node cut off from
// the network is reached inside its own network namespace (reach).
var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// do sends one request with c; Accept is JSON.
func do(c *http.Client, method, url string, body []byte) (int, []byte, http.Header, error) {
	return e2e.DoWith(c, method, url, body)
}

func getStatus(c *http.Client, base string) (status, error) {
	var st status
	code, body, _, err := do(c, "GET", base+"/v1/status", nil)
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("status %d: %s", code, body)
	}
	return st, json.Unmarshal(body, &st)
}

func (p *project) status(svc string) (status, error) { return getStatus(client, p.url(svc)) }

// waitLeader waits until every service names the same leader and returns
// the leader's service.
func (p *project) waitLeader(svcs ...string) string {
	p.t.Helper()
	var leader string
	e2e.WaitFor(p.t, 60*time.Second, func() bool {
		leader = ""
		for _, svc := range svcs {
			st, err := p.status(svc)
			if err != nil || st.Leader == "" || (leader != "" && st.Leader != leader) {
				return false
			}
			leader = st.Leader
		}
		return true
	}, fmt.Sprintf("one leader on %v", svcs))
	return serviceOf(leader)
}

// serviceOf maps a node id (n1, w1) to its service (heureka1, west1).
func serviceOf(id string) string {
	if n, ok := strings.CutPrefix(id, "w"); ok {
		return "west" + n
	}
	return "heureka" + strings.TrimPrefix(id, "n")
}

// others returns svcs without skip.
func others(svcs []string, skip ...string) []string {
	var out []string
	for _, s := range svcs {
		if !contains(skip, s) {
			out = append(out, s)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// register registers app/id through base with the given lease; it reports
// whether the node acknowledged (204).
func register(c *http.Client, base, app, id string, leaseSecs int) error {
	body := e2e.RegisterBody(app, id, map[string]any{"leaseInfo": map[string]any{"renewalIntervalInSecs": 1, "durationInSecs": leaseSecs}})
	code, b, _, err := do(c, "POST", base+"/eureka/apps/"+app, body)
	if err != nil {
		return err
	}
	if code != http.StatusNoContent {
		return fmt.Errorf("register %s/%s: %d %s", app, id, code, b)
	}
	return nil
}

// instanceIDs lists app's instance ids as base serves them (nil, code when
// the answer is not 200 or 404).
func instanceIDs(c *http.Client, base, app string) ([]string, int, http.Header, error) {
	code, body, hdr, err := do(c, "GET", base+"/eureka/apps/"+app, nil)
	if err != nil {
		return nil, 0, nil, err
	}
	if code == http.StatusNotFound {
		return []string{}, code, hdr, nil
	}
	if code != http.StatusOK {
		return nil, code, hdr, nil
	}
	ids, err := instance.AppIDs(body)
	if err != nil {
		return nil, code, hdr, fmt.Errorf("decode %s: %w", body, err)
	}
	sort.Strings(ids)
	return ids, code, hdr, nil
}

// missing returns the ids of want that got lacks.
func missing(want, got []string) []string {
	have := map[string]bool{}
	for _, g := range got {
		have[g] = true
	}
	var out []string
	for _, w := range want {
		if !have[w] {
			out = append(out, w)
		}
	}
	return out
}

// waitAll waits until every service in svcs serves all of want for app.
func (p *project) waitAll(svcs []string, app string, want []string, timeout time.Duration) {
	p.t.Helper()
	for _, svc := range svcs {
		var last []string
		ok := e2e.Eventually(timeout, func() bool {
			ids, _, _, err := instanceIDs(client, p.url(svc), app)
			if err != nil || ids == nil {
				return false
			}
			last = missing(want, ids)
			return len(last) == 0
		})
		if !ok {
			p.t.Fatalf("%s lacks %d of %d acknowledged %s instances after %v: %v", svc, len(last), len(want), app, timeout, head(last))
		}
	}
}

func head(s []string) []string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}

// reach is a client that talks to svc's port 8761 from inside its
// container's network namespace, whatever its networks.
func (p *project) reach(svc string) *http.Client {
	pid, err := strconv.Atoi(docker(p.t, "inspect", "-f", "{{.State.Pid}}", p.container(svc)))
	if err != nil || pid == 0 {
		p.t.Fatalf("pid of %s: %d %v", svc, pid, err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialInNetns(ctx, pid, "127.0.0.1:8761")
		}}}
}

// inContainer is the base URL to use with a reach client.
const inContainer = "http://in-container"

// repoPath resolves a path from the repository root.
func repoPath(rel string) string { return filepath.Join("..", "..", rel) }

// members lists the Raft configuration as svc sees it.
func (p *project) members(svc string) ([]e2e.Member, error) {
	code, body, _, err := do(client, "GET", p.url(svc)+"/v1/members", nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/members on %s: %d %s", svc, code, body)
	}
	var m e2e.Members
	return m.Members, json.Unmarshal(body, &m)
}

// cacheBound is how long a read may lag a write it did not make: the
// read-only response cache refreshes every 30 s (as Eureka's does), plus
// replication and a loaded machine.
const cacheBound = 45 * time.Second
