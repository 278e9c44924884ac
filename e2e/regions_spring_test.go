package e2e

// A Spring Cloud client in a region that reads the others (docs/regions.md):
// the Spring client of e2e/springclient runs in east with
// eureka.client.fetch-remote-regions-registry=west,legacy, so its
// DiscoveryClient sends ?regions=west,legacy on its full, delta and
// reconcile fetches and holds every region's instances as its own (they
// are MyOwn instances, so the Netflix client keeps them in its local
// region's Applications). It must list all three regions' instances and
// call, through Spring Cloud LoadBalancer, an application only west has.
//
// Then every region churns (registrations, cancels and status changes in
// east, west and legacy) while the Spring client and three Go delta
// clients (one per east node, doing what the Java client does) apply
// deltas every second. Neither may see a reconcile hash mismatch: the
// merged delta's apps__hashcode must always be the hash of what a client
// holds after applying it. (Each churned application keeps one instance
// throughout: the Netflix client mismatches on its own when a delta lists,
// for an application it does not hold, a cancelled instance before a new
// one; see churner.anchor and javaApply.)
//
// That the count could fail is shown at the end: a proxy in front of the
// east nodes replaces apps__hashcode in one delta answer per client, and
// each client must report exactly that mismatch (the Spring client in its
// log, in the counter of its log lines and in the Netflix client's own
// Spectator counter).
//
// The churn runs 60 s; HEUREKA_REGIONS_CHURN (a Go duration, e.g. 5m)
// changes that, and the chaos build runs it 5 minutes:
//
//	go test -tags chaos ./e2e -run '^TestSpringRemoteRegions$' -count=1 -timeout 30m -v

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	// regionsChurnEnv sets how long the churn runs (a Go duration).
	regionsChurnEnv = "HEUREKA_REGIONS_CHURN"
	// springRegions is what the Spring client fetches besides east.
	springRegions = "west,legacy"
	// reconcileMismatchLine starts the Netflix DiscoveryClient's log line
	// about a delta whose apps__hashcode differs from what it holds
	// (DiscoveryClient.reconcileAndLogDifference, DEBUG).
	reconcileMismatchLine = "The Reconcile hashcodes do not match"
	// churnEvery is the pause between two changes of one region's churner.
	churnEvery = 250 * time.Millisecond
	// churnMin and churnMax bound the live churn instances of a region.
	churnMin, churnMax = 4, 14
	// springClientTag is the tag deltaTamper gives requests without
	// clientTagHeader: the Spring client's.
	springClientTag = "spring"
)

// regionsChurnDefault is the churn's length in the normal suite; the chaos
// build makes it 5 minutes (regions_churn_chaos_test.go).
var regionsChurnDefault = 60 * time.Second

func regionsChurnDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv(regionsChurnEnv)
	if v == "" {
		return regionsChurnDefault
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration such as 5m", regionsChurnEnv, v)
	}
	return d
}

// waitRegionsReady waits until every east node serves regions= reads of
// all the regions (they answer 403 until each was copied once).
func (s *regionsSetup) waitRegionsReady(t *testing.T, regions string) {
	t.Helper()
	for _, nd := range s.east.Nodes {
		WaitFor(t, 60*time.Second, func() bool {
			code, _, _, err := regionsRead(nd.BaseURL(), "apps", regions)
			return err == nil && code == http.StatusOK
		}, nd.ID+": regions="+regions+" reads served")
	}
}

// ---------------------------------------------------------------------------
// An application only west has

// answerServer is a real HTTP server on 127.0.0.1 for one registered
// instance: GET / answers "<app> <id>", and the answers are counted.
type answerServer struct {
	app, id, addr string
	answers       atomic.Int64
}

