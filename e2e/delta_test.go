package e2e

// Delta consistency (docs/eureka-api.md, "Hash code"). A client that keeps its registry
// only from deltas — exactly like the Netflix Java client (docs/eureka-api.md, "Delta") —
// must, after every delta it applies, hold a registry whose reconcile hash
// equals the delta's apps__hashcode, and must end up holding exactly what a
// full fetch returns.

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

const (
	dtChanges   = 500                   // registry changes the test makes
	dtWorkers   = 3                     // concurrent writers (disjoint instances)
	dtPace      = 15 * time.Millisecond // per worker between changes: ~2.5 s of changes
	dtFetchTick = 50 * time.Millisecond // delta client fetch period
	dtApps      = 6                     // applications the instances spread over
	dtSeedEnv   = "HEUREKA_DELTA_SEED"  // set to replay a run
	dtDeadline  = 45 * time.Second      // bound for the change phase
	dtConverge  = 15 * time.Second      // bound for the final convergence
	dtPrepWait  = 15 * time.Second      // bound for waits while preparing
	dtHashShown = 5                     // mismatch details logged
	dtLeaseSecs = 900                   // nothing may expire during the test
	dtStatusSet = "UP,DOWN,STARTING,OUT_OF_SERVICE"
)

// dtClient is a delta-only Eureka client: one full fetch at start (and on a
// hash mismatch, as the Java client's reconcile does), deltas afterwards.
type dtClient struct {
	base string // reader node's BaseURL

	mu         sync.Mutex
	local      map[string]edInstance // key APP/id
	fetches    int                   // delta fetches applied
	nonEmpty   int                   // deltas with at least one entry
	versions   map[string]bool       // distinct versions__delta seen
	mismatches []string              // hash mismatches (details)
	duplicates []string              // instances listed twice in one delta
	lastHash   string                // apps__hashcode of the last delta applied
	lastLocal  string                // local hash after the last delta
	errs       []string
	during     atomic.Int64 // delta fetches that saw a new version while changes ran
}

func newDTClient(base string) *dtClient {
	return &dtClient{base: base, local: map[string]edInstance{}, versions: map[string]bool{}}
}

// fullFetch replaces the local registry with a full fetch.
func (c *dtClient) fullFetch() error {
	doc, err := edFetch(c.base+"/eureka/apps/", "json")
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.local = map[string]edInstance{}
	for _, in := range doc.Instances {
		c.local[in.Key()] = in
	}
	return nil
}

// fetchDelta fetches one delta and applies it: ADDED and MODIFIED replace
// or add the instance by (app, id), DELETED removes it; then it compares
// the local hash with the delta's. It returns the delta's version.
func (c *dtClient) fetchDelta(changing bool) (string, error) {
	doc, err := edFetch(c.base+"/eureka/apps/delta", "json")
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for _, in := range doc.Instances {
		k := in.Key()
		if seen[k] && len(c.duplicates) < 10 {
			c.duplicates = append(c.duplicates, fmt.Sprintf("version %s lists %s more than once", doc.VersionsDelta, k))
		}
		seen[k] = true
		switch in.Action {
		case "ADDED", "MODIFIED":
			c.local[k] = in
		case "DELETED":
			delete(c.local, k)
		default:
			c.errs = append(c.errs, fmt.Sprintf("version %s: %s has actionType %q", doc.VersionsDelta, k, in.Action))
		}
	}
	c.fetches++
	if len(doc.Instances) > 0 {
		c.nonEmpty++
	}
	if !c.versions[doc.VersionsDelta] && changing {
		c.during.Add(1)
	}
	c.versions[doc.VersionsDelta] = true
	local := make([]edInstance, 0, len(c.local))
	for _, in := range c.local {
		local = append(local, in)
	}
	c.lastHash, c.lastLocal = doc.HashCode, edHashCode(local)
	if c.lastLocal != c.lastHash {
		c.mismatches = append(c.mismatches, fmt.Sprintf("delta version %s (%d entries): apps__hashcode %q, local hash after applying %q",
			doc.VersionsDelta, len(doc.Instances), c.lastHash, c.lastLocal))
		return doc.VersionsDelta, errHashMismatch
	}
	return doc.VersionsDelta, nil
}

