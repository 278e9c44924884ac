package compose

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/e2e"
)

// regions: the regions profile as docs/regions.md ("Two regions with
// compose") runs it, with the HEUREKA_REMOTE_REGIONS and the register body
// given there. The instance registered in west through west1's published
// port is served by every east node to regions=west reads, and /v1/status
// lists the region; once west1..3 are stopped, east goes on serving west's
// copy, marked stale.
func TestComposeRegions(t *testing.T) {
	regions := docValue(t, `HEUREKA_REMOTE_REGIONS='([^']*)'`)
	body := docValue(t, `apps/WONLY \\\s+-d '([^']*)'`)
	p := newProject(t, "heurekaregions", 21841)
	p.env = append(p.env, "HEUREKA_REMOTE_REGIONS="+regions)
	start := time.Now()
	p.up("regions")
	t.Logf("east and west up in %v", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	if code, b, _, err := do(client, "POST", p.url("west1")+"/eureka/apps/WONLY", []byte(body)); err != nil || code != http.StatusNoContent {
		t.Fatalf("register the docs' instance in west: %d %s %v", code, b, err)
	}
	for _, svc := range defaultServices {
		p.waitRegionRead(svc, "WONLY/wonly-1", "")
		p.waitRegionStatus(svc, true)
		// Reads without regions= stay local.
		code, body, _, err := do(client, "GET", p.url(svc)+"/eureka/apps", nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s: GET /eureka/apps: %d %v", svc, code, err)
		}
		if a, err := e2e.ParseApps(body); err != nil || a.ByKey()["WONLY/wonly-1"].ID != "" {
			t.Fatalf("%s: GET /eureka/apps without regions= lists west's instance (%v)", svc, err)
		}
	}

	t.Logf("west's instance served by every east node to regions=west reads after %v", time.Since(start).Round(time.Millisecond))

	// docker stop of west, as the docs' step does it.
	ids := strings.Fields(p.must(time.Minute, "ps", "-q", "west1", "west2", "west3"))
	if len(ids) != 3 {
		t.Fatalf("west containers %v, want three", ids)
	}
	start = time.Now()
	docker(t, append([]string{"stop"}, ids...)...)
	t.Logf("west stopped in %v", time.Since(start).Round(time.Millisecond))
	for _, svc := range defaultServices {
		p.waitRegionStatus(svc, false)
		p.waitRegionRead(svc, "WONLY/wonly-1", "west")
	}
	t.Logf("west's copy served marked stale by every east node %v after the stop", time.Since(start).Round(time.Millisecond))
}

// waitRegionRead waits until svc's GET /eureka/apps?regions=west answers
// 200 with key (APP/id) and X-Heureka-Region-Stale equal to stale.
func (p *project) waitRegionRead(svc, key, stale string) {
	p.t.Helper()
	var last string
	ok := e2e.Eventually(60*time.Second, func() bool {
		code, body, hdr, err := do(client, "GET", p.url(svc)+"/eureka/apps?regions=west", nil)
		if err != nil || code != http.StatusOK {
			last = fmt.Sprintf("%d %v %.200s", code, err, body)
			return false
		}
		a, err := e2e.ParseApps(body)
		_, listed := a.ByKey()[key]
		last = fmt.Sprintf("listed %v (%v), %s %q", listed, err, "X-Heureka-Region-Stale", hdr.Get("X-Heureka-Region-Stale"))
		return err == nil && listed && hdr.Get("X-Heureka-Region-Stale") == stale
	})
	if !ok {
		p.t.Fatalf("%s: GET /eureka/apps?regions=west never listed %s with X-Heureka-Region-Stale %q: last %s", svc, key, stale, last)
	}
}

// regionStatus is a remote region as /v1/status lists it.
type regionStatus struct {
	Name      string `json:"name"`
	Loaded    bool   `json:"loaded"`
	Reachable bool   `json:"reachable"`
	Instances int    `json:"instances"`
}

// waitRegionStatus waits until svc's /v1/status lists west, loaded, with
// reachable as given.
func (p *project) waitRegionStatus(svc string, reachable bool) {
	p.t.Helper()
	var last string
	ok := e2e.Eventually(30*time.Second, func() bool {
		code, body, _, err := do(client, "GET", p.url(svc)+"/v1/status", nil)
		var st struct {
			Regions []regionStatus `json:"regions"`
		}
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &st) != nil {
			last = fmt.Sprintf("%d %v", code, err)
			return false
		}
		last = fmt.Sprintf("%+v", st.Regions)
		return len(st.Regions) == 1 && st.Regions[0].Name == "west" && st.Regions[0].Loaded && st.Regions[0].Reachable == reachable
	})
	if !ok {
		p.t.Fatalf("%s: /v1/status never listed west loaded, reachable %v: last %s", svc, reachable, last)
	}
}

// docValue is what re's group matches first in docs/regions.md's compose
// section (cmd/heureka/compose_test.go checks its HEUREKA_REMOTE_REGIONS
// against the compose file).
func docValue(t *testing.T, re string) string {
	t.Helper()
	data, err := os.ReadFile(repoPath("docs/regions.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(data), "\n## Two regions with compose")
	m := regexp.MustCompile(re).FindStringSubmatch(sec)
	if m == nil {
		t.Fatalf("docs/regions.md, Two regions with compose: nothing matches %s", re)
	}
	return m[1]
}
