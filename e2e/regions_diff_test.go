package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// regionsDiffAllowed lists the regions cases whose difference is
// intentional, with the section of docs/eureka-compat.md that says why.
var regionsDiffAllowed = map[string]string{
	// eureka-server's transparent fallback also merges every remote region
	// into a plain /apps; heureka keeps it local.
	"apps/plain": "#remote-regions",
}

var deltaVersion = regexp.MustCompile(`"versions__delta": "[^"]*"`)

// TestEurekaRegionsDifferential sends the same remote-region reads to a
// real eureka-server and to heureka, both copying one remote region (a
// heureka node, "west") with the same application whitelist, and compares
// the answers as the differential test does.
func TestEurekaRegionsDifferential(t *testing.T) {
	java, jar := eurekaServerTools(t, "eureka-server regions differential")
	west := StartCluster(t, 1, Options{})
	west.WaitLeader(t, 15*time.Second)
	wbase := west.Nodes[0].BaseURL()
	for _, r := range [][2]string{{"WONLY", "w-1"}, {"WONLY", "w-2"}, {"SHARED", "s-w"}, {"WOTHER", "o-1"}} {
		code, body, _ := Do(t, "POST", wbase+"/eureka/apps/"+r[0], []byte(diffInstanceJSON(r[0], r[1], "")), "Content-Type", "application/json")
		if code != 204 {
			t.Fatalf("register %s/%s in west: %d %s", r[0], r[1], code, body)
		}
	}
	if code, _, _ := Do(t, "PUT", wbase+"/eureka/apps/WONLY/w-2/status?value=OUT_OF_SERVICE", nil); code != 200 {
		t.Fatalf("w-2 out of service in west: %d", code)
	}

	host, port, _ := strings.Cut(FreeAddr(t), ":")
	es := launch.EurekaServer{Jar: jar, JVMArgs: jvmArgs, Host: host, Port: port, Properties: []string{
		"--eureka.server.use-read-only-response-cache=false",
		"--eureka.server.remote-region-urls-with-name.west=" + wbase + "/eureka/",
		"--eureka.server.remote-region-app-whitelist.west=WONLY,SHARED",
	}}
	p := StartProc(t, "eurekaserver", exec.Command(java, es.Argv()...))
	if err := launch.WaitEurekaServer(context.Background(), es.URL(), 2*clientTimeout, p.Running); err != nil {
		t.Fatalf("%v; tail:\n%s", err, p.Tail(40))
	}
	ref := es.URL()
	c := StartCluster(t, 1, Options{ExtraArgs: append([]string{"--use-read-only-response-cache=false",
		"--remote-region", "west=" + wbase + "/eureka/", "--remote-region-whitelist", "west=WONLY,SHARED"}, edCacheArgs...)})
	c.WaitLeader(t, 15*time.Second)
	ours := c.Nodes[0].BaseURL()

	for _, base := range []string{ref, ours} {
		for _, r := range [][2]string{{"SHARED", "s-1"}, {"LOCAL", "l-1"}} {
			code, body, _ := Do(t, "POST", base+"/eureka/apps/"+r[0], []byte(diffInstanceJSON(r[0], r[1], "")), "Content-Type", "application/json")
			if code != 204 {
				t.Fatalf("register %s/%s at %s: %d %s", r[0], r[1], base, code, body)
			}
		}
	}
	// Both copied west: eureka-server at its start, heureka when its
	// regions= reads stop answering 403.
	WaitFor(t, 30*time.Second, func() bool {
		code, _, _, err := TryDo("GET", ours+"/eureka/apps?regions=west", nil)
		return err == nil && code == 200
	}, "heureka's copy of west")

	js := []string{"Accept", "application/json"}
	xm := []string{"Accept", "application/xml"}
	get := func(name, path string, accept []string) diffCase {
		return diffCase{name: name, method: "GET", path: path, headers: accept}
	}
	cases := []diffCase{
		get("apps/regions/json", "/eureka/apps?regions=west", js),
		get("apps/regions/xml", "/eureka/apps?regions=west", xm),
		get("apps/regions/upper-case", "/eureka/apps?regions=WEST", js),
		get("apps/regions/unknown", "/eureka/apps?regions=nowhere", js),
		get("apps/regions/with-unknown", "/eureka/apps?regions=nowhere,west", js),
		get("delta/regions/json", "/eureka/apps/delta?regions=west", js),
		get("delta/regions/xml", "/eureka/apps/delta?regions=west", xm),
		get("app/fallback/json", "/eureka/apps/WONLY", js),
		get("app/fallback-not-whitelisted", "/eureka/apps/WOTHER", js),
		get("app/local-only", "/eureka/apps/SHARED", js),
		get("instance/fallback", "/eureka/apps/WONLY/w-2", js),
		get("apps/plain", "/eureka/apps", js),
	}
	compareServers(t, "regions differential", ref, ours, cases, regionsDiffAllowed, func(tc diffCase, r *diffResult) {
		if strings.HasPrefix(tc.name, "delta/") {
			// eureka-server numbers delta builds from 1, heureka gives its
			// log index (docs/eureka-compat.md, "Delta"); the rest must match.
			r.Body = deltaVersion.ReplaceAllString(r.Body, `"versions__delta": "<version>"`)
		}
	})
}
