package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The dashboard is checked the way a person sees it: headless Chromium
// (Debian's chromium package, driven by chromedp) loads the page of a live
// cluster, and each state is kept as a screenshot.

const (
	// artifactsEnv names the directory screenshots go to (default e2e/artifacts).
	artifactsEnv = "HEUREKA_ARTIFACTS"
	// chromiumEnv names a browser binary to use instead of the one on PATH.
	chromiumEnv = "HEUREKA_CHROMIUM"
)

// chromiumPath finds the browser, or skips (fails under HEUREKA_REQUIRE_TOOLS=1).
func chromiumPath(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv(chromiumEnv), "chromium", "chromium-browser", "/usr/bin/chromium"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	ToolOrSkip(t, "browser", errors.New("chromium not found (install Debian's chromium package: make deps, or set "+chromiumEnv+")"))
	return ""
}

// newBrowser starts headless Chromium with a fresh profile and the flags
// that keep it off the network; it is closed in t.Cleanup.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1400),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelBrowser() // closes the browser
		cancelAlloc()   // waits for its process to exit
	})
	// The first action starts the browser; it must run on the long-lived
	// context (a timeout here would stop the browser with it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// artifactDir is where the test run keeps screenshots.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(artifactsEnv)
	if dir == "" {
		dir = "artifacts"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// page loads url and returns the texts of the selectors asked for (a
// missing selector gives ""), saving a full-page screenshot under name.
func page(t *testing.T, ctx context.Context, url, name string, selectors ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#apps"))); err != nil {
		t.Fatalf("load %s in chromium: %v", url, err)
	}
	out := map[string]string{}
	for _, sel := range selectors {
		js := fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel)
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("read %s on %s: %v", sel, url, err)
		}
		out[sel] = strings.Join(strings.Fields(text), " ")
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", url, err)
	}
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of %s: %s", url, path)
	return out
}

func TestDashboardInChromium(t *testing.T) {
	ctx := newBrowser(t)
	c := StartCluster(t, 3, Options{ExtraArgs: leaseArgs})
	leader := c.WaitLeader(t, 10*time.Second)
	follower := c.Followers(leader)[0]

	// Ten instances in three applications, in three statuses, renewing
	// every second as they declared.
	lease := shortLease(5)
	var keys []string
	keys = append(keys, registerMany(t, c.Nodes, "ORDERS", 5, lease)...)
	keys = append(keys, registerMany(t, c.Nodes, "PAYMENTS", 3, map[string]any{"leaseInfo": lease["leaseInfo"], "status": "DOWN"})...)
	keys = append(keys, registerMany(t, c.Nodes, "INVENTORY", 2, map[string]any{"leaseInfo": lease["leaseInfo"], "status": "STARTING"})...)
	r := startRenewer(t, c.Nodes, keys, time.Second, 4)
	WaitFor(t, 10*time.Second, func() bool {
		ls, ok := leases(t, leader)
		return ok && !ls.SelfPreservationActive && ls.RenewsLastMin > ls.Threshold && ls.Threshold > 0
	}, "renewal rate above threshold")

	// A follower's page shows the registry and the cluster, and no banner.
	url := follower.URL("/?refresh=60")
	got := page(t, ctx, url, "dashboard-registry.png",
		`tr[data-app="ORDERS"]`, `tr[data-app="PAYMENTS"]`, `tr[data-app="INVENTORY"]`,
		`tr[data-app="ORDERS"] td.count`, `tr[data-app="PAYMENTS"] td.count`, `tr[data-app="INVENTORY"] td.count`,
		"#registry-summary", "#members", "#node", "#emergency", "#cache")
	for sel, want := range map[string]string{
		`tr[data-app="ORDERS"]`:             "UP (5)",
		`tr[data-app="PAYMENTS"]`:           "DOWN (3)",
		`tr[data-app="INVENTORY"]`:          "STARTING (2)",
		`tr[data-app="ORDERS"] td.count`:    "5",
		`tr[data-app="PAYMENTS"] td.count`:  "3",
		`tr[data-app="INVENTORY"] td.count`: "2",
		"#registry-summary":                 "3 applications, 10 instances",
		"#node":                             follower.ID,
		"#cache":                            "readOnly",
	} {
		if !strings.Contains(got[sel], want) {
			t.Errorf("%s shows %q, want it to contain %q", sel, got[sel], want)
		}
	}
	for _, id := range []string{"ORDERS-0000", "PAYMENTS-0002", "INVENTORY-0001"} {
		if !strings.Contains(got[`tr[data-app="ORDERS"]`]+got[`tr[data-app="PAYMENTS"]`]+got[`tr[data-app="INVENTORY"]`], id) {
			t.Errorf("instance %s is not listed", id)
		}
	}
	for _, nd := range c.Nodes {
		if !strings.Contains(got["#members"], nd.ID) {
			t.Errorf("members table %q lacks %s", got["#members"], nd.ID)
		}
	}
	if strings.Count(got["#members"], "UP") != 3 || !strings.Contains(got["#members"], "leader") {
		t.Errorf("members table %q: want 3 members UP and a leader", got["#members"])
	}
	if got["#emergency"] != "" {
		t.Errorf("EMERGENCY banner shown while renewals are above the threshold: %q", got["#emergency"])
	}

	// Most instances stop renewing: self-preservation comes on (before their
	// 5 s leases run out) and the page says EMERGENCY.
	r.pause(keys[:7]...)
	WaitFor(t, 10*time.Second, func() bool {
		ls, ok := leases(t, leader)
		return ok && ls.SelfPreservationActive
	}, "self-preservation on")
	got = page(t, ctx, url, "dashboard-emergency.png", "#emergency", "#leases", "#registry-summary")
	if !strings.Contains(got["#emergency"], "EMERGENCY!") || !strings.Contains(got["#emergency"], "RENEWALS ARE LESSER THAN THRESHOLD") {
		t.Errorf("banner %q, want Eureka's EMERGENCY text", got["#emergency"])
	}
	if !strings.Contains(got["#leases"], "ACTIVE") {
		t.Errorf("leases table %q does not say self-preservation is ACTIVE", got["#leases"])
	}
	if !strings.Contains(got["#registry-summary"], "10 instances") {
		t.Errorf("summary %q: self-preservation must keep all 10 instances", got["#registry-summary"])
	}
}
