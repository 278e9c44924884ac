package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// cacheArgs makes reads see writes within ~100 ms, for tests that read right
// after writing.
var cacheArgs = []string{"--response-cache-update-interval", "100ms"}

// reg is one registration a test sends.
type reg struct {
	app   string // as sent in the path (any case)
	id    string
	extra map[string]any
}

// key is the registry key as GET /eureka/apps reports it.
func (r reg) key() string { return strings.ToUpper(r.app) + "/" + r.registryID() }

// registryID is the instance id the server derives (instanceId, else the
// Amazon instance-id, else hostName).
func (r reg) registryID() string {
	if r.id != "" {
		if v, ok := r.extra["instanceId"]; !ok || v != nil {
			return r.id
		}
	}
	if dc, ok := r.extra["dataCenterInfo"].(map[string]any); ok {
		if md, ok := dc["metadata"].(map[string]any); ok {
			if id, _ := md["instance-id"].(string); id != "" {
				return id
			}
		}
	}
	return InstanceMap(r.app, r.id, r.extra)["hostName"].(string)
}

// instanceURL is the GET /apps/{app}/{id} URL of r on nd.
func (r reg) instanceURL(nd *Node) string {
	return nd.URL("/eureka/apps/" + strings.ToUpper(r.app) + "/" + url.PathEscape(r.registryID()))
}

// registerAll registers regs through nodeURL with the given number of
// concurrent workers and fails the test if any registration does not end in
// a 204. A 503 (no leader: the contract's answer while an election is under
// way, which the fast test timings make possible on a loaded machine) is
// retried for up to 15 s, as Eureka clients do; retries are logged.
func registerAll(t *testing.T, nodeURL string, regs []reg, workers int) {
	t.Helper()
	var (
		mu      sync.Mutex
		errs    []error
		failed  int
		retries int
	)
	onWorkers(workers, len(regs), func(_, i int) {
		n, err := registerRetry503(nodeURL, regs[i])
		mu.Lock()
		defer mu.Unlock()
		retries += n
		if err != nil {
			failed++
			if len(errs) < 5 {
				errs = append(errs, err)
			}
		}
	})
	if retries > 0 {
		t.Logf("registerAll via %s: %d registrations retried after 503 (no leader)", nodeURL, retries)
	}
	if failed > 0 {
		t.Fatalf("%d of %d registrations failed; first errors: %v", failed, len(regs), errs)
	}
}

