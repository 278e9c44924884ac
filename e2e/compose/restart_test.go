package compose

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hudl/fargo"
	logging "github.com/op/go-logging"

	"github.com/heureka-registry/heureka/e2e"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

// fargoClients is a real Eureka client (hudl/fargo) pinned to each node in
// turn: a request that fails is retried once on the next node, as a client
// configured with every node's URL does.
type fargoClients struct {
	conns []*fargo.EurekaConnection
	next  atomic.Uint32
}

func newFargoClients(p *project, svcs []string) *fargoClients {
	if os.Getenv("HEUREKA_FARGO_LOG") == "" {
		for _, module := range []string{"fargo", "fargo.metadata", "fargo.marshal"} {
			logging.SetLevel(logging.CRITICAL, module)
		}
	}
	fc := &fargoClients{}
	for _, svc := range svcs {
		conn := fargo.NewConn(p.url(svc) + "/eureka")
		conn.UseJson = true
		fc.conns = append(fc.conns, &conn)
	}
	return fc
}

// try runs fn on one node and, if it fails, once more on the next.
func (fc *fargoClients) try(fn func(c *fargo.EurekaConnection) error) error {
	i := int(fc.next.Add(1))
	err := fn(fc.conns[i%len(fc.conns)])
	if err == nil {
		return nil
	}
	if err2 := fn(fc.conns[(i+1)%len(fc.conns)]); err2 != nil {
		return fmt.Errorf("%v; retry: %v", err, err2)
	}
	return nil
}

func fargoInstance(app, id string) *fargo.Instance {
	return &fargo.Instance{InstanceId: id, HostName: id + ".compose.test", App: app, IPAddr: "10.0.0.9", VipAddress: strings.ToLower(app),
		Status: fargo.UP, Port: 8080, PortEnabled: true, DataCenterInfo: fargo.DataCenterInfo{Name: fargo.MyOwn},
		LeaseInfo: fargo.LeaseInfo{RenewalIntervalInSecs: 1, DurationInSecs: 30}}
}

// clientLoop heartbeats every instance and fetches the app through fc
// until stop closes, and records every failure a retry did not absorb and
// every fetch that lacked an instance.
type clientLoop struct {
	mu       sync.Mutex
	problems []string
	fetches  int
	beats    int
	done     chan struct{}
}

func runClients(fc *fargoClients, app string, ins []*fargo.Instance, stop <-chan struct{}) *clientLoop {
	cl := &clientLoop{done: make(chan struct{})}
	want := make([]string, len(ins))
	for i, in := range ins {
		want[i] = in.Id()
	}
	go func() {
		defer close(cl.done)
		tick.Every(stop, 500*time.Millisecond, func() {
			for _, in := range ins {
				err := fc.try(func(c *fargo.EurekaConnection) error { return c.HeartBeatInstance(in) })
				cl.note(err == nil, "heartbeat %s: %v", in.Id(), err)
			}
			var got []string
			err := fc.try(func(c *fargo.EurekaConnection) error {
				a, err := c.GetApp(app)
				if err != nil {
					return err
				}
				got = got[:0]
				for _, in := range a.Instances {
					got = append(got, in.Id())
				}
				return nil
			})
			if !cl.note(err == nil, "fetch %s: %v", app, err) {
				return
			}
			cl.mu.Lock()
			cl.fetches++
			cl.mu.Unlock()
			if m := missing(want, got); len(m) > 0 {
				sort.Strings(got)
				cl.note(false, "fetch %s lacked %v (got %v)", app, m, got)
			}
		})
	}()
	return cl
}

func (cl *clientLoop) note(ok bool, format string, args ...any) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if ok {
		cl.beats++
		return true
	}
	cl.problems = append(cl.problems, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	return false
}

// rolling restart: one container at a time, with fargo heartbeating and
// fetching all the while; no error beyond a retry, no instance missing.
func TestComposeRollingRestart(t *testing.T) {
	p := newProject(t, "heurekaroll", 21791)
	p.up()
	fc := newFargoClients(p, defaultServices)
	var ins []*fargo.Instance
	for i := range 6 {
		in := fargoInstance("ROLL", fmt.Sprintf("roll-%d", i))
		if err := fc.try(func(c *fargo.EurekaConnection) error { return c.RegisterInstance(in) }); err != nil {
			t.Fatal(err)
		}
		ins = append(ins, in)
	}
	ids := []string{"roll-0", "roll-1", "roll-2", "roll-3", "roll-4", "roll-5"}
	p.waitAll(defaultServices, "ROLL", ids, cacheBound)
	stop := make(chan struct{})
	cl := runClients(fc, "ROLL", ins, stop)
	for _, svc := range defaultServices {
		p.must(time.Minute, "restart", "-t", "5", svc)
		p.waitHealthy(svc)
		e2e.WaitFor(t, 60*time.Second, func() bool { st, err := p.status(svc); return err == nil && st.Ready && st.Leader != "" }, svc+" ready after its restart")
		time.Sleep(2 * time.Second) // clients keep going against the restarted node
	}
	close(stop)
	<-cl.done
	cl.mu.Lock()
	defer cl.mu.Unlock()
	t.Logf("fargo: %d fetches, %d successful calls, %d problems", cl.fetches, cl.beats, len(cl.problems))
	if len(cl.problems) > 0 {
		t.Fatalf("the client saw errors beyond a retry or missing instances:\n%s", strings.Join(head(cl.problems), "\n"))
	}
	if cl.fetches < 10 {
		t.Fatalf("only %d fetches succeeded during the rolling restart", cl.fetches)
	}
}