func startAnswerServer(t *testing.T, app, id string) *answerServer {
	t.Helper()
	a := &answerServer{app: app, id: id, addr: FreeAddr(t)}
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		t.Fatalf("listen %s: %v", a.addr, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.answers.Add(1)
		fmt.Fprintf(w, "%s %s", a.app, a.id)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return a
}

// registration is the instance's register body fields: it is reached at
// 127.0.0.1 on its port, under the VIP address LoadBalancer asks for (the
// lower-cased application name).
func (a *answerServer) registration() map[string]any {
	_, port, _ := strings.Cut(a.addr, ":")
	p, _ := strconv.Atoi(port)
	base := "http://" + a.addr
	return map[string]any{
		"hostName": "127.0.0.1", "ipAddr": "127.0.0.1",
		"port":        map[string]any{"$": p, "@enabled": "true"},
		"homePageUrl": base + "/", "statusPageUrl": base + "/", "healthCheckUrl": base + "/",
		"leaseInfo": regionLease["leaseInfo"],
	}
}

// ---------------------------------------------------------------------------
// A proxy that breaks one delta's hash on request

// hashTamperRe matches a JSON document's apps__hashcode.
var hashTamperRe = regexp.MustCompile(`"apps__hashcode"\s*:\s*"[^"]*"`)

// tamperedHash is a hash no registry of the test has.
const tamperedHash = `"apps__hashcode":"UP_987654321_"`

// deltaTamper is one loopback reverse proxy per node. It passes every
// request through (without Accept-Encoding, so that answers are plain
// JSON), except that tamper(tag, n) makes it replace apps__hashcode in the
// next n delta answers (GET .../apps/delta) to the client with that tag
// (clientTagHeader; springClientTag when absent).
type deltaTamper struct {
	mu       sync.Mutex
	pending  map[string]int
	tampered map[string]int
	fronts   map[*Node]string
}

func startDeltaTamper(t *testing.T, nodes []*Node) *deltaTamper {
	t.Helper()
	d := &deltaTamper{pending: map[string]int{}, tampered: map[string]int{}, fronts: map[*Node]string{}}
	for _, nd := range nodes {
		target, err := url.Parse(nd.BaseURL())
		if err != nil {
			t.Fatalf("node URL %q: %v", nd.BaseURL(), err)
		}
		rp := &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				r.Out.Header.Del("Accept-Encoding")
			},
			Transport:      &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16},
			ModifyResponse: d.modify,
		}
		addr := FreeAddr(t)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen %s: %v", addr, err)
		}
		srv := &http.Server{Handler: rp, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		d.fronts[nd] = "http://" + addr
	}
	return d
}

// URL is the proxy's base URL for nd (http://host:port).
func (d *deltaTamper) URL(nd *Node) string { return d.fronts[nd] }

// tamper breaks the hash of the next n delta answers to the client tag.
func (d *deltaTamper) tamper(tag string, n int) {
	d.mu.Lock()
	d.pending[tag] += n
	d.mu.Unlock()
}

// done is how many delta answers to tag were tampered with.
func (d *deltaTamper) done(tag string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tampered[tag]
}

