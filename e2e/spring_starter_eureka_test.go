package e2e

// The Spring caller with spring-boot-starter-heureka against three Spring
// Cloud eureka-server peers (e2e/eurekaserver) instead of heureka: the
// starter's first blocking query is answered without X-Heureka-Index, so it
// logs one line saying so and leaves the app exactly as without it: the
// Eureka client's own registry fetch and LoadBalancer's cache. The app must
// work as the stock one does: it calls every instance, and a cancel and a
// new registration reach it through the Eureka client's fetch. With
// heureka.subset the starter reads the subscribed applications itself at
// the client's fetch interval, as the client would have fetched them.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSpringStarterFallsBackOnEurekaServer: the caller with the starter
// against a ring of three eureka-server peers. The fetch interval and
// LoadBalancer's cache are 2 s here instead of 30 s and 35 s (the same code
// paths, so the test takes seconds); the starter is at its default log
// level, the level an application runs it at.
func TestSpringStarterFallsBackOnEurekaServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three eureka-servers and a JVM")
	}
	java, esJar := eurekaServerTools(t, "starter against eureka-server")
	_, jar, err := callerTools()
	ToolOrSkip(t, "starter against eureka-server", err)

	addrs := []string{FreeAddr(t), FreeAddr(t), FreeAddr(t)}
	startEurekaRing(t, java, esJar, addrs, nil)
	var zone []string
	for _, a := range addrs {
		zone = append(zone, "http://"+a+"/eureka/")
	}

	// Three instances, each registered with and heartbeated to one peer
	// (eureka-server replicates them to the others), plus a fourth
	// registered later.
	var targets []*ssTarget
	for i := range 4 {
		tg := &ssTarget{id: fmt.Sprintf("es-%02d", i+1), addr: FreeAddr(t), lease: 30}
		tg.start(t)
		t.Cleanup(tg.kill)
		targets = append(targets, tg)
	}
	beating := make([]bool, len(targets))
	beatMu := make(chan struct{}, 1)
	setBeating := func(i int, on bool) {
		beatMu <- struct{}{}
		beating[i] = on
		<-beatMu
	}
	peerOf := func(i int) string { return "http://" + addrs[i%len(addrs)] }
	for i, tg := range targets[:3] {
		if err := tg.register(peerOf(i)); err != nil {
			t.Fatal(err)
		}
		setBeating(i, true)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 { // at most about 1,000 s; the test ends long before
			beatMu <- struct{}{}
			for i, tg := range targets {
				if beating[i] {
					code, _, _, err := TryDo("PUT", peerOf(i)+"/eureka/apps/"+tg.key(), nil)
					if err == nil && code == 404 {
						_ = tg.register(peerOf(i))
					}
				}
			}
			<-beatMu
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	// Every peer lists the three before the caller starts.
	for _, a := range addrs {
		WaitFor(t, 60*time.Second, func() bool {
			apps, err := TryGetApps("http://" + a)
			return err == nil && len(apps.Instances) == 3
		}, "eureka-server "+a+" listing the three instances")
	}

	// Two callers: the default starter, and one holding only the
	// application it calls (heureka.subset: the Eureka client's own fetch
	// is off, so the starter reads the subscribed documents itself, at the
	// fetch interval when the server has no blocking queries).
	fast := []string{"--logging.level.io.heureka=INFO",
		"--eureka.client.registry-fetch-interval-seconds=2", "--spring.cloud.loadbalancer.cache.ttl=2s"}
	type esCaller struct {
		name   string
		proc   *Proc
		base   string
		subset bool
	}
	var callers []esCaller
	for _, subset := range []bool{false, true} {
		extra, name := fast, "default"
		if subset {
			extra, name = append(slices.Clone(fast), "--heureka.subset=true", "--heureka.subscribe="+ssApp+",NOT-REGISTERED"), "subset"
		}
		p, base := startCallerApp(t, java, jar, zone, true, extra...)
		callers = append(callers, esCaller{name, p, base, subset})
	}
	for _, cl := range callers {
		WaitFor(t, 120*time.Second, func() bool {
			ch, err := chosenOf(cl.base)
			if err != nil {
				return false
			}
			for _, tg := range targets[:3] {
				if ch.Now-ch.Last[tg.addr] > 1000 {
					return false
				}
			}
			return true
		}, "the "+cl.name+" caller choosing every instance")
		WaitFor(t, 30*time.Second, func() bool {
			ch, err := chosenOf(cl.base)
			return err == nil && ch.FellBack
		}, "the "+cl.name+" caller's starter giving way to the stock fetch")
	}

	// A cancel and a registration reach the callers by the Eureka client's
	// own fetch (at most 2 s + 2 s of LoadBalancer's cache, and the delta
	// of eureka-server's peer replication), or the subset starter's
	// reading at the same interval.
	gone, back := targets[0], targets[3]
	setBeating(0, false)
	sent := time.Now().UnixMilli()
	if code, body, _, err := TryDo("DELETE", peerOf(1)+"/eureka/apps/"+gone.key(), nil); err != nil || code != 200 {
		t.Fatalf("DELETE %s at eureka-server: %d %s %v", gone.key(), code, body, err)
	}
	for i := range addrs {
		WaitFor(t, 60*time.Second, func() bool {
			apps, err := TryGetApps(peerOf(i))
			return err == nil && !slices.ContainsFunc(apps.Instances, func(in AppInstance) bool { return in.ID == gone.id })
		}, "eureka-server "+addrs[i]+" dropping the cancelled instance")
		t.Logf("eureka-server %d dropped it %dms after the cancel", i+1, time.Now().UnixMilli()-sent)
	}
	// each waits until every caller has followed a change (wait) and logs
	// how long after it took. The Eureka client sometimes takes 30 s and more
	// to follow a cancel at eureka-server (in two runs of four, with the
	// same settings, the starter idle): the bound is 120 s.
	each := func(what string, wait func(r *ssRig) (time.Duration, bool)) {
		for _, cl := range callers {
			d, ok := wait(&ssRig{t: t, base: cl.base})
			if !ok {
				t.Fatalf("%s: the %s caller has not followed it 120 s after", what, cl.name)
			}
			t.Logf("%s: the %s caller followed it %v after (fetch every 2 s, cache 2 s)", what, cl.name, d)
		}
	}
	each("cancel at eureka-server", func(r *ssRig) (time.Duration, bool) { return r.stoppedChoosing(gone.addr, sent, 120*time.Second) })
	if err := back.register(peerOf(3)); err != nil {
		t.Fatal(err)
	}
	reg := time.Now().UnixMilli()
	setBeating(3, true)
	each("registration at eureka-server", func(r *ssRig) (time.Duration, bool) { return r.choosingAgain(back.addr, reg, 120*time.Second) })

	want := []string{targets[1].addr, targets[2].addr, targets[3].addr}
	slices.Sort(want)
	for _, cl := range callers {
		ch, err := chosenOf(cl.base)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s caller: starter=%v following=%v fellBack=%v subset=%v changes=%d refreshes=%d calls=%d failed=%d listed=%v",
			cl.name, ch.Starter, ch.Following, ch.FellBack, ch.Subset, ch.Changes, ch.Refreshes, ch.Calls, ch.Failures, ch.Listed)
		// The default starter stops and leaves the client's fetch; the
		// subset one goes on reading its documents.
		stopped := ch.Starter && !ch.Following && ch.FellBack && !ch.Subset && ch.Changes == 0 && ch.Refreshes == 0
		if cl.subset {
			stopped = ch.Starter && ch.Following && ch.FellBack && ch.Subset
		}
		if !stopped {
			t.Errorf("%s caller: starter=%v following=%v fellBack=%v subset=%v changes=%d refreshes=%d, want the starter loaded and fallen back",
				cl.name, ch.Starter, ch.Following, ch.FellBack, ch.Subset, ch.Changes, ch.Refreshes)
		}
		if !slices.Equal(ch.Listed, want) {
			t.Errorf("the %s caller's Eureka client lists %v, want %v", cl.name, ch.Listed, want)
		}
		// One line from the starter, at its default level, saying why.
		var starterLines []string
		for _, l := range cl.proc.Lines() {
			if strings.Contains(l, "heureka:") || strings.Contains(l, "HeurekaRegistryWatcher") {
				starterLines = append(starterLines, l)
			}
		}
		for _, l := range starterLines {
			t.Logf("%s caller's starter: %s", cl.name, l)
		}
		what := "stock registry fetch"
		if cl.subset {
			what = "the subscribed applications are fetched every 2 s"
		}
		if len(starterLines) != 1 || !strings.Contains(starterLines[0], "without X-Heureka-Index") ||
			!strings.Contains(starterLines[0], what) {
			t.Errorf("the %s caller's starter logged %d lines, want exactly one saying the server answered without X-Heureka-Index and %q",
				cl.name, len(starterLines), what)
		}
	}
}
