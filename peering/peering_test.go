package peering

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// fakeCluster applies commands straight to an FSM and feeds the
// replicator like the node does.
type fakeCluster struct {
	mu  sync.Mutex
	f   *fsm.FSM
	idx uint64
}

func newFake() *fakeCluster { return &fakeCluster{f: fsm.New(0, nil)} }

func (c *fakeCluster) Get(app, id string) *fsm.Entry {
	var e *fsm.Entry
	c.f.Read(func(r *fsm.Registry) { e = r.Get(app, id) })
	return e
}

func (c *fakeCluster) Recent() []fsm.DeltaView {
	var d []fsm.DeltaView
	c.f.Read(func(r *fsm.Registry) { d = r.Delta(0) })
	return d
}

func (c *fakeCluster) RegisterReplicated(_ context.Context, in *fsm.Instance) error {
	return c.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: in, Replicated: true})
}

func (c *fakeCluster) apply(t fsm.CmdType, body any) error {
	entry, err := fsm.Encode(t, body)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idx++
	_ = fsm.Stamp(entry, time.Now().UnixMilli())
	if err, ok := c.f.Apply(&raft.Log{Index: c.idx, Type: raft.LogCommand, Data: entry}).(error); ok {
		return err
	}
	return nil
}

func inst(app, id string, ldt int64) *fsm.Instance {
	return &fsm.Instance{InstanceID: id, HostName: id + ".local", App: app, IPAddr: "10.0.0.1", Status: fsm.StatusUp,
		OverriddenStatus: fsm.StatusUnknown, Port: 8080, PortEnabled: true, DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"},
		LastDirtyTimestamp: ldt}
}

// fakePeer records the batches it receives and answers each item with
// answer (200 when nil).
type fakePeer struct {
	t      *testing.T
	mu     sync.Mutex
	items  []eureka.ReplicationInstance
	answer func(it eureka.ReplicationInstance) eureka.ReplicationInstanceResponse
	status func() int // whole-batch status (200 when nil)
	srv    *httptest.Server
}

func newPeer(t *testing.T) *fakePeer {
	p := &fakePeer{t: t}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakePeer) url() string { return p.srv.URL + "/eureka/" }

func (p *fakePeer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/eureka/peerreplication/batch" {
		p.t.Errorf("peer got %s %s", r.Method, r.URL.Path)
	}
	if r.Header.Get("x-netflix-discovery-replication") != "true" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		p.t.Errorf("batch headers %v", r.Header)
	}
	if p.status != nil {
		if code := p.status(); code != 200 {
			w.WriteHeader(code)
			return
		}
	}
	body, _ := io.ReadAll(r.Body)
	var l eureka.ReplicationList
	if err := json.Unmarshal(body, &l); err != nil {
		p.t.Errorf("batch body %s: %v", body, err)
	}
	var out eureka.ReplicationListResponse
	p.mu.Lock()
	for _, it := range l.ReplicationList {
		if it.Action == nil || it.AppName == "" || it.ID == "" {
			p.t.Errorf("batch item without action, app or id: %s", body)
			continue
		}
		p.items = append(p.items, it)
		a := eureka.ReplicationInstanceResponse{StatusCode: 200}
		if p.answer != nil {
			a = p.answer(it)
		}
		out.ResponseList = append(out.ResponseList, a)
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// seen returns the items received as "Action APP/id" strings.
func (p *fakePeer) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, it := range p.items {
		out = append(out, *it.Action+" "+it.AppName+"/"+it.ID)
	}
	return out
}