func (d *deltaTamper) modify(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(resp.Request.URL.Path, "/apps/delta") {
		return nil
	}
	tag := resp.Request.Header.Get(clientTagHeader)
	if tag == "" {
		tag = springClientTag
	}
	d.mu.Lock()
	n := d.pending[tag]
	d.mu.Unlock()
	if n == 0 {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	d.mu.Lock()
	if d.pending[tag] > 0 && hashTamperRe.Match(body) {
		d.pending[tag]--
		d.tampered[tag]++
		body = hashTamperRe.ReplaceAll(body, []byte(tamperedHash))
	}
	d.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// ---------------------------------------------------------------------------
// A Go client that reads regions as the Java client does

// regionsDeltaClient does what the Netflix Java client does with
// fetch-remote-regions-registry: a full fetch of GET /apps?regions=, then
// every second a delta of GET /apps/delta?regions=, applied by (app, id)
// (ADDED and MODIFIED replace, DELETED removes), after which the reconcile
// hash of everything it holds must equal the delta's apps__hashcode; on a
// mismatch it fetches everything again. It reads one node, as the Java
// client keeps to one server.
//
// Beside that it keeps a second copy applied exactly as the Netflix client's
// DiscoveryClient.updateDelta does (javaApply), to tell a mismatch of the
// server's from one of that client's own.
type regionsDeltaClient struct {
	tag, base, regions string

	mu             sync.Mutex
	local          map[string]edInstance            // APP/id
	java           map[string]map[string]edInstance // app -> id -> instance, as javaApply leaves it
	fulls          int
	deltas         int
	nonEmpty       int // deltas with at least one instance
	mismatches     []string
	javaMismatches []string
	fetchErrs      int
	lastErr        string
}

func newRegionsDeltaClient(tag, base, regions string) *regionsDeltaClient {
	return &regionsDeltaClient{tag: tag, base: base, regions: regions, local: map[string]edInstance{}}
}

func (c *regionsDeltaClient) get(path string) (edDoc, error) {
	u := c.base + "/eureka/" + path + "?regions=" + c.regions
	code, body, _, err := TryDo("GET", u, nil, "Accept", "application/json", clientTagHeader, c.tag)
	if err != nil {
		return edDoc{}, err
	}
	if code != http.StatusOK {
		return edDoc{}, fmt.Errorf("GET %s: %d %.200q", u, code, body)
	}
	return edParseJSON(body)
}

// full replaces what the client holds with a full fetch.
func (c *regionsDeltaClient) full() error {
	doc, err := c.get("apps/")
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.local = make(map[string]edInstance, len(doc.Instances))
	c.java = map[string]map[string]edInstance{}
	for _, in := range doc.Instances {
		c.local[in.Key()] = in
		if c.java[in.App] == nil {
			c.java[in.App] = map[string]edInstance{}
		}
		c.java[in.App][in.ID] = in
	}
	c.fulls++
	return nil
}

// delta fetches and applies one delta; it reports whether the hashes
// differed afterwards.
func (c *regionsDeltaClient) delta() (bool, error) {
	doc, err := c.get("apps/delta")
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, in := range doc.Instances {
		switch in.Action {
		case "DELETED":
			delete(c.local, in.Key())
		default:
			c.local[in.Key()] = in
		}
	}
	c.deltas++
	if len(doc.Instances) > 0 {
		c.nonEmpty++
	}
	local := make([]edInstance, 0, len(c.local))
	for _, in := range c.local {
		local = append(local, in)
	}
	javaApply(c.java, doc)
	var held []edInstance
	for _, app := range c.java {
		for _, in := range app {
			held = append(held, in)
		}
	}
	mismatch := false
	if got := edHashCode(held); got != doc.HashCode {
		c.javaMismatches = append(c.javaMismatches, fmt.Sprintf("%s: delta version %s (%d instances): apps__hashcode %q, held after applying as the Java client does %q",
			time.Now().Format("15:04:05.000"), doc.VersionsDelta, len(doc.Instances), doc.HashCode, got))
		mismatch = true
	}
	if got := edHashCode(local); got != doc.HashCode {
		c.mismatches = append(c.mismatches, fmt.Sprintf("%s: delta version %s (%d instances): apps__hashcode %q, held after applying %q",
			time.Now().Format("15:04:05.000"), doc.VersionsDelta, len(doc.Instances), doc.HashCode, got))
		mismatch = true
	}
	return mismatch, nil
}

// javaApply applies a delta to apps the way the Netflix client's
// DiscoveryClient.updateDelta does: application by application, in
// document order, an ADDED or MODIFIED instance of an application the
// client does not hold adds the delta's whole application (every instance
// it lists, DELETED ones included, as they are listed) and then the
// instance; a DELETED instance is removed from the application held, and
// an application left empty is dropped.
func javaApply(apps map[string]map[string]edInstance, doc edDoc) {
	for i := 0; i < len(doc.Instances); {
		j := i
		for j < len(doc.Instances) && doc.Instances[j].App == doc.Instances[i].App {
			j++
		}
		group := doc.Instances[i:j]
		for _, in := range group {
			switch in.Action {
			case "DELETED":
				if held := apps[in.App]; held != nil {
					delete(held, in.ID)
					if len(held) == 0 {
						delete(apps, in.App)
					}
				}
			default:
				if apps[in.App] == nil {
					held := map[string]edInstance{}
					for _, g := range group {
						held[g.ID] = g
					}
					apps[in.App] = held
				}
				apps[in.App][in.ID] = in
			}
		}
		i = j
	}
}

// run fetches everything, then a delta every second until stop closes.
func (c *regionsDeltaClient) run(stop <-chan struct{}) {
	needFull := true
	for {
		var err error
		if needFull {
			if err = c.full(); err == nil {
				needFull = false
			}
		} else {
			needFull, err = c.delta()
		}
		if err != nil {
			c.mu.Lock()
			c.fetchErrs++
			c.lastErr = err.Error()
			c.mu.Unlock()
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// view is what the client holds: "APP/id STATUS", sorted.
func (c *regionsDeltaClient) view() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.local))
	for k, in := range c.local {
		out = append(out, k+" "+in.Status)
	}
	slices.Sort(out)
	return out
}

func (c *regionsDeltaClient) counts() (fulls, deltas, nonEmpty, mismatches, fetchErrs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fulls, c.deltas, c.nonEmpty, len(c.mismatches), c.fetchErrs
}

// javaCount is how many deltas left the Java-like copy with another hash.
func (c *regionsDeltaClient) javaCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.javaMismatches)
}

