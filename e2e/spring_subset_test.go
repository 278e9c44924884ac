package e2e

// Subset subscription (heureka.subset, docs/spring.md): a Spring app that
// names the 5 applications it calls holds only those in its Eureka
// client's registry copy, however large the registry; the stock client
// holds all of it. Two caller apps (e2e/springcaller) run side by side
// against one cluster: the stock one (heureka.enabled=false) and one with
// heureka.subscribe naming 5 applications and heureka.subset=true. Each
// reports its heap in use after full collections (GET /heap) before the
// registry is filled and after; the difference is the memory its registry
// copy holds. The subset app's must be under a tenth of the stock one's,
// and a cancel or a registration of an instance of its 5 must be in its
// copy within p99 ≤ 1 s.
//
// By default the registry is 400 applications of 25 instances (10,000: at
// 5,000 the subset app's reading, half a megabyte with the noise of a
// heap reading, was close to a tenth of the stock one's);
// HEUREKA_SPRING_SUBSET_APPS=2000 is the 50,000 of the figures in
// BENCHMARKS.md:
//
//	HEUREKA_SPRING_SUBSET_APPS=2000 go test ./e2e -run TestSpringStarterSubsetMemory -v -timeout 20m

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// callerHeap is the caller app's GET /heap.
type callerHeap struct {
	Used      int64 `json:"used"`
	Committed int64 `json:"committed"`
}

// settledHeap is the caller's heap in use after full collections: the
// smallest of three readings (each of three collections), after one to
// warm the endpoint up.
func settledHeap(t *testing.T, base string) int64 {
	t.Helper()
	best := int64(-1)
	for i := range 4 {
		h, err := callerGet[callerHeap](base, "/heap")
		if err != nil {
			t.Fatalf("GET %s/heap: %v", base, err)
		}
		if i > 0 && (best < 0 || h.Used < best) {
			best = h.Used
		}
	}
	return best
}

func TestSpringStarterSubsetMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and two JVMs")
	}
	java, jar, err := callerTools()
	ToolOrSkip(t, "Spring Boot starter subset", err)
	nApps, perApp, watched := 400, 25, 5
	if v, err := strconv.Atoi(os.Getenv("HEUREKA_SPRING_SUBSET_APPS")); err == nil && v >= watched {
		nApps = v
	}
	reps := 20
	if v, err := strconv.Atoi(os.Getenv("HEUREKA_SPRING_REPS")); err == nil && v > 0 {
		reps = v
	}
	appName := func(a int) string { return fmt.Sprintf("SUB-%04d", a) }
	var sub []string
	for a := range watched {
		sub = append(sub, appName(a*nApps/watched)) // spread over the registry
	}

	c := StartCluster(t, 3, Options{})
	leader := c.WaitLeader(t, 15*time.Second)
	var zone []string
	for _, nd := range append(c.Followers(leader), leader) {
		zone = append(zone, nd.BaseURL()+"/eureka/")
	}
	// The heap may grow to 1 GB: the stock client reads the whole registry.
	jvm := append(slices.Clone(jvmArgs), "-Xmx1g")
	common := []string{"--caller.target=", "--logging.level.io.heureka=INFO"}
	// The stock caller fetches every 5 s instead of 30 s, so the test waits
	// less; the copy it holds is the same.
	_, stockBase := startCallerAppJVM(t, java, jar, jvm, zone, false,
		append(common, "--eureka.client.registry-fetch-interval-seconds=5")...)
	subCaller, subBase := startCallerAppJVM(t, java, jar, jvm, zone, true,
		append(common, "--heureka.subset=true", "--heureka.subscribe="+strings.Join(sub, ","))...)
	for _, b := range []string{stockBase, subBase} {
		WaitFor(t, 120*time.Second, func() bool {
			_, err := viewOf(b)
			return err == nil
		}, "the caller app "+b+" answering")
	}
	WaitFor(t, 30*time.Second, func() bool {
		ch, err := chosenOf(subBase)
		return err == nil && ch.Subset && ch.Following
	}, "the subset caller following heureka")
	// One instance of a watched application comes and goes before the
	// first reading, so that both apps have loaded the code that reads
	// instances into their copy: the readings differ by the registry only.
	lease := map[string]any{"leaseInfo": map[string]any{"renewalIntervalInSecs": 30, "durationInSecs": 1800}}
	bothSee := func(n int, what string) {
		for _, b := range []string{stockBase, subBase} {
			WaitFor(t, 90*time.Second, func() bool {
				v, err := viewOf(b)
				return err == nil && v.Instances == n
			}, what+" in "+b)
		}
	}
	if err := TryRegisterJSON(leader.BaseURL(), sub[0], "sub-warm", lease); err != nil {
		t.Fatal(err)
	}
	bothSee(1, "the warm-up instance")
	if code, body, _, err := TryDo("DELETE", leader.URL("/eureka/apps/"+sub[0]+"/sub-warm"), nil); err != nil || code != 200 {
		t.Fatalf("DELETE the warm-up instance: %d %s %v", code, body, err)
	}
	bothSee(0, "no instance")
	stock0, sub0 := settledHeap(t, stockBase), settledHeap(t, subBase)

	var regs []reg
	for a := range nApps {
		for i := range perApp {
			regs = append(regs, reg{app: appName(a), id: fmt.Sprintf("sub-%04d-%02d", a, i), extra: lease})
		}
	}
	began := time.Now()
	registerAll(t, leader.BaseURL(), regs, 16)
	t.Logf("registered %d instances of %d applications in %v", len(regs), nApps, time.Since(began).Round(time.Millisecond))

	// The stock client has them all after its next fetches;
	// the subset one has its 5 applications and nothing else.
	WaitFor(t, 5*time.Minute, func() bool {
		v, err := viewOf(stockBase)
		return err == nil && v.Instances == len(regs)
	}, "the stock caller's copy holding the whole registry")
	WaitFor(t, 30*time.Second, func() bool {
		v, err := viewOf(subBase)
		return err == nil && v.Instances == watched*perApp && len(v.Apps) == watched
	}, "the subset caller's copy holding its applications")
	stock1, sub1 := settledHeap(t, stockBase), settledHeap(t, subBase)
	mb := func(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }
	stockReg, subReg := stock1-stock0, sub1-sub0
	t.Logf("heap after collection, before and after the registry was filled: stock %s -> %s (registry %s); subset %s -> %s (registry %s)",
		mb(stock0), mb(stock1), mb(stockReg), mb(sub0), mb(sub1), mb(subReg))
	t.Logf("per instance held: stock %.0f bytes (%d), subset %.0f bytes (%d)",
		float64(stockReg)/float64(len(regs)), len(regs), float64(subReg)/float64(watched*perApp), watched*perApp)
	if stockReg <= 0 || subReg*10 >= stockReg {
		t.Errorf("the subset caller's registry copy takes %s, the stock caller's %s: want under a tenth", mb(subReg), mb(stockReg))
	}

	// Changes of its applications reach the subset caller's copy: a cancel,
	// then the same instance registered again, in each application in turn.
	count := func(app string) int {
		v, err := viewOf(subBase)
		if err != nil {
			return -1
		}
		return v.Apps[app]
	}
	waitCount := func(app string, want int, since time.Time) time.Duration {
		for time.Since(since) < 60*time.Second {
			if count(app) == want {
				return time.Since(since)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("the subset caller's copy has %d instances of %s 60 s after the change, want %d", count(app), app, want)
		return 0
	}
	var gone, back ssStats
	for i := range reps {
		app := sub[i%watched]
		id := fmt.Sprintf("sub-%s-%02d", strings.TrimPrefix(app, "SUB-"), i%perApp)
		sent := time.Now()
		if code, body, _, err := TryDo("DELETE", leader.URL("/eureka/apps/"+app+"/"+id), nil); err != nil || code != 200 {
			t.Fatalf("DELETE %s/%s: %d %s %v", app, id, code, body, err)
		}
		gone = append(gone, waitCount(app, perApp-1, sent))
		sent = time.Now()
		if err := TryRegisterJSON(leader.BaseURL(), app, id, lease); err != nil {
			t.Fatal(err)
		}
		back = append(back, waitCount(app, perApp, sent))
	}
	t.Logf("subset caller, its applications' changes in its copy: cancel %v; registration %v", gone, back)
	if p := gone.pct(99); p > time.Second {
		t.Errorf("cancel: p99 %v, want at most 1s (%v)", p, gone)
	}
	if p := back.pct(99); p > time.Second {
		t.Errorf("registration: p99 %v, want at most 1s (%v)", p, back)
	}
	var starterLines []string
	for _, l := range subCaller.Lines() {
		if strings.Contains(l, "heureka:") {
			starterLines = append(starterLines, l)
		}
	}
	t.Logf("the subset caller's starter lines:\n%s", strings.Join(starterLines, "\n"))
}
