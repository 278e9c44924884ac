package e2e

// spring-boot-starter-heureka (clients/spring-boot-starter-heureka,
// docs/spring.md): a Spring Boot app calling a service of three instances
// through Spring Cloud LoadBalancer (e2e/springcaller, a @LoadBalanced
// RestTemplate over Spring Cloud Netflix's Eureka client) must stop choosing
// an instance within a second of heureka dropping it: cancelled (DELETE)
// while the app calls in a loop, or killed so that its 3 s lease lapses and
// heureka evicts it. The instances are small HTTP servers in this test,
// registered with their real ports and heartbeated by the test twice a
// second.
//
// The time measured is from the change (the DELETE's sending, or the moment
// a blocking read of the instance's record returns 404 after the eviction)
// until the last time the app's LoadBalancer chose the instance (the app
// records each chosen address before it calls it; the clocks are the same
// machine's).
//
// The same run with heureka.enabled=false is the stock client (the starter's
// auto-configuration does not load: the 30 s registry fetch and
// LoadBalancer's 35 s cache). It takes minutes and asserts nothing, so it
// runs only with HEUREKA_SPRING_STOCK=1:
//
//	HEUREKA_SPRING_STOCK=1 go test ./e2e -run TestSpringStarterStock -v -timeout 20m

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	callerJar  = "springcaller/target/springcaller.jar"
	ssApp      = "SS-TARGET"
	ssVIP      = "ss-target"
	ssLease    = 3 // seconds
	ssQuiet    = 1500 * time.Millisecond
	ssStockEnv = "HEUREKA_SPRING_STOCK"
)

// ssArgs: leases end at their deadline (heureka evicts then, and at least
// every second). Self-preservation would hold back evictions of one
// instance in three, which this test makes over and over, and so would the
// eviction cap (one of three per renewal-rate window, by default a minute:
// docs/leases.md, "The eviction cap"), so the window is 2 s.
var ssArgs = []string{"--eviction-interval", "1s", "--enable-self-preservation=false", "--renewal-rate-window", "2s"}

func callerTools() (java, jar string, err error) {
	if java, err = exec.LookPath("java"); err != nil {
		return "", "", fmt.Errorf("java is not installed (%v)", err)
	}
	jar, _ = filepath.Abs(callerJar)
	if _, err := os.Stat(jar); err != nil {
		return "", "", fmt.Errorf("e2e/%s is not built (run `make deps`): %v", callerJar, err)
	}
	return java, jar, nil
}

// ssTarget is one instance of the called service: an HTTP server on a
// fixed port that can be killed (its listener closed) and started again.
type ssTarget struct {
	id    string
	addr  string // 127.0.0.1:port
	lease int    // seconds; 0: ssLease
	mu    sync.Mutex
	srv   *http.Server
}

func (s *ssTarget) start(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	up := s.srv != nil
	s.mu.Unlock()
	if up {
		return
	}
	var ln net.Listener
	var err error
	for range 50 { // a just-closed port may take a moment to be free
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("target %s: %v", s.id, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(s.id))
	})}
	go func() { _ = srv.Serve(ln) }()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

func (s *ssTarget) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

func (s *ssTarget) key() string { return ssApp + "/" + s.id }

func (s *ssTarget) register(nodeURL string) error {
	_, port, _ := strings.Cut(s.addr, ":")
	p, _ := strconv.Atoi(port)
	lease := s.lease
	if lease == 0 {
		lease = ssLease
	}
	return TryRegisterJSON(nodeURL, ssApp, s.id, map[string]any{
		"hostName": "127.0.0.1", "ipAddr": "127.0.0.1", "vipAddress": ssVIP,
		"port":      map[string]any{"$": p, "@enabled": "true"},
		"leaseInfo": map[string]any{"renewalIntervalInSecs": 1, "durationInSecs": lease},
	})
}

// callerChosen is the caller app's GET /chosen.
type callerChosen struct {
	Now       int64            `json:"now"`
	Last      map[string]int64 `json:"last"`
	Times     map[string]int64 `json:"times"`
	Listed    []string         `json:"listed"`
	Calls     int64            `json:"calls"`
	Failures  int64            `json:"failures"`
	Starter   bool             `json:"starter"`
	Following bool             `json:"following"`
	FellBack  bool             `json:"fellBack"`
	Subset    bool             `json:"subset"`
	Changes   int64            `json:"changes"`
	Refreshes int64            `json:"refreshes"`
}

