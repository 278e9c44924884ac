package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// A snapshot saved from one cluster with `heureka snapshot save` and
// restored into a fresh one with `heureka snapshot restore` yields the
// identical registry on every node of the fresh cluster, which keeps its
// own members and goes on working.
func TestSnapshotSaveRestoreAcrossClusters(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "registry.snap")
	// Reads come from the readOnly cache: refresh it quickly.
	opts := Options{ExtraArgs: []string{"--response-cache-update-interval", "100ms"}}

	// Cluster A: a registry with several applications, statuses, an
	// override, metadata and a cancel (so the delta queue holds a deletion).
	a := StartCluster(t, 3, opts)
	aLeader := a.WaitLeader(t, 10*time.Second)
	aFollower := a.Followers(aLeader)[0]
	for i, app := range []string{"orders", "orders", "orders", "payments", "payments", "inventory"} {
		RegisterJSON(t, a.Nodes[i%3].BaseURL(), app, app+"-"+string(rune('a'+i)), map[string]any{
			"metadata": map[string]any{"zone": "z" + string(rune('1'+i%2))},
		})
	}
	RegisterJSON(t, aFollower.BaseURL(), "gone", "gone-1", nil)
	mustStatus(t, "DELETE", aFollower.URL("/eureka/apps/GONE/gone-1"), nil, http.StatusOK)
	mustStatus(t, "PUT", aLeader.URL("/eureka/apps/PAYMENTS/payments-d/status?value=OUT_OF_SERVICE"), nil, http.StatusOK)
	mustStatus(t, "PUT", aLeader.URL("/eureka/apps/ORDERS/orders-a/metadata?build=42"), nil, http.StatusOK)
	want := waitSameApps(t, a.Nodes, 6)

	// Save through a follower (forwarded to the leader, after a barrier).
	res := RunBinary(t, time.Minute, nil, "snapshot", "save", file, "--addr", aFollower.HTTPAddr)
	if res.ExitCode != 0 {
		t.Fatalf("heureka snapshot save: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("snapshot save: %s", strings.TrimSpace(res.Stdout))
	if !strings.Contains(res.Stdout, "saved 6 instances in 3 applications") {
		t.Errorf("save output %q: want the counts", res.Stdout)
	}
	saved := readState(t, file)

	// Cluster B: fresh, with an instance of its own that the restore replaces.
	b := StartCluster(t, 3, opts)
	bLeader := b.WaitLeader(t, 10*time.Second)
	bFollower := b.Followers(bLeader)[0]
	RegisterJSON(t, bLeader.BaseURL(), "local", "local-1", nil)
	res = RunBinary(t, time.Minute, nil, "snapshot", "restore", file, "--addr", bFollower.HTTPAddr)
	if res.ExitCode != 0 {
		t.Fatalf("heureka snapshot restore: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("snapshot restore: %s", strings.TrimSpace(res.Stdout))

	// Every node of B serves exactly A's registry: same instances, byte for
	// byte, and the same reconcile hash code.
	got := waitSameApps(t, b.Nodes, 6)
	if got.HashCode != want.HashCode {
		t.Errorf("apps hash code %s after restore, want %s", got.HashCode, want.HashCode)
	}
	if d := diffApps(want, got); d != "" {
		t.Fatalf("restored registry differs:\n%s", d)
	}
	// At the state-machine level too: a snapshot of B holds A's registry.
	file2 := filepath.Join(dir, "after.snap")
	if res := RunBinary(t, time.Minute, nil, "snapshot", "save", file2, "--addr", bLeader.HTTPAddr); res.ExitCode != 0 {
		t.Fatalf("save from B: exit %d\n%s", res.ExitCode, res.Stderr)
	}
	after := readState(t, file2)
	for name, pair := range map[string][2]any{
		"entries":      {saved.Entries, after.Entries},
		"delta queue":  {saved.Delta, after.Delta},
		"app versions": {saved.AppVersions, after.AppVersions},
		"version":      {saved.Version, after.Version},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("restored %s differ from the saved ones", name)
		}
	}
	// B keeps its own members, and goes on taking writes.
	for _, m := range bLeader.Members(t).Members {
		if b.Node(m.ID) == nil || m.HTTPAddr != b.Node(m.ID).HTTPAddr {
			t.Errorf("member %+v after restore: want B's own members", m)
		}
	}
	RegisterJSON(t, bFollower.BaseURL(), "after", "after-1", nil)
	waitSameApps(t, b.Nodes, 7)

	// A restarted node comes back with the restored registry.
	bFollower.Restart(t)
	b.WaitLeader(t, 10*time.Second)
	waitSameApps(t, b.Nodes, 7)

	// A file that is no snapshot is refused before it reaches the cluster.
	junk := filepath.Join(dir, "junk.snap")
	if err := os.WriteFile(junk, []byte("not a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = RunBinary(t, time.Minute, nil, "snapshot", "restore", junk, "--addr", bLeader.HTTPAddr)
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "not a heureka snapshot") {
		t.Errorf("restore of junk: exit %d, stderr %q; want 1 and a reason", res.ExitCode, res.Stderr)
	}
	code, body, _ := Do(t, "POST", bLeader.URL("/v1/snapshot"), []byte("not a snapshot"), "Content-Type", "application/octet-stream")
	if code != http.StatusBadRequest || !bytes.Contains(body, []byte("snapshot")) {
		t.Errorf("POST /v1/snapshot with junk: %d %s, want 400", code, body)
	}
	waitSameApps(t, b.Nodes, 7)
}

// readState decodes a snapshot file.
func readState(t *testing.T, path string) *fsm.State {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := fsm.ReadSnapshot(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return st
}

// waitSameApps waits until every node lists n instances, all nodes alike,
// and returns that registry.
func waitSameApps(t *testing.T, nodes []*Node, n int) Apps {
	t.Helper()
	var first Apps
	var why string
	ok := Eventually(15*time.Second, func() bool {
		for i, nd := range nodes {
			apps, err := TryGetApps(nd.BaseURL())
			if err != nil {
				why = err.Error()
				return false
			}
			if len(apps.Instances) != n {
				why = nd.ID + " lists " + strings.Join(appKeys(apps), ",")
				return false
			}
			if i == 0 {
				first = apps
			} else if d := diffApps(first, apps); d != "" {
				why = nd.ID + " differs from " + nodes[0].ID + ": " + d
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("nodes do not agree on %d instances: %s", n, why)
	}
	return first
}

// diffApps compares two registries instance by instance, as sent.
func diffApps(want, got Apps) string {
	var out []string
	w, g := want.ByKey(), got.ByKey()
	for k, wi := range w {
		gi, ok := g[k]
		switch {
		case !ok:
			out = append(out, "missing "+k)
		case !jsonEqual(wi.Raw, gi.Raw):
			out = append(out, k+": "+string(wi.Raw)+"\n  != "+string(gi.Raw))
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			out = append(out, "unexpected "+k)
		}
	}
	return strings.Join(out, "\n")
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// mustStatus sends a request and fails unless the answer has code.
func mustStatus(t *testing.T, method, url string, body []byte, code int) {
	t.Helper()
	got, resp, _ := Do(t, method, url, body)
	if got != code {
		t.Fatalf("%s %s: %d %s, want %d", method, url, got, resp, code)
	}
}
