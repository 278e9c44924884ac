//go:build chaos

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// TestRegionPropagationCost measures how long a change in a remote region
// takes to reach the local cluster's regions= reads, with default flags
// (production Raft timings, the default fetch interval): a heureka region
// with a few instances and with 10,000 just registered (their changes
// still in its delta), and an eureka-server region. It asserts nothing on
// time; BENCHMARKS.md, "Remote regions", has the figures.
//
//	go test -tags chaos ./e2e -run '^TestRegionPropagationCost$' -count=1 -timeout 30m -v
func TestRegionPropagationCost(t *testing.T) {
	java, jar := eurekaServerTools(t, "remote region propagation cost")
	legacyAddrs := []string{FreeAddr(t), FreeAddr(t), FreeAddr(t)}
	var legacyURLs []string
	for _, a := range legacyAddrs {
		legacyURLs = append(legacyURLs, "http://"+a+"/eureka/")
	}
	for i, a := range legacyAddrs {
		host, port, _ := strings.Cut(a, ":")
		// Its readOnly cache off: a stock eureka-server serves its delta
		// from a cache refreshed every 30 s, which would add up to 30 s
		// of its own to what is measured here (heureka's fetch interval).
		es := launch.EurekaServer{Jar: jar, JVMArgs: jvmArgs, Host: host, Port: port, Peers: legacyURLs,
			Properties: []string{"--eureka.server.my-url=" + legacyURLs[i], "--eureka.server.use-read-only-response-cache=false", esCacheExpiry}}
		p := StartProc(t, fmt.Sprintf("legacy%d", i+1), exec.Command(java, es.Argv()...))
		if err := launch.WaitEurekaServer(context.Background(), "http://"+a, 3*clientTimeout, p.Running); err != nil {
			t.Fatalf("legacy %d: %v", i+1, err)
		}
	}
	west := StartCluster(t, 3, Options{DefaultRaftTimings: true})
	west.WaitLeader(t, 30*time.Second)
	east := StartCluster(t, 3, Options{DefaultRaftTimings: true, ExtraArgs: []string{
		"--remote-region", "west=" + serviceURLs(west.Nodes),
		"--remote-region", "legacy=" + strings.Join(legacyURLs, ","),
	}})
	reader := east.Followers(east.WaitLeader(t, 30*time.Second))[0]

	RegisterJSON(t, west.Nodes[0].BaseURL(), "WONLY", "w-1", regionLease)
	RegisterJSON(t, "http://"+legacyAddrs[0], "LONLY", "l-0", regionLease)
	WaitFor(t, 2*time.Minute, func() bool {
		code, a, _, err := regionsRead(reader.BaseURL(), "apps", "west")
		return err == nil && code == 200 && len(missingKeys(a, []string{"WONLY/w-1"})) == 0
	}, "east's copy of west")

	small := regionChangeSamples(t, west.Nodes[0], reader, "/eureka/apps?regions=west", 200)
	t.Logf("RESULT heureka region, 1 instance, regions=west: %s", latencySummary(small))

	var regs []reg
	for i := 0; i < 10000; i++ {
		regs = append(regs, reg{app: fmt.Sprintf("bulk-%03d", i/20), id: fmt.Sprintf("bulk-%05d", i), extra: regionLease})
	}
	registerAll(t, west.Nodes[0].BaseURL(), regs, 16)
	WaitFor(t, 2*time.Minute, func() bool {
		code, a, _, err := regionsRead(reader.BaseURL(), "apps", "west")
		return err == nil && code == 200 && len(a.Instances) >= 10001
	}, "east's copy of west's 10,000")
	bulk := regionChangeSamples(t, west.Nodes[0], reader, "/eureka/apps?regions=west", 100)
	t.Logf("RESULT heureka region, 10,001 instances, regions=west (a 10,001-instance document per read): %s", latencySummary(bulk))
	app := regionChangeSamples(t, west.Nodes[0], reader, "/eureka/apps/WONLY", 100)
	t.Logf("RESULT heureka region, 10,001 instances, /apps/WONLY (the copy's application): %s", latencySummary(app))

	var legacy []time.Duration
	for i := 1; i <= 5; i++ {
		key := fmt.Sprintf("LONLY/l-%d", i)
		RegisterJSON(t, "http://"+legacyAddrs[i%3], "LONLY", fmt.Sprintf("l-%d", i), regionLease)
		start := time.Now()
		WaitFor(t, 2*time.Minute, func() bool {
			code, a, _, err := regionsRead(reader.BaseURL(), "apps", "legacy")
			return err == nil && code == 200 && len(missingKeys(a, []string{key})) == 0
		}, key+" in east's regions=legacy reads")
		legacy = append(legacy, time.Since(start))
	}
	t.Logf("RESULT eureka-server region (30 s fetch interval): %s", latencySummary(legacy))
}