func (c *regionsDeltaClient) mismatchList() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(slices.Clone(c.mismatches), c.javaMismatches...)
}

// ---------------------------------------------------------------------------
// Churn

// churnInstance is one instance a churner registered: it is written to
// through the server it registered with (home), as a client would.
type churnInstance struct {
	app, id, home string
	overridden    bool
}

// churner changes one region continuously: it registers instances of its
// region's own application and of CHURNALL (held in every region), cancels
// them and changes their status (an OUT_OF_SERVICE or UP override, or the
// override's removal).
type churner struct {
	region string
	bases  []string // servers to register with (http://host:port)
	rng    *rand.Rand
	live   []*churnInstance
	next   int
	ops    map[string]int // answered as expected, by kind
	failed map[string]int // other answers and transport errors, by kind
	errs   []string
}

func newChurner(region string, bases []string, seed uint64) *churner {
	return &churner{region: region, bases: bases, rng: rand.New(rand.NewPCG(seed, 29)),
		ops: map[string]int{}, failed: map[string]int{}}
}

// apps are the applications the churner registers instances of.
func (c *churner) apps() []string { return []string{"CHURN" + strings.ToUpper(c.region), "CHURNALL"} }

// anchor registers one instance of each of the churner's applications that
// stays for the whole test. An application never disappears from the
// merged registry then: when one does, and comes back while the deltas
// still list its cancelled instances before the new one, the Netflix
// client's updateDelta adds the delta's whole application, cancelled
// instances included (javaApply), and reconciles: a mismatch of that
// client's own, which it has against eureka-server as well.
func (c *churner) anchor(t *testing.T) []string {
	t.Helper()
	var keys []string
	for _, app := range c.apps() {
		id := strings.ToLower(app) + "-" + c.region + "-anchor"
		RegisterJSON(t, c.bases[0], app, id, regionLease)
		keys = append(keys, app+"/"+id)
	}
	return keys
}

func (c *churner) note(kind string, code int, err error, want ...int) bool {
	if err == nil && slices.Contains(want, code) {
		c.ops[kind]++
		return true
	}
	c.failed[kind]++
	if len(c.errs) < 5 {
		c.errs = append(c.errs, fmt.Sprintf("%s: %d %v", kind, code, err))
	}
	return false
}

func (c *churner) step() {
	n := len(c.live)
	op := c.rng.IntN(10)
	switch {
	case n < churnMin || (n < churnMax && op < 4):
		in := &churnInstance{id: fmt.Sprintf("%s-c%d", c.region, c.next), home: c.bases[c.rng.IntN(len(c.bases))]}
		c.next++
		in.app = c.apps()[c.rng.IntN(2)]
		code, _, err := edWrite("POST", in.home+"/eureka/apps/"+in.app, RegisterBody(in.app, in.id, regionLease))
		if c.note("register", code, err, http.StatusNoContent) {
			c.live = append(c.live, in)
		}
	case n >= churnMax || op < 7:
		i := c.rng.IntN(n)
		in := c.live[i]
		code, _, err := edWrite("DELETE", in.home+"/eureka/apps/"+in.app+"/"+in.id, nil)
		c.note("cancel", code, err, http.StatusOK)
		c.live = slices.Delete(c.live, i, i+1)
	default:
		in := c.live[c.rng.IntN(n)]
		u := in.home + "/eureka/apps/" + in.app + "/" + in.id + "/status?value="
		if in.overridden && c.rng.IntN(3) == 0 {
			code, _, err := edWrite("DELETE", u+"UP", nil)
			if c.note("status-delete", code, err, http.StatusOK) {
				in.overridden = false
			}
			return
		}
		value := "OUT_OF_SERVICE"
		if c.rng.IntN(2) == 0 {
			value = "UP"
		}
		code, _, err := edWrite("PUT", u+value, nil)
		if c.note("status", code, err, http.StatusOK) {
			in.overridden = true
		}
	}
}

func (c *churner) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(churnEvery):
		}
		c.step()
	}
}

func (c *churner) summary() string {
	return fmt.Sprintf("%s: %d registers, %d cancels, %d status overrides, %d override removals, %d live at the end, %d writes answered otherwise %v",
		c.region, c.ops["register"], c.ops["cancel"], c.ops["status"], c.ops["status-delete"], len(c.live),
		c.failed["register"]+c.failed["cancel"]+c.failed["status"]+c.failed["status-delete"], c.errs)
}

