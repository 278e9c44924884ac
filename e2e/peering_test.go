package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// The migration of docs/migrate-from-eureka.md, played on 127.0.0.1: a
// 3-peer eureka-server ring (e2e/eurekaserver) and a 3-node heureka cluster
// joined to it as peers (--eureka-peers), Eureka instances and Spring Cloud
// clients split between the two sides, the instances moving one by one from
// the eureka-server URLs to the heureka URLs, the heureka leader killed
// halfway, and the eureka-servers stopped at the end. A watcher checks the
// whole time that no observer (the Spring clients, every server) misses an
// instance that is registered and heartbeating, and that none is listed
// twice.

// fleetInstance is one Eureka instance the test drives over REST: it
// registers, heartbeats every second against the first of its side's URLs
// that answers, and registers again when a heartbeat gets 404, as Eureka
// clients do.
type fleetInstance struct {
	id   string
	urls atomic.Pointer[[]string]
	beat atomic.Int64 // heartbeats accepted
}

var fleetLease = map[string]any{"leaseInfo": map[string]any{"renewalIntervalInSecs": 1, "durationInSecs": 10}}

func (f *fleetInstance) run(stop <-chan struct{}) {
	registered := ""
	for {
		for _, u := range *f.urls.Load() {
			if registered != u {
				if TryRegisterJSON(u, "FLEET", f.id, fleetLease) != nil {
					continue
				}
				registered = u
			}
			code, _, _, err := TryDo("PUT", u+"/eureka/apps/FLEET/"+f.id, nil)
			if err != nil {
				registered = ""
				continue
			}
			if code == 404 {
				registered = ""
				continue
			}
			if code == 200 {
				f.beat.Add(1)
			}
			break
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// esCacheExpiry shortens the life of eureka-server's read-write response
// cache entries from 180 s to 2 s. That cache can keep a stale GET /apps
// (and delta) until the entry expires: when two changes come close
// together under concurrent reads, a load that began before the second
// change is stored after that change invalidated the entry, and nothing
// else invalidates it (heartbeats do not). Measured on a lone
// eureka-server with eight readers, a register right after another was
// missing from GET /apps 300 ms later in 110 of 300 tries, while GET of
// the instance itself answered 200; with this property none was missing
// 2.8 s later. heureka's cache showed none in the same experiment.
const esCacheExpiry = "--eureka.server.response-cache-auto-expiration-in-seconds=2"

// startEurekaRing starts eureka-servers that peer with each other and with
// extraPeers (service URLs), on the addresses given.
func startEurekaRing(t testing.TB, java, jar string, addrs, extraPeers []string) []*Proc {
	var urls []string
	for _, a := range addrs {
		urls = append(urls, "http://"+a+"/eureka/")
	}
	zone := append(append([]string(nil), urls...), extraPeers...)
	var procs []*Proc
	for i, a := range addrs {
		host, port, _ := strings.Cut(a, ":")
		es := launch.EurekaServer{Jar: jar, JVMArgs: jvmArgs, Host: host, Port: port, Peers: zone,
			Properties: []string{
				"--eureka.server.my-url=" + urls[i],
				"--eureka.server.use-read-only-response-cache=false",
				// Evict within seconds, and never hold eviction back: an
				// instance whose heartbeats stop reaching this server must
				// disappear from it, so the watcher sees lost replication.
				"--eureka.server.eviction-interval-timer-in-ms=1000",
				"--eureka.server.enable-self-preservation=false",
				esCacheExpiry,
			}}
		procs = append(procs, StartProc(t, fmt.Sprintf("eurekaserver%d", i+1), exec.Command(java, es.Argv()...)))
	}
	for i, a := range addrs {
		if err := launch.WaitEurekaServer(context.Background(), "http://"+a, 3*clientTimeout, procs[i].Running); err != nil {
			t.Fatalf("eureka-server %d: %v; tail:\n%s", i+1, err, procs[i].Tail(40))
		}
	}
	return procs
}

// instanceGets says what each eureka-server answers to GET
// /eureka/apps/{app}/{id}, which reads its registry and not its response
// cache: a server that answers 200 there but does not list the instance
// in GET /apps had the change and served a stale cached document.
func instanceGets(bases []string, app, id string) string {
	var out []string
	for i, b := range bases {
		code, _, _, err := TryDo("GET", b+"/eureka/apps/"+app+"/"+id, nil)
		if err != nil {
			out = append(out, fmt.Sprintf("eurekaserver%d: %v", i+1, err))
			continue
		}
		out = append(out, fmt.Sprintf("eurekaserver%d: %d", i+1, code))
	}
	return "GET of the instance itself: " + strings.Join(out, ", ")
}

// observer is one view of the registry the watcher checks: a server's
// GET /apps or a Spring client's /state.
type observer struct {
	name string
	list func() (map[string]int, error) // "APP/id" -> times listed
	on   atomic.Bool
}

// newObserver makes an observer that counts the "APP/id" keys keys lists.
func newObserver(name string, keys func() ([]string, error)) *observer {
	return &observer{name: name, list: func() (map[string]int, error) {
		ks, err := keys()
		if err != nil {
			return nil, err
		}
		m := map[string]int{}
		for _, k := range ks {
			m[k]++
		}
		return m, nil
	}}
}

func serverObserver(name, base string) *observer {
	o := newObserver(name, func() ([]string, error) {
		a, err := TryGetApps(base)
		if err != nil {
			return nil, err
		}
		return appKeys(a), nil
	})
	o.on.Store(true)
	return o
}

func springObserver(name, base string) *observer {
	return newObserver(name, func() ([]string, error) {
		s, err := springStateOf(base)
		if err != nil {
			return nil, err
		}
		var keys []string
		for app, ids := range s.Services {
			for _, id := range ids {
				keys = append(keys, app+"/"+id)
			}
		}
		return keys, nil
	})
}

// watcher polls every observer that is on and records every expected
// instance it misses and every instance it lists twice.
type watcher struct {
	mu         sync.Mutex
	expected   map[string]bool
	observers  []*observer
	violations []string
	polls      int
}

func (w *watcher) expect(keys ...string) {
	w.mu.Lock()
	for _, k := range keys {
		w.expected[k] = true
	}
	w.mu.Unlock()
}

// converged reports whether every observer that is on lists every
// expected instance.
func (w *watcher) converged() bool {
	exp, _ := w.state()
	return w.listedEverywhere(exp...)
}

// state returns the expected instances and the observers, read under the
// lock; whether an observer is on is read when it is asked.
func (w *watcher) state() ([]string, []*observer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	exp := make([]string, 0, len(w.expected))
	for k := range w.expected {
		exp = append(exp, k)
	}
	return exp, append([]*observer(nil), w.observers...)
}

// listedEverywhere reports whether every observer that is on lists all of
// keys.
func (w *watcher) listedEverywhere(exp ...string) bool {
	_, obs := w.state()
	for _, o := range obs {
		if !o.on.Load() {
			continue
		}
		m, err := o.list()
		if err != nil {
			return false
		}
		for _, k := range exp {
			if m[k] == 0 {
				return false
			}
		}
	}
	return true
}

func (w *watcher) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
		exp, obs := w.state()
		for _, o := range obs {
			if !o.on.Load() {
				continue
			}
			m, err := o.list()
			if err != nil || !o.on.Load() {
				continue // a stopping observer; its next answer counts
			}
			var bad []string
			for _, k := range exp {
				if m[k] == 0 {
					bad = append(bad, "missing "+k)
				}
			}
			for k, n := range m {
				if n > 1 {
					bad = append(bad, fmt.Sprintf("%s listed %d times", k, n))
				}
			}
			w.mu.Lock()
			w.polls++
			for _, b := range bad {
				w.violations = append(w.violations, time.Now().Format("15:04:05.000")+" "+o.name+": "+b)
			}
			w.mu.Unlock()
		}
	}
}

func startSpring(t *testing.T, java, jar, id, zone string) (*Proc, string) {
	addr := FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	p := StartProc(t, "springclient-"+id, exec.Command(java, append(jvmArgs, "-jar", jar,
		"--server.port="+port, "--server.address=127.0.0.1",
		"--spring.main.banner-mode=off",
		"--eureka.instance.instance-id="+id,
		"--eureka.client.service-url.defaultZone="+zone)...))
	return p, "http://" + addr
}

// killProc ends a process with SIGKILL: a client that dies this way sends no
// cancel, so its registration lives on until its new process registers.
func killProc(p *Proc) {
	p.Kill()
}

func TestEurekaPeerMigration(t *testing.T) {
	java, esJar := eurekaServerTools(t, "eureka-server peer migration")
	_, springJarPath, _ := javaTools()
	start := time.Now()
	esAddrs := []string{FreeAddr(t), FreeAddr(t), FreeAddr(t)}
	var esURLs, esBases []string
	for _, a := range esAddrs {
		esURLs = append(esURLs, "http://"+a+"/eureka/")
		esBases = append(esBases, "http://"+a)
	}
	c := StartCluster(t, 3, Options{ExtraArgs: append([]string{"--eureka-peers", strings.Join(esURLs, ","),
		"--eureka-sync-timeout", "3m", "--enable-self-preservation=false", "--eviction-interval", "1s"}, edCacheArgs...)})
	var heURLs, heBases []string
	for _, nd := range c.Nodes {
		heURLs = append(heURLs, nd.URL("/eureka/"))
		heBases = append(heBases, nd.BaseURL())
	}
	ring := startEurekaRing(t, java, esJar, esAddrs, heURLs)
	// heureka opens its read gate once it copied the ring's registry.
	for _, nd := range c.Nodes {
		if !Eventually(3*clientTimeout, func() bool {
			code, _, _, err := TryDo("GET", nd.URL("/eureka/apps"), nil)
			return err == nil && code == 200
		}) {
			t.Fatalf("%s never served reads after the initial sync", nd.ID)
		}
	}
	t.Logf("ring and cluster up after %.1fs", time.Since(start).Seconds())

	w := &watcher{expected: map[string]bool{}}
	for i, b := range esBases {
		w.observers = append(w.observers, serverObserver(fmt.Sprintf("eurekaserver%d", i+1), b))
	}
	for _, nd := range c.Nodes {
		w.observers = append(w.observers, serverObserver("heureka-"+nd.ID, nd.BaseURL()))
	}

	// Twelve instances, half on each side, each pinned to one server first.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	var fleet []*fleetInstance
	rotate := func(list []string, i int) []string {
		return append(append([]string(nil), list[i%3:]...), list[:i%3]...)
	}
	for i := range 12 {
		f := &fleetInstance{id: fmt.Sprintf("f-%02d", i)}
		urls := rotate(heBases, i)
		if i < 6 {
			urls = rotate(esBases, i)
		}
		f.urls.Store(&urls)
		fleet = append(fleet, f)
		w.expect("FLEET/" + f.id)
		wg.Add(1)
		go func() { defer wg.Done(); f.run(stop) }()
	}
	// One Spring Cloud client on each side.
	esZone, heZone := strings.Join(esURLs, ","), strings.Join(heURLs, ",")
	springES, springESBase := startSpring(t, java, springJarPath, "spring-es", esZone)
	springHE, springHEBase := startSpring(t, java, springJarPath, "spring-he", heZone)
	obsES, obsHE := springObserver("spring-es", springESBase), springObserver("spring-he", springHEBase)
	w.observers = append(w.observers, obsES, obsHE)
	w.expect("SPRINGCLIENT/spring-es", "SPRINGCLIENT/spring-he")
	if !Eventually(4*clientTimeout, func() bool {
		_, e1 := springStateOf(springESBase)
		_, e2 := springStateOf(springHEBase)
		return e1 == nil && e2 == nil
	}) {
		t.Fatalf("Spring clients did not start:\n%s\n%s", springES.Tail(30), springHE.Tail(30))
	}
	obsES.on.Store(true)
	obsHE.on.Store(true)
	if !Eventually(2*clientTimeout, w.converged) {
		t.Fatalf("the two sides never converged: %v", w.missingNow())
	}
	t.Logf("every observer sees all %d instances %.1fs after start", len(w.expected), time.Since(start).Seconds())
	wg.Add(1)
	go func() { defer wg.Done(); w.run(stop) }()

	// One change on each side reaches every observer within one fetch
	// interval of the Spring clients (1 s) plus replication.
	for i, base := range []string{esBases[1], heBases[2]} {
		id := fmt.Sprintf("late-%d", i)
		t0 := time.Now()
		RegisterJSON(t, base, "LATE", id, nil)
		if !Eventually(clientTimeout, func() bool { return w.listedEverywhere("LATE/" + id) }) {
			t.Fatalf("LATE/%s registered at %s did not reach every observer: %v; %s", id, base, w.lacking("LATE/"+id), instanceGets(esBases, "LATE", id))
		}
		t.Logf("LATE/%s registered at %s seen by every observer after %v", id, base, time.Since(t0).Round(10*time.Millisecond))
		if d := time.Since(t0); d > 8*time.Second {
			t.Errorf("propagation took %v, more than a fetch interval plus replication allows", d)
		}
		// LATE instances do not heartbeat (the watcher does not expect
		// them): cancel them again.
		if code, _, _ := Do(t, "DELETE", base+"/eureka/apps/LATE/"+id, nil); code != 200 {
			t.Fatalf("cancel LATE/%s: %d", id, code)
		}
	}

	// The eureka-side instances move one by one; the heureka leader is
	// killed halfway and comes back later.
	leader := c.WaitLeader(t, 15*time.Second)
	for i := range 6 {
		urls := rotate(heBases, i)
		fleet[i].urls.Store(&urls)
		time.Sleep(2 * time.Second)
		if i == 2 {
			t.Logf("killing the heureka leader %s", leader.ID)
			leader.Kill()
			for j, o := range w.observers {
				if o.name == "heureka-"+leader.ID {
					w.observers[j].on.Store(false)
				}
			}
		}
	}
	// The Spring client on the eureka side moves: killed (no cancel) and
	// started again with the heureka URLs under the same instance id.
	obsES.on.Store(false)
	killProc(springES)
	springES2, springES2Base := startSpring(t, java, springJarPath, "spring-es", heZone)
	obsES2 := springObserver("spring-es(moved)", springES2Base)
	w.mu.Lock()
	w.observers = append(w.observers, obsES2)
	w.mu.Unlock()
	if !Eventually(4*clientTimeout, func() bool { _, err := springStateOf(springES2Base); return err == nil }) {
		t.Fatalf("moved Spring client did not start:\n%s", springES2.Tail(30))
	}
	if !Eventually(clientTimeout, func() bool {
		obsES2.on.Store(true)
		if w.converged() {
			return true
		}
		obsES2.on.Store(false)
		return false
	}) {
		t.Fatalf("the moved Spring client never saw every instance: %v", w.missingNow())
	}
	leader.Restart(t)
	for _, o := range w.observers {
		if o.name == "heureka-"+leader.ID {
			Eventually(clientTimeout, func() bool {
				_, err := o.list()
				return err == nil
			})
			o.on.Store(true)
		}
	}
	// Long enough for an eureka-server to evict an instance whose
	// heartbeats no longer reach it (lease 10 s, which eureka-server
	// counts twice, eviction every second).
	time.Sleep(25 * time.Second)

	// The eureka-servers stop.
	for i, p := range ring {
		w.observers[i].on.Store(false)
		p.Stop(10 * time.Second)
	}
	time.Sleep(5 * time.Second)
	for _, f := range fleet {
		before := f.beat.Load()
		if !Eventually(10*time.Second, func() bool { return f.beat.Load() > before }) {
			t.Errorf("FLEET/%s stopped heartbeating", f.id)
		}
	}
	close(stop)
	wg.Wait()
	stop = make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("watcher: %d polls, %d violations, %.1fs in all", w.polls, len(w.violations), time.Since(start).Seconds())
	if len(w.violations) > 0 {
		sort.Strings(w.violations)
		if len(w.violations) > 40 {
			w.violations = w.violations[:40]
		}
		t.Fatalf("instances missing or listed twice:\n%s", strings.Join(w.violations, "\n"))
	}
	final := GetApps(t, heBases[0]).ByKey()
	for k := range w.expected {
		if _, ok := final[k]; !ok {
			t.Errorf("%s missing from heureka at the end", k)
		}
	}
	if len(final) != len(w.expected) {
		t.Errorf("heureka holds %d instances, want %d", len(final), len(w.expected))
	}
	_ = springHE
}

// missingNow names, per observer that is on, the expected instances it
// does not list (for failure messages).
func (w *watcher) missingNow() []string {
	exp, _ := w.state()
	return w.lacking(exp...)
}

// lacking names each observer that does not list one of exp now, or could
// not be asked.
func (w *watcher) lacking(exp ...string) []string {
	_, obs := w.state()
	var out []string
	for _, o := range obs {
		if !o.on.Load() {
			continue
		}
		m, err := o.list()
		if err != nil {
			out = append(out, o.name+": "+err.Error())
			continue
		}
		for _, k := range exp {
			if m[k] == 0 {
				out = append(out, o.name+" lacks "+k)
			}
		}
	}
	return out
}