func chosenOf(base string) (callerChosen, error) { return callerGet[callerChosen](base, "/chosen") }

// callerGet decodes the caller app's JSON answer to GET path.
func callerGet[T any](base, path string) (T, error) {
	var v T
	code, body, _, err := TryDo("GET", base+path, nil)
	if err != nil {
		return v, err
	}
	if code != 200 {
		return v, fmt.Errorf("GET %s: %d", path, code)
	}
	return v, json.Unmarshal(body, &v)
}

// ssRig is a cluster, the targets, their heartbeats and the caller app.
type ssRig struct {
	t       *testing.T
	c       *Cluster
	targets []*ssTarget
	mu      sync.Mutex
	paused  map[*ssTarget]bool // no heartbeats
	writeTo *Node              // the node cancels go to
	zone    []*Node            // the caller's service URLs, in order
	caller  *Proc
	base    string
}

func startSSRig(t *testing.T, n int, starter bool, extraCallerArgs ...string) *ssRig {
	java, jar, err := callerTools()
	ToolOrSkip(t, "Spring Boot starter", err)
	r := &ssRig{t: t, paused: map[*ssTarget]bool{}}
	r.c = StartCluster(t, 3, Options{ExtraArgs: ssArgs})
	leader := r.c.WaitLeader(t, 15*time.Second)
	r.writeTo = leader
	// The followers' URLs first: the starter asks the first one, which a
	// test can then stop without an election.
	r.zone = append(r.c.Followers(leader), leader)
	for i := range n {
		tg := &ssTarget{id: fmt.Sprintf("ss-%02d", i+1), addr: FreeAddr(t)}
		tg.start(t)
		t.Cleanup(tg.kill)
		if err := tg.register(r.c.Nodes[i%3].BaseURL()); err != nil {
			t.Fatal(err)
		}
		r.targets = append(r.targets, tg)
	}
	r.startHeartbeats()

	var zone []string
	for _, nd := range r.zone {
		zone = append(zone, nd.BaseURL()+"/eureka/")
	}
	r.caller, r.base = startCallerApp(t, java, jar, zone, starter, extraCallerArgs...)
	// The caller reaches every instance (the stock one within its first fetches).
	WaitFor(t, 120*time.Second, func() bool {
		ch, err := chosenOf(r.base)
		if err != nil {
			return false
		}
		for _, tg := range r.targets {
			if ch.Now-ch.Last[tg.addr] > 1000 {
				return false
			}
		}
		return true
	}, "the caller choosing every instance")
	ch, _ := chosenOf(r.base)
	if ch.Starter != starter || (starter && !ch.Following) {
		t.Fatalf("caller: starter=%v following=%v fellBack=%v, want starter=%v following", ch.Starter, ch.Following, ch.FellBack, starter)
	}
	return r
}

// startCallerApp starts the caller app (e2e/springcaller) calling ssVIP
// through the service URLs zone, with the starter or (heureka.enabled=false)
// without; it returns the process and the app's base URL. The starter logs
// at DEBUG unless extra sets --logging.level.io.heureka. If the test
// fails, the starter's lines and the app's warnings are logged.
func startCallerApp(t *testing.T, java, jar string, zone []string, starter bool, extra ...string) (*Proc, string) {
	return startCallerAppJVM(t, java, jar, jvmArgs, zone, starter, extra...)
}

// startCallerAppJVM is startCallerApp with the JVM's options; extra may set
// the target (--caller.target=, empty: no calls) instead of ssVIP.
func startCallerAppJVM(t *testing.T, java, jar string, jvm, zone []string, starter bool, extra ...string) (*Proc, string) {
	addr := FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	args := append(slices.Clone(jvm), "-jar", jar,
		"--server.port="+port, "--server.address=127.0.0.1",
		"--eureka.client.service-url.defaultZone="+strings.Join(zone, ","))
	has := func(prefix string) bool {
		return slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, prefix) })
	}
	if !has("--caller.target=") {
		args = append(args, "--caller.target="+ssVIP)
	}
	if !has("--logging.level.io.heureka=") {
		args = append(args, "--logging.level.io.heureka=DEBUG")
	}
	if !starter {
		args = append(args, "--heureka.enabled=false")
	}
	args = append(args, extra...)
	name := "springcaller-starter"
	if !starter {
		name = "springcaller-stock"
	}
	caller := StartProc(t, name, exec.Command(java, args...))
	t.Cleanup(func() {
		if t.Failed() {
			var lines []string
			all, _ := os.ReadFile(caller.LogPath)
			for _, l := range strings.Split(string(all), "\n") {
				if strings.Contains(l, "heureka") || strings.Contains(l, " WARN ") || strings.Contains(l, " ERROR ") {
					lines = append(lines, l)
				}
			}
			if len(lines) > 200 {
				lines = lines[len(lines)-200:]
			}
			t.Logf("caller log, the starter's lines and warnings:\n%s", strings.Join(lines, "\n"))
		}
	})
	return caller, "http://" + addr
}

