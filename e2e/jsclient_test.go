package e2e

// Real clients (docs/eureka-api.md, "Client traps"): eureka-js-client 4.5.0 (npm) against a 3-node
// cluster. jsclient/scenario.js starts five EurekaClient instances of two
// applications, each pointed at a different node, some fetching deltas and
// some full registries, and checks what each client sees; this test runs it
// with node and then checks the registry on the server side.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	jsDir          = "jsclient"
	jsClientPkg    = "eureka-js-client"
	jsClientWant   = "4.5.0"
	jsNodeTimeout  = 40 * time.Second // the scenario's own bound
	jsHardTimeout  = 60 * time.Second // then the process is killed
	jsServerChecks = 10 * time.Second
)

// jsResult is the JSON line scenario.js prints.
type jsResult struct {
	OK           bool       `json:"ok"`
	Phase        string     `json:"phase"`
	Errors       []string   `json:"errors"`
	Anomalies    []string   `json:"anomalies"`
	AllVisibleMs int        `json:"allVisibleMs"`
	RemovedMs    int        `json:"removedMs"`
	ElapsedMs    int        `json:"elapsedMs"`
	Clients      []jsClient `json:"clients"`
}

type jsClient struct {
	Host            string              `json:"host"`
	Node            string              `json:"node"`
	Delta           bool                `json:"delta"`
	Stopped         bool                `json:"stopped"`
	FullFetches     int                 `json:"fullFetches"`
	DeltaFetches    int                 `json:"deltaFetches"`
	LearnedViaDelta []string            `json:"learnedViaDelta"`
	ByApp           map[string][]string `json:"byApp"`
	ByVIP           map[string][]string `json:"byVip"`
	Logs            []string            `json:"logs"`
}

// jsTools finds node and the installed eureka-js-client, or says what is
// missing.
func jsTools() (node string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("node is not installed (%v)", err)
	}
	pkg := filepath.Join(jsDir, "node_modules", jsClientPkg, "package.json")
	b, err := os.ReadFile(pkg)
	if err != nil {
		return "", fmt.Errorf("%s is not installed in e2e/%s/node_modules (run `make deps`, i.e. npm ci --prefix e2e/%s): %v", jsClientPkg, jsDir, jsDir, err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return "", fmt.Errorf("%s: %v", pkg, err)
	}
	if meta.Version != jsClientWant {
		return "", fmt.Errorf("%s %s is installed, want %s (run `make deps`)", jsClientPkg, meta.Version, jsClientWant)
	}
	return node, nil
}

// jsEnv is the environment for node: no proxy settings (the request library
// honours them), no NODE_ENV (it selects config files).
func jsEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "NODE_ENV", "EUREKA_ENV", "NODE_OPTIONS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_PROXY=127.0.0.1,localhost")
}

func TestJSClient(t *testing.T) {
	start := time.Now()
	node, err := jsTools()
	ToolOrSkip(t, "eureka-js-client", err)

	c := StartCluster(t, 3, Options{ExtraArgs: edCacheArgs})
	c.WaitLeader(t, 15*time.Second)
	urls := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		urls[i] = nd.BaseURL()
	}

	runJSScenario(t, node, urls)

	// Server side: every node holds exactly the four remaining instances,
	// stored as registered (bare-number port, dataCenterInfo without @class
	// and numeric metadata values included).
	type want struct{ port, vip string }
	wants := map[string]want{
		"JSALPHA/alpha-1": {"8081/true", "jsalpha.vip,js-all"},
		"JSALPHA/alpha-3": {"8083/true", "jsalpha.vip,js-all"},
		"JSBETA/beta-1":   {"9091/true", "jsbeta.vip,js-all"},
		"JSBETA/beta-2":   {"9092/true", "jsbeta.vip,js-all"},
	}
	wantKeys := make([]string, 0, len(wants))
	for k := range wants {
		wantKeys = append(wantKeys, k)
	}
	slices.Sort(wantKeys)
	for _, nd := range c.Nodes {
		var doc edDoc
		var problems []string
		ok := Eventually(jsServerChecks, func() bool {
			var err error
			doc, err = edFetch(nd.URL("/eureka/apps/"), "json")
			if err != nil {
				problems = []string{err.Error()}
				return false
			}
			problems = nil
			var keys []string
			for _, in := range doc.Instances {
				keys = append(keys, in.Key())
				w, ok := wants[in.Key()]
				if !ok {
					continue
				}
				if in.Status != "UP" || in.Overridden != "UNKNOWN" || in.Port != w.port || in.VIP != w.vip ||
					in.Metadata["zone"] == "" || in.Metadata["weight"] == "" {
					problems = append(problems, fmt.Sprintf("%s: status %s/%s port %s vip %q metadata %v", in.Key(), in.Status, in.Overridden, in.Port, in.VIP, in.Metadata))
				}
			}
			slices.Sort(keys)
			if !slices.Equal(keys, wantKeys) {
				problems = append(problems, fmt.Sprintf("instances %v, want %v", keys, wantKeys))
			}
			return len(problems) == 0
		})
		if !ok {
			t.Errorf("%s: registry after the scenario: %v", nd.ID, problems)
		}
	}
	t.Logf("TestJSClient took %v", time.Since(start).Round(time.Millisecond))
}

// runJSScenario runs scenario.js against urls and fails the test unless it
// reports success; it logs what each client saw.
func runJSScenario(t *testing.T, node string, urls []string) jsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jsHardTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, node, "scenario.js", "--urls", strings.Join(urls, ","),
		"--timeout-ms", fmt.Sprint(jsNodeTimeout.Milliseconds()))
	cmd.Dir = jsDir
	cmd.Env = jsEnv()
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) {
		t.Fatalf("node scenario.js: %v\nstderr:\n%s", runErr, stderr.String())
	}

	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res jsResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("node scenario.js (%v): last line is not a result: %v\nstdout:\n%s\nstderr:\n%s", runErr, err, stdout.String(), stderr.String())
	}
	for _, cl := range res.Clients {
		t.Logf("client %-16s node %s delta=%-5v full fetches %d, deltas %d, learned via delta %v, sees %v",
			cl.Host, cl.Node, cl.Delta, cl.FullFetches, cl.DeltaFetches, cl.LearnedViaDelta, cl.ByVIP["js-all"])
		for _, l := range cl.Logs {
			t.Errorf("client %s logged %s", cl.Host, l)
		}
	}
	for _, a := range res.Anomalies {
		// eureka-js-client 4.5.0's delta code splices the wrong index out
		// of its by-app list (docs/eureka-api.md, "Client traps"); a client bug, not the server's.
		t.Logf("known eureka-js-client delta quirk: %s", a)
	}
	if !res.OK || runErr != nil {
		t.Fatalf("scenario failed in phase %q (exit %v): %v\nstderr:\n%s", res.Phase, runErr, res.Errors, stderr.String())
	}
	t.Logf("all five instances visible to every client after %d ms; the deregistered one gone from every client after %d ms (scenario %d ms)",
		res.AllVisibleMs, res.RemovedMs, res.ElapsedMs)
	return res
}