// ---------------------------------------------------------------------------
// The test

// springView is what the Spring client's Eureka client holds (GET /state
// statuses): "APP/id STATUS", sorted.
func springView(st springState) []string {
	var out []string
	for app, ids := range st.Statuses {
		for id, status := range ids {
			out = append(out, app+"/"+id+" "+status)
		}
	}
	slices.Sort(out)
	return out
}

// serverView is a regions= full fetch from base as "APP/id STATUS", sorted.
func serverView(base, regions string) ([]string, error) {
	code, a, _, err := regionsRead(base, "apps", regions)
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("GET /apps?regions=%s: %d %v", regions, code, err)
	}
	out := make([]string, 0, len(a.Instances))
	for _, in := range a.Instances {
		out = append(out, in.Key()+" "+in.Status)
	}
	return out, nil
}

// springReconciles is the Spring client's GET /reconciles.
type springReconciles struct {
	Installed bool  `json:"installed"`
	Counter   int64 `json:"counter"` // the Netflix client's Spectator counter
	Logged    int64 `json:"logged"`  // its log lines, counted by CountingAppender
}

func springReconcilesOf(base string) (springReconciles, error) {
	var r springReconciles
	code, body, _, err := TryDo("GET", base+"/reconciles", nil)
	if err != nil {
		return r, err
	}
	if code != http.StatusOK {
		return r, fmt.Errorf("GET /reconciles: %d %s", code, body)
	}
	return r, json.Unmarshal(body, &r)
}

// mismatchLines counts the client's output lines about a reconcile hash
// mismatch.
func mismatchLines(p *Proc) int {
	n := 0
	for _, l := range p.Lines() {
		if strings.Contains(l, reconcileMismatchLine) {
			n++
		}
	}
	return n
}

// mismatchContext is, for each reconcile mismatch the client logged, the
// delta it had just applied: its log lines from "Got delta update" to the
// mismatch, the instance lines only (for a failure message).
func mismatchContext(p *Proc) string {
	lines := p.Lines()
	var b strings.Builder
	for i, l := range lines {
		if !strings.Contains(l, reconcileMismatchLine) {
			continue
		}
		from := i
		for from > 0 && i-from < 400 && !strings.Contains(lines[from], "Got delta update with apps hashcode") {
			from--
		}
		for _, c := range lines[from : i+1] {
			if strings.Contains(c, "DiscoveryClient") && !strings.Contains(c, "Heartbeat") {
				_, msg, _ := strings.Cut(c, "DiscoveryClient    : ")
				b.WriteString("\n  " + msg)
			}
		}
		b.WriteString("\n  ----")
	}
	return b.String()
}

// lbCall asks the Spring app to call service through LoadBalancer; it
// returns the answer, or an error (the app's or the call's).
func lbCall(springBase, service string) (string, error) {
	code, body, _, err := TryDo("GET", springBase+"/call?service="+service, nil)
	if err != nil {
		return "", err
	}
	var r struct {
		Answer string `json:"answer"`
		Error  string `json:"error"`
	}
	if jerr := json.Unmarshal(body, &r); jerr != nil || code != http.StatusOK {
		return "", fmt.Errorf("GET /call: %d %s", code, body)
	}
	return r.Answer, nil
}