func (p *fakePeer) waitFor(t *testing.T, want ...string) {
	t.Helper()
	for range 500 {
		got := strings.Join(p.seen(), "\n")
		ok := true
		for _, w := range want {
			if !strings.Contains(got, w) {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("peer saw %v, want %v", p.seen(), want)
}

func startReplicator(t *testing.T, c *fakeCluster, peers ...string) (*Replicator, func()) {
	cfg := DefaultConfig()
	cfg.Peers = peers
	cfg.BatchDelay = 10 * time.Millisecond
	cfg.RetryDelay = 10 * time.Millisecond
	r := New(cfg, c, nil)
	c.f.Observe(r.Changed)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { r.Run(stop); close(done) }()
	for !r.active.Load() {
		time.Sleep(time.Millisecond)
	}
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(halt)
	return r, halt
}

// TestReplicator_SendsLocalChangesOnly: heureka's own clients' register,
// heartbeat, status changes and cancel reach the peer as batch items in
// eureka-server's format; a change a peer replicated does not.
func TestReplicator_SendsLocalChangesOnly(t *testing.T) {
	c := newFake()
	p := newPeer(t)
	r, _ := startReplicator(t, c, p.url())
	must(t, c.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("APP", "i-1", 1000)}))
	must(t, c.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("APP", "peer-1", 1000), Replicated: true}))
	r.Renewed("APP", "i-1")
	p.waitFor(t, "Register APP/i-1", "Heartbeat APP/i-1")
	must(t, c.apply(fsm.CmdSetOverride, &fsm.OverrideBody{App: "APP", ID: "i-1", Status: fsm.StatusOutOfService}))
	p.waitFor(t, "StatusUpdate APP/i-1")
	must(t, c.apply(fsm.CmdDeleteOverride, &fsm.OverrideBody{App: "APP", ID: "i-1", Status: fsm.StatusUp}))
	p.waitFor(t, "DeleteStatusOverride APP/i-1")
	must(t, c.apply(fsm.CmdCancel, &fsm.KeyBody{App: "APP", ID: "i-1"}))
	must(t, c.apply(fsm.CmdCancel, &fsm.KeyBody{App: "APP", ID: "peer-1", Replicated: true}))
	p.waitFor(t, "Cancel APP/i-1")
	for _, s := range p.seen() {
		if strings.Contains(s, "peer-1") {
			t.Fatalf("a replicated change went back out: %v", p.seen())
		}
	}
	p.mu.Lock()
	for _, it := range p.items {
		switch *it.Action {
		case "Register":
			if !strings.HasPrefix(string(it.InstanceInfo), `{"instanceId":"i-1"`) || it.LastDirtyTimestamp == nil || *it.LastDirtyTimestamp != 1000 {
				t.Errorf("register item %+v %s", it, it.InstanceInfo)
			}
		case "Heartbeat":
			if it.Status == nil || *it.Status != "UP" || it.OverriddenStatus == nil || it.LastDirtyTimestamp == nil {
				t.Errorf("heartbeat item %+v", it)
			}
		case "StatusUpdate":
			if it.Status == nil || *it.Status != "OUT_OF_SERVICE" {
				t.Errorf("status item %+v", it)
			}
		}
	}
	p.mu.Unlock()
	// The peer saw the items before the replicator read its answers.
	for range 500 {
		if r.Stats().Items >= 5 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := r.Stats(); st.Batches == 0 || st.Items < 5 || st.ItemFailures != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestReplicator_PeerAnswers: a heartbeat the peer does not know (404) is
// followed by a register; a 409 carries the peer's newer record, which the
// cluster takes as a replicated registration (not sent back).
func TestReplicator_PeerAnswers(t *testing.T) {
	c := newFake()
	p := newPeer(t)
	newer := eureka.AppendInstance(nil, eureka.JSON, &fsm.Entry{Instance: func() *fsm.Instance {
		in := inst("APP", "i-3", 5000)
		in.Status = fsm.StatusDown
		return in
	}()})
	var once sync.Once
	p.answer = func(it eureka.ReplicationInstance) eureka.ReplicationInstanceResponse {
		switch {
		case *it.Action == "Heartbeat" && it.ID == "i-2":
			return eureka.ReplicationInstanceResponse{StatusCode: 404}
		case *it.Action == "Heartbeat" && it.ID == "i-3":
			var a eureka.ReplicationInstanceResponse
			once.Do(func() { a = eureka.ReplicationInstanceResponse{StatusCode: 409, ResponseEntity: newer} })
			if a.StatusCode == 0 {
				a.StatusCode = 200
			}
			return a
		}
		return eureka.ReplicationInstanceResponse{StatusCode: 200}
	}
	must(t, c.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("APP", "i-2", 1000)}))
	must(t, c.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("APP", "i-3", 1000)}))
	r, _ := startReplicator(t, c, p.url())
	r.Renewed("APP", "i-2")
	r.Renewed("APP", "i-3")
	p.waitFor(t, "Heartbeat APP/i-2", "Heartbeat APP/i-3")
	for range 500 {
		if n := strings.Count(strings.Join(p.seen(), "\n"), "Register APP/i-2"); n >= 2 && r.Stats().Conflicts == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One register of i-2 from the replay of the recently-changed queue
	// at Run, one after the 404.
	if n := strings.Count(strings.Join(p.seen(), "\n"), "Register APP/i-2"); n < 2 {
		t.Fatalf("no register after the 404: %v", p.seen())
	}
	e := c.Get("APP", "i-3")
	if st := r.Stats(); st.Conflicts != 1 || st.Reregisters != 1 || e.Instance.LastDirtyTimestamp != 5000 || e.Instance.Status != fsm.StatusDown {
		t.Fatalf("stats %+v, record %+v", st, e.Instance)
	}
}