// startHeartbeats renews every instance that is not paused twice a second,
// across the nodes in turn, and registers it again when a node no longer
// knows it, as a Eureka client does (a heartbeat delayed on a loaded
// machine must not make the test lose an instance for good).
func (r *ssRig) startHeartbeats() {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for round := 0; ; round++ {
			for i, tg := range r.targets {
				// Under the lock: pause waits for a heartbeat under way, so
				// none re-registers an instance the test just cancelled.
				r.mu.Lock()
				if !r.paused[tg] {
					nd := r.c.Nodes[(round+i)%len(r.c.Nodes)]
					if nd.Paused() { // a hung node: the next one
						nd = r.c.Nodes[(round+i+1)%len(r.c.Nodes)]
					}
					code, _, _, err := TryDo("PUT", nd.URL("/eureka/apps/"+tg.key()), nil)
					if err == nil && code == http.StatusNotFound {
						_ = tg.register(nd.BaseURL())
					}
				}
				r.mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	r.t.Cleanup(func() { close(stop); <-done })
}

func (r *ssRig) pause(tg *ssTarget, paused bool) {
	r.mu.Lock()
	r.paused[tg] = paused
	r.mu.Unlock()
}

// longLeases registers every instance again with a 90 s lease, for tests
// where an outage or an election must not make heureka evict them.
func (r *ssRig) longLeases() {
	for _, tg := range r.targets {
		r.mu.Lock()
		tg.lease = 90
		err := tg.register(r.c.Nodes[0].BaseURL())
		r.mu.Unlock()
		if err != nil {
			r.t.Fatal(err)
		}
	}
}

// stoppedChoosing waits until the caller has not chosen addr for ssQuiet
// after since (epoch ms), and returns how long after since it last chose it
// (0 if never).
func (r *ssRig) stoppedChoosing(addr string, since int64, limit time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ch, err := chosenOf(r.base)
		if err == nil {
			last := ch.Last[addr]
			if ch.Now-max(last, since) >= ssQuiet.Milliseconds() {
				return time.Duration(max(0, last-since)) * time.Millisecond, true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, false
}

// choosingAgain waits until the caller chooses addr after since and returns how long after since.
func (r *ssRig) choosingAgain(addr string, since int64, limit time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if ch, err := chosenOf(r.base); err == nil && ch.Last[addr] > since {
			return time.Duration(ch.Last[addr]-since) * time.Millisecond, true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, false
}

// cancel DELETEs tg's registration (its server keeps answering) and returns
// the epoch ms at which the DELETE that succeeded was sent.
func (r *ssRig) cancel(tg *ssTarget) int64 {
	r.pause(tg, true)
	nd := r.writeTo
	for {
		sent := time.Now().UnixMilli()
		code, body, _, err := TryDo("DELETE", nd.URL("/eureka/apps/"+tg.key()), nil)
		if err == nil && code == 200 {
			return sent
		}
		if err == nil && code != 503 {
			r.t.Fatalf("DELETE %s: %d %s", tg.key(), code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killAndEvict kills tg (closes its server, stops its heartbeats) and
// returns the epoch ms at which heureka's application document stopped
// listing it (the eviction as clients see it): blocking reads of the
// document, each parked from the previous answer's X-Heureka-Index.
func (r *ssRig) killAndEvict(tg *ssTarget) int64 {
	t := r.t
	nd := r.c.Nodes[1]
	u := nd.URL("/eureka/apps/" + ssApp)
	listed := []byte(`"instanceId":"` + tg.id + `"`)
	index := "0"
	r.pause(tg, true)
	tg.kill()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		code, body, hdr, err := TryDo("GET", u+"?index="+index+"&wait=30s", nil, "Accept", "application/json")
		if err != nil || code != 200 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !bytes.Contains(body, listed) {
			return time.Now().UnixMilli()
		}
		index = hdr.Get("X-Heureka-Index")
	}
	t.Fatalf("%s was not evicted within 60 s of its kill", tg.key())
	return 0
}

// revive starts tg again, registers it and resumes its heartbeats; it
// returns the epoch ms of the registration's answer.
func (r *ssRig) revive(tg *ssTarget) int64 {
	tg.start(r.t)
	if err := tg.register(r.c.Nodes[2].BaseURL()); err != nil {
		r.t.Fatal(err)
	}
	at := time.Now().UnixMilli()
	r.pause(tg, false)
	return at
}

// ssStats is a series of durations with its percentiles.
type ssStats []time.Duration

func (s ssStats) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	v := slices.Clone(s)
	slices.Sort(v)
	i := int(math.Ceil(p/100*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

func (s ssStats) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(s), s.pct(50), s.pct(99), s.pct(100))
}

// ssRound runs reps rounds of one failure kind; after each the victim
// comes back (revived and registered) unless reuse is false, in which case
// each round takes the next spare instance.
func (r *ssRig) ssRound(kind string, victims []*ssTarget, reuse bool, limit time.Duration) (gone, back ssStats) {
	t := r.t
	for i, tg := range victims {
		var at int64
		switch kind {
		case "cancel":
			at = r.cancel(tg)
		case "evict":
			at = r.killAndEvict(tg)
		}
		if kind == "evict" {
			time.Sleep(time.Second)
			if ch, err := chosenOf(r.base); err == nil && slices.Contains(ch.Listed, tg.addr) {
				t.Logf("%s %d (%s): the caller's Eureka client still lists it 1 s after the eviction: %v", kind, i+1, tg.id, ch.Listed)
			}
		}
		d, ok := r.stoppedChoosing(tg.addr, at, limit)
		if !ok {
			t.Fatalf("%s %d (%s): the caller still chooses it %v after the change", kind, i+1, tg.id, limit)
		}
		gone = append(gone, d)
		line := fmt.Sprintf("%s %2d (%s): last chosen %4dms after the change", kind, i+1, tg.id, d.Milliseconds())
		if reuse {
			reg := r.revive(tg)
			b, ok := r.choosingAgain(tg.addr, reg, limit)
			if !ok {
				t.Fatalf("%s %d (%s): not chosen within %v of registering again", kind, i+1, tg.id, limit)
			}
			back = append(back, b)
			line += fmt.Sprintf("; chosen again %4dms after registering", b.Milliseconds())
		}
		t.Log(line)
	}
	return gone, back
}

// TestSpringStarterDropsDeadInstance: with the starter, 20 cancels and 20
// evictions of one of three instances; p99 of the time until the caller
// stops choosing it at most 1 s, and of the time until it chooses it again
// once registered.
func TestSpringStarterDropsDeadInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a JVM")
	}
	reps := 20
	if v, err := strconv.Atoi(os.Getenv("HEUREKA_SPRING_REPS")); err == nil && v > 0 {
		reps = v
	}
	r := startSSRig(t, 3, true)
	victims := func() []*ssTarget {
		var v []*ssTarget
		for i := range reps {
			v = append(v, r.targets[i%len(r.targets)])
		}
		return v
	}
	limit := 70 * time.Second // beyond the stock bound, so a failure says how far off it is
	cancelGone, cancelBack := r.ssRound("cancel", victims(), true, limit)
	evictGone, evictBack := r.ssRound("evict", victims(), true, limit)
	ch, _ := chosenOf(r.base)
	t.Logf("starter, cancel: stopped choosing %v; chosen again %v", cancelGone, cancelBack)
	t.Logf("starter, evict:  stopped choosing %v; chosen again %v", evictGone, evictBack)
	t.Logf("caller: %d calls, %d failed; heureka reported %d changes, %d refreshes", ch.Calls, ch.Failures, ch.Changes, ch.Refreshes)
	for _, s := range []struct {
		what string
		v    ssStats
	}{{"cancel: stopped choosing", cancelGone}, {"cancel: chosen again", cancelBack},
		{"evict: stopped choosing", evictGone}, {"evict: chosen again", evictBack}} {
		if p := s.v.pct(99); p > time.Second {
			t.Errorf("%s: p99 %v, want at most 1s (%v)", s.what, p, s.v)
		}
	}
}

// TestSpringStarterSubscribed: with heureka.subscribe the starter watches
// only the named applications' documents (one of them not registered at
// all); cancels of the watched one reach the caller as fast.
func TestSpringStarterSubscribed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a JVM")
	}
	r := startSSRig(t, 3, true, "--heureka.subscribe="+strings.ToLower(ssApp)+",NOT-REGISTERED")
	var victims []*ssTarget
	for i := range 6 {
		victims = append(victims, r.targets[i%len(r.targets)])
	}
	gone, back := r.ssRound("cancel", victims, true, 70*time.Second)
	t.Logf("subscribed, cancel: stopped choosing %v; chosen again %v", gone, back)
	if p := gone.pct(100); p > time.Second {
		t.Errorf("subscribed: stopped choosing after %v at most, want at most 1s (%v)", p, gone)
	}
	if p := back.pct(100); p > time.Second {
		t.Errorf("subscribed: chosen again after %v at most, want at most 1s (%v)", p, back)
	}
	if lines := r.caller.Lines(); !slices.ContainsFunc(lines, func(l string) bool {
		return strings.Contains(l, "blocking queries on apps/SS-TARGET, apps/NOT-REGISTERED")
	}) {
		t.Errorf("no start-up line naming the subscribed documents")
	}
}

// callerView is the caller app's GET /view: the Eureka client's registry copy.
type callerView struct {
	Now       int64          `json:"now"`
	Instances int            `json:"instances"`
	Apps      map[string]int `json:"apps"`
}

func viewOf(base string) (callerView, error) { return callerGet[callerView](base, "/view") }

// TestSpringStarterKeepsViewAcrossClusterKill: kill -9 of every heureka
// node, then a restart in random order, leaves the caller's view as it
// was: 100 instances of four other applications and the three it calls,
// polled every 100 ms from before the kill until every node serves them
// all again and 3 s after (the Eureka client keeps its copy through failed
// fetches, and the refreshes the starter runs when a node comes back fetch
// only from a node that serves the whole registry); the caller lists and
// chooses all three throughout. Once the cluster is back, the starter
// follows it again: a cancel reaches the caller within a second.
func TestSpringStarterKeepsViewAcrossClusterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a JVM")
	}
	r := startSSRig(t, 3, true)
	r.longLeases() // this test is about the client's view
	var regs []reg
	lease := map[string]any{"leaseInfo": map[string]any{"renewalIntervalInSecs": 30, "durationInSecs": 900}}
	for a := range 4 {
		for i := range 25 {
			regs = append(regs, reg{app: fmt.Sprintf("SSKV%d", a), id: fmt.Sprintf("sskv-%d-%02d", a, i), extra: lease})
		}
	}
	want := len(regs) + len(r.targets)
	registerAll(t, r.writeTo.BaseURL(), regs, 8)
	WaitFor(t, 30*time.Second, func() bool {
		v, err := viewOf(r.base)
		return err == nil && v.Instances == want
	}, fmt.Sprintf("the caller's view holding all %d instances", want))

	// The poller: the view's size, and the three listed and chosen.
	var (
		mu       sync.Mutex
		polls    int
		minView  = want
		problems []string
	)
	note := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		for range 3000 { // at most 5 min at 100 ms; the test stops it long before
			v, verr := viewOf(r.base)
			ch, cerr := chosenOf(r.base)
			at := time.Since(start).Seconds()
			mu.Lock()
			polls++
			switch {
			case verr != nil || cerr != nil:
				note("%.1fs: the caller did not answer: %v %v", at, verr, cerr)
			default:
				minView = min(minView, v.Instances)
				if v.Instances != want {
					note("%.1fs: the caller's view holds %d instances, want %d (%v)", at, v.Instances, want, v.Apps)
				}
				for _, tg := range r.targets {
					if !slices.Contains(ch.Listed, tg.addr) || ch.Now-ch.Last[tg.addr] > 1000 {
						note("%.1fs: the caller lists %v and last chose %s at -%dms, want all three, chosen throughout",
							at, ch.Listed, tg.id, ch.Now-ch.Last[tg.addr])
					}
				}
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	stopPolling := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
	t.Cleanup(stopPolling)

	time.Sleep(time.Second)
	for _, nd := range r.c.Nodes {
		nd.Kill()
	}
	killed := time.Since(start)
	time.Sleep(10 * time.Second)
	for _, i := range rand.Perm(len(r.c.Nodes)) {
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond)
		rsStart(t, r.c.Nodes[i])
	}
	for _, nd := range r.c.Nodes {
		rsWaitServingN(t, nd, want)
	}
	serving := time.Since(start)
	time.Sleep(3 * time.Second)
	stopPolling()
	mu.Lock()
	t.Logf("killed at %.1fs, every node serving all %d instances again at %.1fs; %d polls of the caller, smallest view %d",
		killed.Seconds(), want, serving.Seconds(), polls, minView)
	for _, p := range problems {
		t.Error(p)
	}
	mu.Unlock()
	if t.Failed() {
		return
	}

	time.Sleep(6 * time.Second) // the starter's back-off after every node failed: at most 5 s
	gone, back := r.ssRound("cancel", r.targets[:1], true, 70*time.Second)
	if gone[0] > time.Second || back[0] > time.Second {
		t.Errorf("after the cluster came back: stopped choosing after %v, chosen again after %v, want at most 1s each", gone[0], back[0])
	}
}

// TestSpringStarterFailsOverHungNode: the node the starter's blocking
// queries go to (the first service URL) stops (SIGSTOP) with its
// connections open. The starter gives up on it after heureka.wait plus 5 s
// (5 s + 5 s here) and asks the next node. The refresh it then runs is the
// Eureka client's own fetch, which, if the client's transport was on that
// node too, waits out its socket timeout before it fails over: 3 min by
// default in Spring Cloud Netflix 4.3
// (eureka.client.rest-template-timeout.socket-timeout), 3 s here. A cancel
// made through another node meanwhile reaches the caller within 20 s.
func TestSpringStarterFailsOverHungNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and a JVM")
	}
	r := startSSRig(t, 3, true, "--heureka.wait=5s",
		"--eureka.client.rest-template-timeout.socket-timeout=3000", "--eureka.client.restclient.timeout.socket-timeout=3000")
	// The hung node may be the leader: the election that follows must not
	// evict instances. With 90 s leases the test's heartbeats are not
	// needed, and stopping them keeps one to the hung node from holding up
	// the cancel.
	r.longLeases()
	for _, tg := range r.targets {
		r.pause(tg, true)
	}
	time.Sleep(time.Second) // the follow-up refreshes of those registrations are over
	hung := r.zone[0]       // a follower
	if !slices.ContainsFunc(r.caller.Lines(), func(l string) bool {
		return strings.Contains(l, "heureka: following "+hung.BaseURL()+"/eureka/ ")
	}) {
		t.Fatalf("the starter does not follow the first service URL %s", hung.BaseURL())
	}
	hung.Pause()
	paused := time.Now()
	time.Sleep(2 * time.Second) // the starter's query is parked on the stopped node
	t.Cleanup(hung.Resume)
	gone, _ := r.ssRound("cancel", r.targets[:1], false, 70*time.Second)
	t.Logf("first node hung: the cancel reached the caller after %v", gone[0])
	for _, l := range r.caller.Lines() {
		if strings.Contains(l, "heureka: following") || strings.Contains(l, "heureka: blocking query") {
			t.Logf("caller: %s", l)
		}
	}
	t.Logf("hung %s (paused=%v) at %s", hung.BaseURL(), hung.Paused(), paused.Format("15:04:05.000"))
	if gone[0] > 20*time.Second {
		t.Errorf("with the first node hung, the caller stopped choosing the cancelled instance after %v, want at most 20s", gone[0])
	}
}

// TestSpringStarterStock is the same measurement without the starter
// (heureka.enabled=false: stock Spring Cloud and Eureka client settings),
// for comparison; it asserts nothing. HEUREKA_SPRING_STOCK=1 runs it.
func TestSpringStarterStock(t *testing.T) {
	if os.Getenv(ssStockEnv) != "1" {
		t.Skipf("the stock client takes up to a minute per round: %s=1 runs it", ssStockEnv)
	}
	cancels, evicts := 4, 3
	r := startSSRig(t, 3+cancels+evicts, false)
	spare := r.targets[3:]
	// Each round starts at a random point of the client's 30 s fetch and
	// LoadBalancer's 35 s cache: rounds back to back would fall at similar
	// points of both.
	var cancelGone, evictGone ssStats
	for i, tg := range spare {
		time.Sleep(time.Duration(rand.IntN(30_000)) * time.Millisecond)
		kind := "cancel"
		if i >= cancels {
			kind = "evict"
		}
		gone, _ := r.ssRound(kind, []*ssTarget{tg}, false, 120*time.Second)
		if kind == "cancel" {
			cancelGone = append(cancelGone, gone...)
		} else {
			evictGone = append(evictGone, gone...)
		}
	}
	t.Logf("stock, cancel: stopped choosing %v", cancelGone)
	t.Logf("stock, evict:  stopped choosing %v", evictGone)
}