func TestSpringRemoteRegions(t *testing.T) {
	skipShort(t)
	java, jar, err := javaTools()
	ToolOrSkip(t, "Spring Cloud remote regions", err)
	churnFor := regionsChurnDuration(t)
	start := time.Now()
	rs := startRegions(t, "Spring Cloud remote regions")
	east, west := rs.east, rs.west

	// Each region's own instances, one application held in all three, and
	// WESTONLY: two real HTTP servers registered only in west.
	wonly := []*answerServer{startAnswerServer(t, "WESTONLY", "w-1"), startAnswerServer(t, "WESTONLY", "w-2")}
	for i, a := range wonly {
		RegisterJSON(t, west.Nodes[i].BaseURL(), a.app, a.id, a.registration())
	}
	RegisterJSON(t, west.Nodes[2].BaseURL(), "SHARED", "s-w", regionLease)
	RegisterJSON(t, east.Nodes[0].BaseURL(), "SHARED", "s-e", regionLease)
	RegisterJSON(t, east.Nodes[1].BaseURL(), "EONLY", "e-1", regionLease)
	RegisterJSON(t, rs.legacyBase(0), "SHARED", "s-l", regionLease)
	RegisterJSON(t, rs.legacyBase(1), "LONLY", "l-1", regionLease)
	rs.waitRegionsReady(t, springRegions)
	fixed := []string{"EONLY/e-1", "LONLY/l-1", "SHARED/s-e", "SHARED/s-l", "SHARED/s-w", "WESTONLY/w-1", "WESTONLY/w-2"}
	for _, nd := range east.Nodes {
		WaitFor(t, 60*time.Second, func() bool {
			code, a, _, err := regionsRead(nd.BaseURL(), "apps", springRegions)
			return err == nil && code == http.StatusOK && len(missingKeys(a, fixed)) == 0
		}, nd.ID+": regions="+springRegions+" lists every region's instances")
	}
	t.Logf("east, west and legacy up, copied and merged after %.1fs", time.Since(start).Seconds())

	// The Spring client in east, through a proxy per east node (which
	// passes everything through until the end of the test).
	tamper := startDeltaTamper(t, east.Nodes)
	var fronts []string
	for _, nd := range east.Nodes {
		fronts = append(fronts, tamper.URL(nd)+"/eureka/")
	}
	springStart := time.Now()
	spring := startSpringApp(t, "springclient-regions", java, jar,
		"--eureka.instance.instance-id=spring-east",
		"--eureka.client.region=east",
		"--eureka.client.availability-zones.east=east-a",
		"--eureka.client.service-url.east-a="+strings.Join(fronts, ","),
		"--eureka.client.fetch-remote-regions-registry="+springRegions,
		// The Netflix client refuses to start without the zones of each
		// remote region it fetches.
		"--eureka.client.availability-zones.west=west-a",
		"--eureka.client.availability-zones.legacy=legacy-a")
	sbase, state, failf := spring.base, spring.state, spring.failf

	// Its DiscoveryClient holds every region's instances, SHARED as one
	// application of three, and Spring's DiscoveryClient lists them.
	wantSeen := append(slices.Clone(fixed), "SPRINGCLIENT/spring-east")
	if !Eventually(3*clientTimeout, func() bool {
		s := state()
		for _, k := range wantSeen {
			app, id, _ := strings.Cut(k, "/")
			if s.Statuses[app][id] != "UP" {
				return false
			}
		}
		return len(s.Services["SHARED"]) == 3 && len(s.Services["WESTONLY"]) == 2
	}) {
		failf("the Spring client in east does not see every region's instances (running %v)", spring.Running())
	}
	t.Logf("Spring client (region east, fetch-remote-regions-registry=%s) saw east, west and legacy %.1fs after it started: %d applications, SHARED=%v",
		springRegions, time.Since(springStart).Seconds(), len(state().Statuses), state().Services["SHARED"])
	if rc, err := springReconcilesOf(sbase); err != nil || !rc.Installed {
		failf("GET /reconciles: %+v %v: the client's Spectator counter is not readable", rc, err)
	}

	// It calls WESTONLY, which only west has, through LoadBalancer.
	var answer string
	if !Eventually(clientTimeout, func() bool {
		answer, err = lbCall(sbase, "westonly")
		return err == nil
	}) {
		failf("calling westonly through LoadBalancer: %v", err)
	}
	if !strings.HasPrefix(answer, "WESTONLY w-") {
		failf("westonly through LoadBalancer answered %q", answer)
	}
	t.Logf("westonly through LoadBalancer answered %q", answer)

	// Churn in every region, with the Spring client, three Go delta
	// clients (one per east node, through the same proxies) and calls to
	// westonly running.
	var gos []*regionsDeltaClient
	for _, nd := range east.Nodes {
		gos = append(gos, newRegionsDeltaClient("go-"+nd.ID, tamper.URL(nd), springRegions))
	}
	var legacyBases []string
	for i := range rs.legacyAddrs {
		legacyBases = append(legacyBases, rs.legacyBase(i))
	}
	bases := func(c *Cluster) []string {
		var out []string
		for _, nd := range c.Nodes {
			out = append(out, nd.BaseURL())
		}
		return out
	}
	seed := uint64(time.Now().UnixNano())
	churners := []*churner{
		newChurner("east", bases(east), seed), newChurner("west", bases(west), seed+1), newChurner("legacy", legacyBases, seed+2),
	}
	var anchors []string
	for _, c := range churners {
		anchors = append(anchors, c.anchor(t)...)
	}
	stopClients, stopChurn := make(chan struct{}), make(chan struct{})
	var clientsWG, churnWG sync.WaitGroup
	for _, c := range gos {
		clientsWG.Add(1)
		go func() { defer clientsWG.Done(); c.run(stopClients) }()
	}
	var lbAnswers, lbFailures atomic.Int64
	var lbMu sync.Mutex
	var lbErrs []string
	clientsWG.Add(1)
	go func() {
		defer clientsWG.Done()
		for {
			select {
			case <-stopClients:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if a, err := lbCall(sbase, "westonly"); err == nil && strings.HasPrefix(a, "WESTONLY w-") {
				lbAnswers.Add(1)
			} else {
				lbFailures.Add(1)
				lbMu.Lock()
				if len(lbErrs) < 5 {
					lbErrs = append(lbErrs, fmt.Sprintf("%q %v", a, err))
				}
				lbMu.Unlock()
			}
		}
	}()
	// The churn starts once every client holds the anchors. A timeout names
	// the client and the anchors it lacks, with what its fetches last saw.
	missing := func(view []string) []string {
		var out []string
		for _, k := range anchors {
			if !slices.ContainsFunc(view, func(v string) bool { return strings.HasPrefix(v, k+" ") }) {
				out = append(out, k)
			}
		}
		return out
	}
	var lacking string
	if !Eventually(clientTimeout, func() bool {
		for _, c := range gos {
			if m := missing(c.view()); len(m) > 0 {
				fulls, deltas, _, _, fetchErrs := c.counts()
				c.mu.Lock()
				lastErr := c.lastErr
				c.mu.Unlock()
				lacking = fmt.Sprintf("%s lacks %v (%d fulls, %d deltas, %d fetch errors, last %q)", c.tag, m, fulls, deltas, fetchErrs, lastErr)
				return false
			}
		}
		st := state()
		if m := missing(springView(st)); len(m) > 0 {
			lacking = fmt.Sprintf("the Spring client lacks %v (%d delta fetches)", m, st.DeltaFetches)
			return false
		}
		return true
	}) {
		t.Fatalf("timed out after %v waiting for every client to hold the churn's anchor instances: %s", clientTimeout, lacking)
	}
	before := state()
	churnStart := time.Now()
	for _, c := range churners {
		churnWG.Add(1)
		go func() { defer churnWG.Done(); c.run(stopChurn) }()
	}
	progress := time.NewTicker(30 * time.Second)
	for time.Since(churnStart) < churnFor {
		select {
		case <-progress.C:
			s := state()
			t.Logf("churn %s: Spring client %d deltas, %d mismatches; westonly answers %d, failures %d",
				time.Since(churnStart).Round(time.Second), s.DeltaFetches-before.DeltaFetches, s.HashMismatches, lbAnswers.Load(), lbFailures.Load())
		case <-time.After(time.Until(churnStart.Add(churnFor))):
		}
	}
	progress.Stop()
	close(stopChurn)
	churnWG.Wait()
	churned := time.Since(churnStart)
	for _, c := range churners {
		t.Log(c.summary())
	}

	// Once the churn stops, every client holds what its server lists.
	if !Eventually(2*clientTimeout, func() bool {
		want, err := serverView(east.Nodes[0].BaseURL(), springRegions)
		return err == nil && slices.Equal(springView(state()), want)
	}) {
		want, _ := serverView(east.Nodes[0].BaseURL(), springRegions)
		failf("after the churn the Spring client does not hold what east lists: %s", diffKeys(want, springView(spring.last)))
	}
	for i, c := range gos {
		nd := east.Nodes[i]
		var want []string
		if !Eventually(clientTimeout, func() bool {
			want, err = serverView(nd.BaseURL(), springRegions)
			return err == nil && slices.Equal(c.view(), want)
		}) {
			t.Fatalf("after the churn %s does not hold what %s lists: %s", c.tag, nd.ID, diffKeys(want, c.view()))
		}
	}
	close(stopClients)
	clientsWG.Wait()

	// No client saw a reconcile hash mismatch.
	after := state()
	rc, err := springReconcilesOf(sbase)
	if err != nil {
		failf("GET /reconciles: %v", err)
	}
	lines := mismatchLines(spring.Proc)
	t.Logf("churn of %s: Spring client %d deltas (%d full fetches before, %d after), reconcile hash mismatches: %d log lines, %d counted by its appender, %d by its own counter",
		churned.Round(time.Second), after.DeltaFetches-before.DeltaFetches, before.FullFetches, after.FullFetches, lines, rc.Logged, rc.Counter)
	t.Logf("westonly through LoadBalancer during the churn: %d answers (w-1 %d, w-2 %d in all), %d failures %v",
		lbAnswers.Load(), wonly[0].answers.Load(), wonly[1].answers.Load(), lbFailures.Load(), lbErrs)
	for _, c := range gos {
		f, d, ne, m, fe := c.counts()
		t.Logf("%s: %d full fetches, %d deltas (%d not empty), %d hash mismatches (%d applying as the Java client does), %d fetch errors %s",
			c.tag, f, d, ne, m, c.javaCount(), fe, c.lastErr)
	}
	if lines != 0 || rc.Logged != 0 || rc.Counter != 0 || after.HashMismatches != 0 {
		for _, c := range gos {
			t.Logf("%s mismatches: %v", c.tag, head(c.mismatchList(), 5))
		}
		failf("the Spring client saw reconcile hash mismatches during the churn: %d log lines, %d counted, %d by its own counter; the deltas:%s",
			lines, rc.Logged, rc.Counter, mismatchContext(spring.Proc))
	}
	if after.DeltaFetches-before.DeltaFetches < int(churned/(2*time.Second)) {
		failf("the Spring client applied only %d deltas in %s", after.DeltaFetches-before.DeltaFetches, churned)
	}
	for _, c := range gos {
		if _, d, ne, m, _ := c.counts(); m != 0 || c.javaCount() != 0 || d < int(churned/(2*time.Second)) || ne == 0 {
			t.Fatalf("%s: %d hash mismatches in %d deltas (%d not empty); first: %v", c.tag, m, d, ne, head(c.mismatchList(), 5))
		}
	}
	if lbFailures.Load() != 0 || lbAnswers.Load() == 0 || wonly[0].answers.Load() == 0 || wonly[1].answers.Load() == 0 {
		failf("westonly through LoadBalancer during the churn: %d answers (w-1 %d, w-2 %d in all), %d failures, first: %v",
			lbAnswers.Load(), wonly[0].answers.Load(), wonly[1].answers.Load(), lbFailures.Load(), lbErrs)
	}

	// The counts can fail: one delta answer per client with a hash no
	// registry has is reported by each, in each of its counts.
	stopClients = make(chan struct{})
	for _, c := range gos {
		clientsWG.Add(1)
		go func() { defer clientsWG.Done(); c.run(stopClients) }()
	}
	defer func() { close(stopClients); clientsWG.Wait() }()
	tamper.tamper(springClientTag, 1)
	for _, c := range gos {
		tamper.tamper(c.tag, 1)
	}
	if !Eventually(clientTimeout, func() bool {
		r, err := springReconcilesOf(sbase)
		return err == nil && r.Counter >= 1 && r.Logged >= 1 && mismatchLines(spring.Proc) >= 1
	}) {
		r, _ := springReconcilesOf(sbase)
		failf("one delta with a wrong hash (%d tampered) was not reported: %+v, %d log lines", tamper.done(springClientTag), r, mismatchLines(spring.Proc))
	}
	rc, _ = springReconcilesOf(sbase)
	t.Logf("forced: %d delta answer(s) to the Spring client with a wrong hash: %d log lines %q, %d counted by its appender, %d by its own counter",
		tamper.done(springClientTag), mismatchLines(spring.Proc), reconcileMismatchLine, rc.Logged, rc.Counter)
	if n := tamper.done(springClientTag); n != 1 || rc.Counter != 1 || rc.Logged != 1 || mismatchLines(spring.Proc) != 1 {
		failf("forced: %d tampered, %+v, %d log lines: want 1 of each", n, rc, mismatchLines(spring.Proc))
	}
	for _, c := range gos {
		WaitFor(t, 30*time.Second, func() bool { _, _, _, m, _ := c.counts(); return m >= 1 }, c.tag+" reports the tampered delta")
		if _, _, _, m, _ := c.counts(); m != 1 || c.javaCount() != 1 || tamper.done(c.tag) != 1 {
			t.Fatalf("forced: %s reported %d mismatches for %d tampered deltas: %v", c.tag, m, tamper.done(c.tag), c.mismatchList())
		}
	}
	t.Logf("forced: each Go client reported its one tampered delta (%s)", gos[0].mismatchList()[0])
	t.Logf("TestSpringRemoteRegions took %.1fs", time.Since(start).Seconds())
}