var errHashMismatch = fmt.Errorf("hash mismatch")

// states returns the sorted State lines of the local registry.
func (c *dtClient) states() []string { return edStates(c.localInstances()) }

// run fetches a delta every dtFetchTick until stop is closed. On a hash
// mismatch it reconciles with a full fetch, as the Java client does (the
// mismatch is still counted and fails the test).
func (c *dtClient) run(stop <-chan struct{}, changing *atomic.Bool) {
	tick.Every(stop, dtFetchTick, func() {
		_, err := c.fetchDelta(changing.Load())
		switch {
		case err == errHashMismatch:
			if err := c.fullFetch(); err != nil {
				c.addErr("reconcile full fetch: " + err.Error())
			}
		case err != nil:
			c.addErr("delta fetch: " + err.Error())
		}
	})
}

func (c *dtClient) addErr(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) < 20 {
		c.errs = append(c.errs, s)
	}
}

// dtInstance is a writer's idea of one instance it owns.
type dtInstance struct {
	app, id string
	live    bool
	ldt     int64
	status  string
	md      map[string]string
}

// dtWriter makes changes to the instances it owns (no other writer touches
// them, so each instance's history is sequential).
type dtWriter struct {
	w     int
	rng   *rand.Rand
	nodes []*Node
	owned []*dtInstance
	next  int
	ldt   int64

	counts map[string]int
	errs   []string
}

func (w *dtWriter) node() *Node { return w.nodes[w.rng.IntN(len(w.nodes))] }