// TestReplicator_RetriesAndHandover: a peer that answers 503 gets the same
// changes again until it takes them; when leadership moves, the next
// leader's replicator replays the recently-changed queue (local changes
// only), so nothing the previous one had not sent is lost.
func TestReplicator_RetriesAndHandover(t *testing.T) {
	c := newFake()
	p := newPeer(t)
	var mu sync.Mutex
	fails := 3
	p.status = func() int {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			return 503
		}
		return 200
	}
	r, halt := startReplicator(t, c, p.url())
	must(t, c.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("APP", "i-1", 1000)}))
	p.waitFor(t, "Register APP/i-1")
	if st := r.Stats(); st.Retries < 3 {
		t.Fatalf("retries %d, want 3", st.Retries)
	}
	halt() // leadership lost
	must(t, c.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("APP", "i-2", 1000)}))
	must(t, c.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("APP", "peer-1", 1000), Replicated: true}))
	must(t, c.apply(fsm.CmdCancel, &fsm.KeyBody{App: "APP", ID: "i-1"}))
	if strings.Contains(strings.Join(p.seen(), "\n"), "i-2") {
		t.Fatal("a replicator that does not lead sent a change")
	}
	startReplicator(t, c, p.url()) // the next leader
	p.waitFor(t, "Register APP/i-2", "Cancel APP/i-1")
	if strings.Contains(strings.Join(p.seen(), "\n"), "peer-1") {
		t.Fatalf("replay sent a replicated change: %v", p.seen())
	}
}

// TestQueue_Overflow: a full queue drops heartbeats first, the new one or
// the oldest queued; a register finding no heartbeat to drop is reported
// lost (logged and counted, never silent).
func TestQueue_Overflow(t *testing.T) {
	q := newQueue(3)
	hb := func(id string) *task { return &task{key: taskKey{"A", id, kindHeartbeat.slot()}, kind: kindHeartbeat} }
	reg := func(id string) *task { return &task{key: taskKey{"A", id, kindRegister.slot()}, kind: kindRegister} }
	for _, id := range []string{"1", "2", "3"} {
		if _, d, _ := q.push(hb(id)); d {
			t.Fatal("dropped below the limit")
		}
	}
	if _, d, _ := q.push(hb("1")); d || q.len() != 3 {
		t.Fatal("a repeated heartbeat must coalesce, not drop")
	}
	if k, d, lost := q.push(hb("4")); !d || lost || k != kindHeartbeat || q.len() != 3 {
		t.Fatal("a new heartbeat on a full queue must be dropped")
	}
	for _, id := range []string{"5", "6", "7"} {
		if k, d, lost := q.push(reg(id)); !d || lost || k != kindHeartbeat {
			t.Fatalf("register %s must displace a heartbeat: %v %v %v", id, k, d, lost)
		}
	}
	if k, d, lost := q.push(reg("8")); !d || !lost || k != kindRegister {
		t.Fatalf("register on a queue full of registers: %v %v %v", k, d, lost)
	}
	got := q.take(10)
	var ids []string
	for _, tk := range got {
		ids = append(ids, fmt.Sprint(tk.kind, tk.key.id))
	}
	if strings.Join(ids, ",") != "register5,register6,register7" {
		t.Fatalf("taken %v", ids)
	}
	q.putBack(got[:1])
	if q.len() != 1 || q.take(1)[0].key.id != "5" {
		t.Fatal("putBack must requeue at the front")
	}
}

// serveApps serves src's registry as an Eureka peer's GET /eureka/apps.
func serveApps(src *fakeCluster) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/eureka/apps" {
			http.NotFound(w, r)
			return
		}
		var frags [][]byte
		src.f.Read(func(reg *fsm.Registry) {
			for _, name := range reg.AppNames() {
				frags = append(frags, eureka.AppendApplication(nil, eureka.JSON, name, reg.AppEntries(name)))
			}
		})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(eureka.AppendApplications(nil, eureka.JSON, "1", "", frags))
	}))
}