// registryWatch polls every node's view of app and records any answer
// with fewer instances than want (a 200 lacking some, or a 404).
type registryWatch struct {
	mu      sync.Mutex
	bad     []string
	answers int
	stop    chan struct{}
	done    chan struct{}
}

func watchRegistry(p *project, app string, want []string) *registryWatch {
	w := &registryWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, svc := range defaultServices {
				ids, code, _, err := instanceIDs(client, p.url(svc), app)
				if err != nil || ids == nil {
					continue // no answer (down, starting, or refusing with 503)
				}
				w.mu.Lock()
				w.answers++
				if m := missing(want, ids); len(m) > 0 {
					w.bad = append(w.bad, fmt.Sprintf("%s %s: %d answered %d of %d instances", time.Now().Format("15:04:05.000"), svc, code, len(ids), len(want)))
				}
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *registryWatch) finish(t *testing.T, what string) {
	t.Helper()
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%s: %d answers watched", what, w.answers)
	if len(w.bad) > 0 {
		t.Errorf("%s: %d answers with fewer instances than before (needs the readiness gate):\n%s", what, len(w.bad), strings.Join(head(w.bad), "\n"))
	}
}

// full restart and down + up with the volumes kept: the registry comes
// back whole, and no node answers with fewer instances than it held.
func TestComposeFullRestart(t *testing.T) {
	p := newProject(t, "heurekafull", 21801)
	p.up()
	var a acked
	for i := range 30 {
		a.writeRetrying(t, p, defaultServices, "FULL", fmt.Sprintf("full-%02d", i), 3600, 20*time.Second)
	}
	p.waitAll(defaultServices, "FULL", a.ids, cacheBound)

	w := watchRegistry(p, "FULL", a.ids)
	p.must(upTimeout, "restart", "-t", "5")
	p.waitHealthy(defaultServices...)
	p.waitLeader(defaultServices...)
	p.waitAll(defaultServices, "FULL", a.ids, cacheBound)
	w.finish(t, "docker-compose restart")

	w = watchRegistry(p, "FULL", a.ids)
	p.must(upTimeout, "down", "-t", "5")
	p.must(upTimeout, "up", "-d", "--no-build")
	p.waitHealthy(defaultServices...)
	p.waitLeader(defaultServices...)
	p.waitAll(defaultServices, "FULL", a.ids, cacheBound)
	w.finish(t, "docker-compose down + up")
}

// pause: docker pause of a follower for longer than the instances' lease
// while they heartbeat through the other nodes; after unpause it catches
// up (writes made meanwhile included) and nothing was evicted.
func TestComposePause(t *testing.T) {
	const lease = 10 // seconds; the pause lasts longer
	p := newProject(t, "heurekapause", 21811)
	p.up()
	leader := p.waitLeader(defaultServices...)
	paused := others(defaultServices, leader)[0]
	alive := others(defaultServices, paused)
	var a acked
	for i := range 8 {
		a.writeRetrying(t, p, alive, "PAUSE", fmt.Sprintf("pause-%d", i), lease, 20*time.Second)
	}
	stop := make(chan struct{})
	var beatErrs atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	beat := func() {
		for i, id := range a.ids {
			code, _, _, err := do(client, "PUT", p.url(alive[i%len(alive)])+"/eureka/apps/PAUSE/"+id, nil)
			if err != nil || code != 200 {
				beatErrs.Add(1)
			}
		}
	}
	go func() {
		defer wg.Done()
		tick.Every(stop, time.Second, beat)
	}()
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(3 * time.Second)
	docker(t, "pause", p.container(paused))
	pausedAt := time.Now()
	var during acked
	for i := range 4 {
		during.writeRetrying(t, p, alive, "PAUSE", fmt.Sprintf("during-%d", i), 3600, 20*time.Second)
	}
	time.Sleep(time.Duration(lease+5)*time.Second - time.Since(pausedAt))
	docker(t, "unpause", p.container(paused))
	want := append(append([]string(nil), a.ids...), during.ids...)
	p.waitAll(defaultServices, "PAUSE", want, cacheBound)
	if n := beatErrs.Load(); n > 0 {
		t.Fatalf("%d heartbeats through the live nodes failed", n)
	}
	st, err := p.status(paused)
	if err != nil || st.Leader == "" {
		t.Fatalf("%s after unpause: %+v %v", paused, st, err)
	}
}