// onWorkers calls f(w, i) for every i in [0, n) on workers goroutines (w
// is the worker's number) and returns when all calls have.
func onWorkers(workers, n int, f func(w, i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(w, i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// registerRetry503 registers r, retrying 503 answers for up to 15 s. It
// returns how many retries it made.
func registerRetry503(nodeURL string, r reg) (int, error) {
	url := nodeURL + "/eureka/apps/" + r.app
	body := RegisterBody(r.app, r.id, r.extra)
	deadline := time.Now().Add(15 * time.Second)
	for n := 0; ; n++ {
		code, resp, _, err := TryDo("POST", url, body)
		switch {
		case err != nil:
			return n, fmt.Errorf("register %s: POST %s: %v", r.key(), url, err)
		case code == http.StatusNoContent:
			return n, nil
		case code != http.StatusServiceUnavailable || time.Now().After(deadline):
			return n, fmt.Errorf("register %s: POST %s: got %d %q, want 204", r.key(), url, code, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// keySet returns the sorted keys of regs.
func keySet(regs []reg) []string { return sortedBy(regs, reg.key) }

// sortedBy returns the key of each of xs, sorted: the comparable form of a
// set of registrations or instances.
func sortedBy[T any](xs []T, key func(T) string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, key(x))
	}
	slices.Sort(out)
	return out
}

// appKeys returns the sorted instance keys of a.
func appKeys(a Apps) []string {
	keys := make([]string, 0, len(a.Instances))
	for _, in := range a.Instances {
		keys = append(keys, in.Key())
	}
	return keys // Apps.Instances is sorted by key
}

// waitAppsKeys polls GET /eureka/apps on nd until its instance keys are
// exactly want (sorted), and returns that answer.
func waitAppsKeys(t *testing.T, nd *Node, want []string, timeout time.Duration) Apps {
	t.Helper()
	var (
		last    Apps
		lastErr error
	)
	ok := Eventually(timeout, func() bool {
		last, lastErr = TryGetApps(nd.BaseURL())
		return lastErr == nil && slices.Equal(appKeys(last), want)
	})
	if !ok {
		if lastErr != nil {
			t.Fatalf("%s: GET /eureka/apps never listed the %d expected instances; last error: %v", nd.ID, len(want), lastErr)
		}
		t.Fatalf("%s: GET /eureka/apps never listed exactly the %d expected instances within %v; last answer had %d: %s",
			nd.ID, len(want), timeout, len(last.Instances), diffKeys(want, appKeys(last)))
	}
	return last
}

// diffKeys describes how two lists of keys (or lines) differ, at most 5
// each way.
func diffKeys(want, got []string) string {
	w := map[string]bool{}
	for _, k := range want {
		w[k] = true
	}
	g := map[string]bool{}
	for _, k := range got {
		g[k] = true
	}
	var missing, extra []string
	for _, k := range want {
		if !g[k] {
			missing = append(missing, k)
		}
	}
	for _, k := range got {
		if !w[k] {
			extra = append(extra, k)
		}
	}
	return fmt.Sprintf("missing %d %q, unexpected %d %q", len(missing), head(missing, 5), len(extra), head(extra, 5))
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// getInstance does GET /apps/{app}/{id} for r on nd and returns the status and body.
func getInstance(t *testing.T, nd *Node, r reg) (int, []byte) {
	t.Helper()
	code, body, _ := Do(t, "GET", r.instanceURL(nd), nil)
	return code, body
}

// snapshotDirs lists the finished snapshots under <dataDir>/snapshots: the
// subdirectories holding a meta.json (hashicorp/raft's file snapshot store
// writes into a ".tmp" directory and renames it when done).
func snapshotDirs(dataDir string) []string {
	entries, err := os.ReadDir(filepath.Join(dataDir, "snapshots"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dataDir, "snapshots", e.Name(), "meta.json")); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// registryView is the comparable summary of one node's registry:
// sorted "APP/id ldt=… status=…" lines.
func registryView(a Apps) []string {
	out := make([]string, 0, len(a.Instances))
	for _, in := range a.Instances {
		out = append(out, fmt.Sprintf("%s ldt=%s status=%s", in.Key(), in.LastDirtyTimestamp, in.Status))
	}
	return out
}

// waitCommitStable waits until every live node reports the same commit and
// applied index, unchanged for stableFor, and returns that index. Right
// after start-up each node records its own address through the log,
// retrying every 500 ms until it succeeds, so "nothing more will be
// written" needs a stableFor longer than that.
func waitCommitStable(t *testing.T, c *Cluster, stableFor, timeout time.Duration) uint64 {
	t.Helper()
	var (
		idx   uint64
		since time.Time
		desc  string
	)
	ok := Eventually(timeout, func() bool {
		var cur uint64
		var parts []string
		for i, nd := range c.Live() {
			st, err := nd.TryStatus()
			if err != nil {
				desc = err.Error()
				since = time.Time{}
				return false
			}
			parts = append(parts, fmt.Sprintf("%s commit=%d applied=%d", nd.ID, st.CommitIndex, st.AppliedIndex))
			if st.CommitIndex != st.AppliedIndex || (i > 0 && st.CommitIndex != cur) {
				desc = strings.Join(parts, "; ")
				since = time.Time{}
				return false
			}
			cur = st.CommitIndex
		}
		desc = strings.Join(parts, "; ")
		if cur != idx || since.IsZero() {
			idx, since = cur, time.Now()
			return false
		}
		return time.Since(since) >= stableFor
	})
	if !ok {
		t.Fatalf("commit index did not settle within %v: %s", timeout, desc)
	}
	return idx
}

// checkNodeHeaders checks the X-Heureka-* headers every response carries.
func checkNodeHeaders(t *testing.T, what string, hdr http.Header, node, leader string) {
	t.Helper()
	if got := hdr.Get("X-Heureka-Node"); got != node {
		t.Errorf("%s: X-Heureka-Node = %q, want %q", what, got, node)
	}
	if _, ok := hdr[http.CanonicalHeaderKey("X-Heureka-Mode")]; !ok {
		t.Errorf("%s: no X-Heureka-Mode header", what)
	}
	if got, ok := hdr[http.CanonicalHeaderKey("X-Heureka-Leader")]; !ok {
		t.Errorf("%s: no X-Heureka-Leader header", what)
	} else if leader != "" && (len(got) != 1 || got[0] != leader) {
		t.Errorf("%s: X-Heureka-Leader = %q, want %q", what, got, leader)
	}
}

// listTree lists the paths under root (relative, at most depth levels deep),
// for failure messages.
func listTree(root string, depth int) []string {
	var out []string
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." {
			return nil
		}
		if strings.Count(rel, string(filepath.Separator)) >= depth {
			return filepath.SkipDir
		}
		out = append(out, rel)
		return nil
	})
	return out
}