// TestSyncOnceAndImport: the initial sync copies a peer's registry as
// replicated registrations with their lastDirtyTimestamp and status, and
// skips instances held with a newer record; Import registers the copy
// instance by instance (testImport).
func TestSyncOnceAndImport(t *testing.T) {
	src := newFake()
	down := inst("APP", "i-2", 3000)
	down.Status = fsm.StatusOutOfService
	down.OverriddenStatus = fsm.StatusOutOfService
	must(t, src.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("APP", "i-1", 2000)}))
	must(t, src.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: down}))
	must(t, src.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("OTHER", "o-1", 2000)}))
	apps := serveApps(src)
	defer apps.Close()
	dst := newFake()
	must(t, dst.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("OTHER", "o-1", 9000)}))
	n, err := SyncOnce(context.Background(), dst, http.DefaultClient, []string{"http://127.0.0.1:1/eureka/", apps.URL + "/eureka/"})
	if err != nil || n != 2 {
		t.Fatalf("sync wrote %d: %v", n, err)
	}
	e := dst.Get("APP", "i-2")
	if e == nil || e.Instance.LastDirtyTimestamp != 3000 || e.Instance.Status != fsm.StatusOutOfService || e.Override != fsm.StatusOutOfService {
		t.Fatalf("copied record %+v", e)
	}
	if dst.Get("OTHER", "o-1").Instance.LastDirtyTimestamp != 9000 {
		t.Fatal("sync overwrote a newer record")
	}
	for _, d := range dst.Recent() {
		if d.Entry.App == "APP" && !d.Replicated {
			t.Fatal("a copied instance is not marked replicated")
		}
	}
	testImport(t, apps.URL+"/eureka/")
}

// testImport: Import registers each instance of the source at from as a
// replicated registration and counts what the target answered 204 to;
// every other answer is a failure with the target's reason, and a target
// that does not answer stops it with an error.
func testImport(t *testing.T, from string) {
	var mu sync.Mutex
	got := map[string]*fsm.Instance{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		app, ok := strings.CutPrefix(r.URL.Path, "/eureka/apps/")
		if r.Method != http.MethodPost || !ok || r.Header.Get(eureka.ReplicationHeader) != "true" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("target got %s %s %v", r.Method, r.URL.Path, r.Header)
		}
		body, _ := io.ReadAll(r.Body)
		in, err := eureka.DecodeInstance(body, eureka.JSON, 1)
		if err != nil || in.App != app {
			t.Errorf("register body %s for %s: %v", body, app, err)
			return
		}
		if in.ID() == "i-2" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"Missing something"}`))
			return
		}
		mu.Lock()
		got[app+"/"+in.ID()] = in
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer target.Close()
	res, err := Import(context.Background(), http.DefaultClient, from, target.URL+"/eureka/", 2)
	want := []ImportFailure{{App: "APP", ID: "i-2", Reason: "400 Bad Request: Missing something"}}
	if err != nil || res.Instances != 3 || res.Registered != 2 || res.Failed != 1 || !reflect.DeepEqual(res.Failures, want) {
		t.Fatalf("import %+v: %v", res, err)
	}
	if in := got["APP/i-1"]; in == nil || in.LastDirtyTimestamp != 2000 || got["OTHER/o-1"] == nil {
		t.Fatalf("target recorded %v", got)
	}

	// A target that answers 200 (a peer batch's answer, or anything else
	// but 204) recorded nothing Import can tell.
	batchy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"responseList":[]}`))
	}))
	defer batchy.Close()
	res, err = Import(context.Background(), http.DefaultClient, from, batchy.URL+"/eureka/", 0)
	if err != nil || res.Registered != 0 || res.Failed != 3 || len(res.Failures) != 3 {
		t.Fatalf("import into a 200 target %+v: %v", res, err)
	}

	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	res, err = Import(context.Background(), http.DefaultClient, from, closed.URL+"/eureka/", 0)
	if err == nil || res.Registered != 0 || res.Failed != 0 || res.Instances != 3 {
		t.Fatalf("import into a closed port %+v: %v", res, err)
	}
}

// refusingCluster refuses registrations of app BAD as a bad command, as
// the node does for what its input limits refuse.
type refusingCluster struct{ *fakeCluster }

func (c refusingCluster) RegisterReplicated(ctx context.Context, in *fsm.Instance) error {
	if in.App == "BAD" {
		return fmt.Errorf("app name: %w", fsm.ErrBadCommand)
	}
	return c.fakeCluster.RegisterReplicated(ctx, in)
}

// TestSyncOnceSkipsRefused: an instance the cluster refuses as a bad
// command is left out of the initial copy; the rest is copied.
func TestSyncOnceSkipsRefused(t *testing.T) {
	src := newFake()
	must(t, src.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("BAD", "b-1", 2000)}))
	must(t, src.apply(fsm.CmdRegister, &fsm.RegisterBody{Instance: inst("GOOD", "g-1", 2000)}))
	apps := serveApps(src)
	defer apps.Close()
	dst := refusingCluster{newFake()}
	n, err := SyncOnce(context.Background(), dst, http.DefaultClient, []string{apps.URL + "/eureka/"})
	if err != nil || n != 1 || dst.Get("GOOD", "g-1") == nil || dst.Get("BAD", "b-1") != nil {
		t.Fatalf("sync wrote %d: %v", n, err)
	}
}