func (w *dtWriter) pickLive() *dtInstance {
	var live []*dtInstance
	for _, in := range w.owned {
		if in.live {
			live = append(live, in)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[w.rng.IntN(len(live))]
}

func (w *dtWriter) pickGone() *dtInstance {
	var gone []*dtInstance
	for _, in := range w.owned {
		if !in.live {
			gone = append(gone, in)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return gone[w.rng.IntN(len(gone))]
}

func (w *dtWriter) randomStatus() string {
	all := strings.Split(dtStatusSet, ",")
	return all[w.rng.IntN(len(all))]
}

func (w *dtWriter) randomMetadata() map[string]string {
	md := map[string]string{"zone": fmt.Sprintf("zone-%d", w.rng.IntN(3))}
	if w.rng.IntN(2) == 0 {
		md["build_id"] = strconv.Itoa(w.rng.IntN(1000)) // "_" is escaped in XML element names
	}
	if w.rng.IntN(3) == 0 {
		md["management.port"] = strconv.Itoa(9000 + w.rng.IntN(100))
	}
	return md
}

// register POSTs in (new or changed) through a random node.
func (w *dtWriter) register(in *dtInstance, olderLDT bool) {
	w.ldt++
	ldt := w.ldt
	if olderLDT {
		ldt = in.ldt - 1 // the stored record must win; still an ADDED delta entry
	} else {
		in.ldt = ldt
	}
	md := map[string]any{}
	for k, v := range in.md {
		md[k] = v
	}
	if len(md) == 0 {
		md["@class"] = edEmptyMapClass
	}
	extra := map[string]any{
		"status":             in.status,
		"metadata":           md,
		"lastDirtyTimestamp": edMillis(ldt),
		"vipAddress":         strings.ToLower(in.app) + ",delta-all",
		"leaseInfo":          map[string]any{"renewalIntervalInSecs": 30, "durationInSecs": dtLeaseSecs},
	}
	nd := w.node()
	w.expect("register", "POST", nd.URL("/eureka/apps/"+strings.ToLower(in.app)), RegisterBody(in.app, in.id, extra), http.StatusNoContent)
	in.live = true
}

func (w *dtWriter) expect(op, method, u string, body []byte, want int) {
	w.counts[op]++
	code, resp, err := edWrite(method, u, body)
	if err != nil {
		w.errs = append(w.errs, fmt.Sprintf("%s: %s %s: %v", op, method, u, err))
		return
	}
	if code != want {
		w.errs = append(w.errs, fmt.Sprintf("%s: %s %s: got %d %q, want %d", op, method, u, code, resp, want))
	}
}

func (w *dtWriter) instURL(nd *Node, in *dtInstance, suffix string) string {
	return nd.URL("/eureka/apps/" + in.app + "/" + url.PathEscape(in.id) + suffix)
}

// step makes one random change.
func (w *dtWriter) step() {
	r := w.rng.IntN(100)
	in := w.pickLive()
	if in == nil || r < 22 {
		w.next++
		in = &dtInstance{
			app:    fmt.Sprintf("DELTA-APP-%d", w.rng.IntN(dtApps)),
			id:     fmt.Sprintf("w%d-i%03d", w.w, w.next),
			status: w.randomStatus(),
			md:     w.randomMetadata(),
		}
		w.owned = append(w.owned, in)
		w.register(in, false)
		return
	}
	switch {
	case r < 40: // re-register with a changed status and/or metadata
		if w.rng.IntN(2) == 0 {
			in.status = w.randomStatus()
		} else {
			in.md = w.randomMetadata()
		}
		w.register(in, w.rng.IntN(10) == 0)
	case r < 52:
		w.expect("cancel", "DELETE", w.instURL(w.node(), in, ""), nil, http.StatusOK)
		in.live = false
	case r < 67:
		q := "?value=" + w.randomStatus()
		if w.rng.IntN(3) == 0 {
			w.ldt++
			q += "&lastDirtyTimestamp=" + edMillis(w.ldt)
		}
		w.expect("override", "PUT", w.instURL(w.node(), in, "/status"+q), nil, http.StatusOK)
	case r < 78:
		q := ""
		if w.rng.IntN(2) == 0 {
			q = "?value=UP"
		}
		w.expect("override-delete", "DELETE", w.instURL(w.node(), in, "/status"+q), nil, http.StatusOK)
	case r < 94:
		q := url.Values{}
		q.Set("zone", fmt.Sprintf("zone-%d", w.rng.IntN(5)))
		q.Set(fmt.Sprintf("k%d", w.rng.IntN(4)), strconv.Itoa(w.rng.IntN(100)))
		w.expect("metadata", "PUT", w.instURL(w.node(), in, "/metadata?"+q.Encode()), nil, http.StatusOK)
	default: // bring a cancelled instance back
		if gone := w.pickGone(); gone != nil {
			gone.status = w.randomStatus()
			w.register(gone, false)
		} else {
			w.register(in, false)
		}
	}
}

func TestDeltaConsistency(t *testing.T) {
	start := time.Now()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(dtSeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", dtSeedEnv, s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with %s=%d)", seed, dtSeedEnv, seed)

	c := StartCluster(t, 3, Options{ExtraArgs: edCacheArgs})
	leader := c.WaitLeader(t, 15*time.Second)
	reader := c.Followers(leader)[0]
	t.Logf("leader %s, delta client reads from follower %s", leader.ID, reader.ID)

	// A starting population, so the first deltas have something to modify.
	baseLDT := time.Now().UnixMilli() - 600_000
	writers := make([]*dtWriter, dtWorkers)
	for i := range writers {
		writers[i] = &dtWriter{w: i, rng: rand.New(rand.NewPCG(seed, uint64(i))), nodes: c.Nodes,
			ldt: baseLDT + int64(i)*1_000_000_000, counts: map[string]int{}}
		for range 5 {
			w := writers[i]
			w.next++
			in := &dtInstance{app: fmt.Sprintf("DELTA-APP-%d", w.rng.IntN(dtApps)), id: fmt.Sprintf("w%d-i%03d", i, w.next),
				status: w.randomStatus(), md: w.randomMetadata()}
			w.owned = append(w.owned, in)
			w.register(in, false)
		}
	}
	for _, w := range writers {
		if len(w.errs) > 0 {
			t.Fatalf("initial registrations failed: %v", w.errs)
		}
		w.counts = map[string]int{}
	}

	// Quiet cluster, and the reader's cached delta built from its current
	// registry: then the initial full fetch cannot be newer than any delta
	// the client reads afterwards.
	waitCommitStable(t, c, 300*time.Millisecond, dtPrepWait)
	client := newDTClient(reader.BaseURL())
	WaitFor(t, dtPrepWait, func() bool {
		st, err := reader.TryStatus()
		if err != nil {
			return false
		}
		d, err := edFetch(reader.URL("/eureka/apps/delta"), "json")
		if err != nil || d.VersionsDelta != strconv.FormatUint(st.RegistryVersion, 10) {
			return false
		}
		full, err := edFetch(reader.URL("/eureka/apps"), "json")
		return err == nil && len(full.Instances) == 5*dtWorkers && full.HashCode == d.HashCode
	}, "the reader's delta and full registry to reflect the initial registrations")
	if err := client.fullFetch(); err != nil {
		t.Fatal(err)
	}
	if n := len(client.states()); n != 5*dtWorkers {
		t.Fatalf("initial full fetch holds %d instances, want %d", n, 5*dtWorkers)
	}

	stop := make(chan struct{})
	var changing atomic.Bool
	changing.Store(true)
	var clientDone sync.WaitGroup
	clientDone.Add(1)
	go func() { defer clientDone.Done(); client.run(stop, &changing) }()
	stopClient := sync.OnceFunc(func() { close(stop); clientDone.Wait() })
	t.Cleanup(stopClient)

	// The changes: dtChanges in all, each writer paced, all concurrent with
	// the client's fetches.
	changeStart := time.Now()
	var wg sync.WaitGroup
	for i, w := range writers {
		n := dtChanges / dtWorkers
		if i < dtChanges%dtWorkers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace := time.NewTicker(dtPace)
			defer pace.Stop()
			deadline := time.Now().Add(dtDeadline)
			for range n {
				if time.Now().After(deadline) {
					w.errs = append(w.errs, "change phase deadline passed")
					return
				}
				w.step()
				<-pace.C
			}
		}()
	}
	wg.Wait()
	changing.Store(false)
	changeTime := time.Since(changeStart)
	ops := map[string]int{}
	total := 0
	for _, w := range writers {
		for op, n := range w.counts {
			ops[op] += n
			total += n
		}
		for _, e := range w.errs {
			t.Error(e)
		}
	}
	t.Logf("%d changes in %v: %v", total, changeTime.Round(time.Millisecond), ops)
	if total != dtChanges {
		t.Errorf("made %d changes, want %d", total, dtChanges)
	}

	// After the changes: once every node has applied the last change and the
	// reader's cached delta was rebuilt after it, the delta-only client must
	// converge on exactly the registry a full fetch returns.
	waitCommitStable(t, c, 300*time.Millisecond, dtPrepWait)
	WaitFor(t, dtPrepWait, func() bool {
		st, err := reader.TryStatus()
		if err != nil {
			return false
		}
		d, err := edFetch(reader.URL("/eureka/apps/delta"), "json")
		return err == nil && d.VersionsDelta == strconv.FormatUint(st.RegistryVersion, 10)
	}, "the reader's cached delta to be rebuilt after the last change")
	var full edDoc
	var fullErr error
	ok := Eventually(dtConverge, func() bool {
		full, fullErr = edFetch(reader.URL("/eureka/apps"), "json")
		if fullErr != nil {
			return false
		}
		client.mu.Lock()
		lastHash := client.lastHash
		client.mu.Unlock()
		return lastHash == full.HashCode && slices.Equal(client.states(), edStates(full.Instances))
	})
	stopClient()
	final := client.states()
	if !ok {
		dtDescribe(t, c)
		if fullErr != nil {
			t.Fatalf("full fetch after the changes: %v", fullErr)
		}
		t.Fatalf("delta client never converged on the full registry within %v: %s", dtConverge, diffKeys(edStates(full.Instances), final))
	}

	client.mu.Lock()
	t.Logf("delta client: %d delta fetches (%d non-empty, %d distinct versions, %d new versions while changes ran), %d instances at the end",
		client.fetches, client.nonEmpty, len(client.versions), client.during.Load(), len(final))
	for i, m := range client.mismatches {
		if i < dtHashShown {
			t.Errorf("hash mismatch: %s", m)
		}
	}
	if n := len(client.mismatches); n > 0 {
		t.Errorf("%d of %d applied deltas left the client with a hash other than the delta's apps__hashcode (want 0)", n, client.fetches)
	}
	for _, d := range client.duplicates {
		t.Errorf("delta duplicates: %s", d)
	}
	for _, e := range client.errs {
		t.Errorf("delta client: %s", e)
	}
	during := client.during.Load()
	client.mu.Unlock()
	if during < 5 {
		t.Errorf("only %d deltas with a new version were fetched while the changes ran; the test did not exercise concurrency", during)
	}

	// Every node, in both formats, serves that same registry, and every
	// node's delta carries its hash.
	wantHash := edHashCode(client.localInstances())
	var problems []string
	ok = Eventually(dtConverge, func() bool {
		problems = problems[:0]
		for _, nd := range c.Nodes {
			for _, format := range []string{"json", "xml"} {
				doc, err := edFetch(nd.URL("/eureka/apps/"), format)
				switch {
				case err != nil:
					problems = append(problems, fmt.Sprintf("%s %s full fetch: %v", nd.ID, format, err))
				case !slices.Equal(edStates(doc.Instances), final):
					problems = append(problems, fmt.Sprintf("%s %s full fetch differs from the delta client's registry: %s",
						nd.ID, format, diffKeys(final, edStates(doc.Instances))))
				case doc.HashCode != wantHash:
					problems = append(problems, fmt.Sprintf("%s %s full fetch: apps__hashcode %q, want %q", nd.ID, format, doc.HashCode, wantHash))
				}
				d, err := edFetch(nd.URL("/eureka/apps/delta"), format)
				switch {
				case err != nil:
					problems = append(problems, fmt.Sprintf("%s %s delta: %v", nd.ID, format, err))
				case d.HashCode != wantHash:
					problems = append(problems, fmt.Sprintf("%s %s delta: apps__hashcode %q, want %q", nd.ID, format, d.HashCode, wantHash))
				}
			}
		}
		return len(problems) == 0
	})
	if !ok {
		dtDescribe(t, c)
		for _, p := range problems {
			t.Error(p)
		}
	}
	t.Logf("TestDeltaConsistency took %v", time.Since(start).Round(time.Millisecond))
}

// dtDescribe logs, for each node, its registry version and what its JSON and
// XML documents say (version, hash, size), to tell a stale cached document
// from a registry that differs.
func dtDescribe(t *testing.T, c *Cluster) {
	t.Helper()
	for _, nd := range c.Nodes {
		st, err := nd.TryStatus()
		if err != nil {
			t.Logf("%s: status: %v", nd.ID, err)
			continue
		}
		line := fmt.Sprintf("%s: registry_version=%d instances=%d commit=%d applied=%d", nd.ID, st.RegistryVersion, st.Instances, st.CommitIndex, st.AppliedIndex)
		for _, path := range []string{"/eureka/apps/", "/eureka/apps/delta"} {
			for _, format := range []string{"json", "xml"} {
				d, err := edFetch(nd.URL(path), format)
				if err != nil {
					line += fmt.Sprintf("; %s %s: %v", path, format, err)
					continue
				}
				line += fmt.Sprintf("; %s %s: versions__delta=%s hash=%s instances=%d", path, format, d.VersionsDelta, d.HashCode, len(d.Instances))
			}
		}
		t.Log(line)
	}
}

// localInstances returns the client's registry.
func (c *dtClient) localInstances() []edInstance {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]edInstance, 0, len(c.local))
	for _, in := range c.local {
		out = append(out, in)
	}
	return out
}
