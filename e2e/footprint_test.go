package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/bench"
	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/collect"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

// BenchmarkFootprint is the memory and scale benchmark (BENCHMARKS.md,
// "Memory footprint"; run it with `go test ./e2e -run XXX -bench Footprint
// -benchtime 1x -v`): a 3-node cluster started with default flags and no
// environment variables, BENCH_INSTANCES instances (default 10,000) of
// `heureka bench`'s workload (500 apps, BENCH_APPS to change it, ~1 KB of
// varied metadata each),
// registered by 64 writers and then renewed once each by 64 clients (server
// CPU per registration and per renewal, all three nodes). Between the two
// it waits until no node has a snapshot due: the snapshots the
// registrations cause are charged to them (CPU above the idle rate while
// waiting), not to the renewals. Each figure is also given net of the
// nodes' idle rate (measured with the registry empty and full), which a
// slower phase on a loaded machine carries more of. Then every read
// variant is warmed on every node: the full registry, the delta, each
// application, each VIP and secure VIP, in JSON and XML, plain and gzip
// (BENCH_VARIANTS=clients: JSON gzip only, what Eureka clients read). It
// reports the full registry's size, every node's cached reads of the full
// registry, the delta and one application against `heureka limit-server`
// serving the same bytes (alternating in halves, as heureka bench does,
// with the other nodes' CPU during each side's halves; a document that
// changed during its turn fails the run). The delta read is of a redeploy
// of 2 % of the instances (the first fiftieth of the applications
// registered again before each node's delta turn, once the registrations
// are older than the delta retention, which a run of 10,000 waits for),
// and each node's turns, and its delta turn after the writes, start from
// a quiet cluster (settle),
// each node's RSS (the most it reached from the warm-up on, 5 s after the
// reads, and once quiet) and Go heap, and then how long a killed follower
// takes after its restart to serve the whole registry, and a new fourth
// node to join and hold it. BENCH_SERVE_ARGS adds flags to every
// node (to compare a setting against the defaults). With BENCH_PPROF_DIR
// set, the nodes serve /debug/pprof and each node's heap profile is written
// there, CPU profiles of every node covering the registrations, the wait
// for snapshots, the renewals and the reads (profileCPU), and the logs of the
// restarted and the joining node. BENCH_STOP=register ends the run after
// the registrations, BENCH_STOP=renew after the renewals (their CPU at a
// size whose full run takes long), BENCH_STOP=warm after the first build
// of every document (its peak RSS, logged with when and during what it
// came). BENCH_PLAIN_READS=1 keeps plain reads of
// the full registry coming on every node while the memory is measured.
func BenchmarkFootprint(b *testing.B) {
	wl := bench.DefaultWorkload()
	if s := os.Getenv("BENCH_INSTANCES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < wl.Apps {
			b.Fatalf("BENCH_INSTANCES=%q: want a number >= %d", s, wl.Apps)
		}
		wl.Instances = v
	}
	if s := os.Getenv("BENCH_APPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > wl.Instances {
			b.Fatalf("BENCH_APPS=%q: want a number from 1 to the instances", s)
		}
		wl.Apps = v
	}
	n := wl.Instances
	clientsOnly := os.Getenv("BENCH_VARIANTS") == "clients"
	pprofDir := os.Getenv("BENCH_PPROF_DIR")
	args := strings.Fields(os.Getenv("BENCH_SERVE_ARGS")) // e.g. --memory-limit=off, to compare
	if pprofDir != "" {
		args = append(args, "--pprof")
	}
	c := StartCluster(b, 3, Options{DefaultRaftTimings: true, ExtraArgs: args})
	leader := c.WaitLeader(b, 10*time.Second)
	follower := c.Followers(leader)[0]
	client := bench.NewClient(64)
	ctx := context.Background()

	// What the three nodes spend doing nothing is a rate (heartbeats,
	// tickers, the collector): a phase that runs longer on a loaded
	// machine carries more of it per operation, so the figures are also
	// given net of it, the rate measured before the registrations (empty
	// registry) and after them (full).
	idleEmpty := idleRate(c, 3*time.Second, false)
	stopProfile := profileCPU(b, c, pprofDir, "register", n)
	cpu0, start := clusterCPU(c), time.Now()
	// On a loaded machine a leader election may fail some registrations:
	// those are sent again (a few rounds), as clients would.
	todo := make([]int, n)
	for i := range todo {
		todo[i] = i
	}
	var reg bench.Result
	for round := 0; len(todo) > 0; round++ {
		if round == 5 {
			b.Fatalf("register: %d instances still failing after %d rounds (%s)", len(todo), round, reg.FirstError)
		}
		var mu sync.Mutex
		var failed []int
		reg = bench.RunFunc(ctx, bench.LoadConfig{Concurrency: 64, Duration: time.Hour, MaxRequests: int64(len(todo))},
			func(ctx context.Context, w, i int, seq int64) (int64, error) {
				k := todo[seq]
				err := registerInstance(c, wl, k)
				if err != nil {
					mu.Lock()
					failed = append(failed, k)
					mu.Unlock()
				}
				return 0, err
			})
		if len(failed) > 0 {
			b.Logf("register round %d: %d failed (%s), sending them again", round, len(failed), reg.FirstError)
			time.Sleep(2 * time.Second)
		}
		todo = failed
	}
	regCPU, regTook := clusterCPU(c)-cpu0, time.Since(start)
	regEnd := time.Now()
	stopProfile()
	b.Logf("CPU per registration during the burst %.0f µs (3 nodes, %d), %.0f registrations/s, load average %s",
		regCPU/float64(n)*1e6, n, float64(n)/regTook.Seconds(), loadAvg())
	if os.Getenv("BENCH_STOP") == "register" {
		return
	}
	// The registrations' writes make every node snapshot the registry
	// (Raft looks every 30-60 s), so snapshots land after the burst too:
	// they are the registrations' work, and must neither vanish from the
	// figures nor be charged to the renewals. Wait until no node has one
	// due, and charge the wait's CPU above the idle rate (measured with
	// the same polling of /v1/status every 2 s) to the registrations.
	stopProfile = profileCPU(b, c, pprofDir, "settle", n)
	cpu1, settleStart := clusterCPU(c), time.Now()
	settled := false
	for range 150 {
		if settled = snapshotsSettled(c, n); settled {
			time.Sleep(time.Second) // the log cut after the last snapshot
			break
		}
		time.Sleep(2 * time.Second)
	}
	settleCPU, settleTook := clusterCPU(c)-cpu1, time.Since(settleStart)
	stopProfile()
	if !settled {
		b.Logf("snapshots still due after %s: the renewals below include them", settleTook.Round(time.Second))
	}
	idleFull, idlePolled := idleRate(c, 5*time.Second, false), idleRate(c, 6*time.Second, true)
	snapCPU := max(0, settleCPU-idlePolled*settleTook.Seconds())
	regAll := (regCPU + snapCPU) / float64(n) * 1e6
	regNet := (regCPU - (idleEmpty+idleFull)/2*regTook.Seconds() + snapCPU) / float64(n) * 1e6
	b.Logf("settled in %s: %.2f CPU-s, %.2f above the idle rate with polling (%.3f CPU-s/s): %.0f µs per registration; "+
		"%d snapshots on 3 nodes since the start; CPU per registration with its snapshots %.0f µs, net of idle %.0f µs "+
		"(idle %.3f CPU-s/s empty, %.3f full), load average %s",
		settleTook.Round(100*time.Millisecond), settleCPU, snapCPU, idlePolled, snapCPU/float64(n)*1e6,
		snapshotCount(c), regAll, regNet, idleEmpty, idleFull, loadAvg())
	gc0 := clusterGCs(c)
	stopProfile = profileCPU(b, c, pprofDir, "renew", n)
	// Every instance renews in rounds until at least 100,000 renewals: at
	// 10,000 one round takes 0.4 s, too short a window for a CPU figure
	// to compare with 200,000's.
	rounds := (100_000 + n - 1) / n
	cpu0, start = clusterCPU(c), time.Now()
	ren := bench.RunFunc(ctx, bench.LoadConfig{Concurrency: 64, Duration: time.Hour, MaxRequests: int64(n * rounds)},
		func(ctx context.Context, w, i int, seq int64) (int64, error) {
			k := int(seq) % n
			code, body, _, err := TryDo(http.MethodPut, c.Nodes[k%3].URL("/eureka/apps/"+wl.App(k)+"/"+wl.ID(k)), nil)
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("renew %d: %d %s", k, code, body)
			}
			return 0, err
		})
	renCPU, renTook := clusterCPU(c)-cpu0, time.Since(start)
	stopProfile()
	// The collector's work per renewal is its cycles times the heap each
	// marks: logged to tell a growing heap from more cycles.
	gcs := clusterGCs(c) - gc0
	var heap uint64
	for _, nd := range c.Nodes {
		if st, err := nd.TryStatus(); err == nil {
			heap += st.Memory.HeapAllocBytes
		}
	}
	b.Logf("collections during the renewals: %d on 3 nodes (%.1f per 10,000 renewals), heap allocated after: %.0f MiB on 3 nodes",
		gcs, float64(gcs)/float64(max(ren.Requests, 1))*1e4, float64(heap)/(1<<20))
	if ren.Errors > 0 {
		b.Logf("renew: %d of %d failed (%s)", ren.Errors, ren.Requests, ren.FirstError)
	}
	renOp := renCPU / float64(max(ren.Requests, 1)) * 1e6
	renNet := (renCPU - idleFull*renTook.Seconds()) / float64(max(ren.Requests, 1)) * 1e6
	b.Logf("registered %d instances in %s, renewed each %d times in %s; CPU per renewal %.0f µs, net of idle %.0f µs, load average %s", n,
		regTook.Round(time.Millisecond), rounds, renTook.Round(time.Millisecond), renOp, renNet, loadAvg())
	for _, nd := range c.Nodes { // which mappings the file-backed memory is, and the log behind it
		b.Logf("after the renewals, %s", logFootprint(nd))
	}
	if os.Getenv("BENCH_STOP") == "renew" {
		return
	}

	paths := []string{"/eureka/apps", "/eureka/apps/delta"}
	for a := 0; a < wl.Apps; a++ {
		app := wl.AppName(a)
		paths = append(paths, "/eureka/apps/"+app)
		if !clientsOnly {
			paths = append(paths, "/eureka/vips/"+strings.ToLower(app), "/eureka/svips/"+strings.ToLower(app))
		}
	}
	type variant struct{ accept, enc string }
	variants := []variant{{"application/json", "gzip"}}
	if !clientsOnly {
		variants = append(variants, variant{"application/json", ""}, variant{"application/xml", ""}, variant{"application/xml", "gzip"})
	}
	// Each node's RSS is sampled from here until the memory is measured:
	// what it holds while it builds and serves, not only once quiet.
	// With the highest, when it came, during what (phase) and where the
	// Go runtime's memory was near it: a peak in the warm-up was
	// 500-1,100 MiB above what the node held once quiet.
	var phase atomic.Value
	phase.Store("the warm-up of n1")
	peaks := make([]*peakRSS, len(c.Nodes))
	for i, nd := range c.Nodes {
		peaks[i] = watchPeak(nd, &phase)
	}
	warm := time.Now()
	sizes := map[variant]int{}
	// A document's first fetch builds it: a million instances' full
	// registry took longer than the bench client's 30 s.
	warmClient := &http.Client{Timeout: 10 * time.Minute}
	for _, nd := range c.Nodes {
		phase.Store("the warm-up of " + nd.ID)
		for _, vr := range variants {
			h := http.Header{"Accept": {vr.accept}}
			if vr.enc != "" {
				h.Set("Accept-Encoding", vr.enc)
			}
			for _, p := range paths {
				body, _, err := bench.Fetch(warmClient, nd.URL(p), h)
				if err != nil {
					b.Fatal(err)
				}
				if p == "/eureka/apps" {
					sizes[vr] = len(body)
				}
			}
		}
	}
	b.Logf("warmed %d documents × %d variants on 3 nodes in %s", len(paths), len(variants), time.Since(warm).Round(time.Millisecond))
	for i, nd := range c.Nodes {
		b.Logf("after the warm-up, %s; its peak so far: %s", logFootprint(nd), peaks[i])
	}
	if os.Getenv("BENCH_STOP") == "warm" {
		for _, p := range peaks {
			p.stop()
		}
		return
	}
	phase.Store("the wait for the registrations to leave the delta")

	// Cached reads against the limit on every node, as Eureka clients
	// read: JSON, gzip accepted; heureka and the limit take turns in
	// halves.
	hdr := http.Header{"Accept": {"application/json"}, "Accept-Encoding": {"gzip"}}
	var rows []string
	lowest := map[string]float64{}
	// Halves long enough for dozens of reads of the large documents, and
	// for the small ones long enough that a collection, a snapshot or
	// another node's idle return on the same cores, which take a second
	// or two, do not decide a turn: with 2 s turns one application's
	// document read at 0.73 of the limit on one node and 0.90-0.99 on
	// the others.
	targets := []readTarget{{name: "full registry", path: "/eureka/apps", conc: 8, half: 8 * time.Second},
		{name: "delta", path: "/eureka/apps/delta", conc: 32, half: 4 * time.Second},
		{name: "one app", path: "/eureka/apps/" + wl.AppName(42), conc: 32, half: 4 * time.Second}}
	// The delta read is of a fixed set of changes, the same for every
	// node: the registrations' own entries would age out during the
	// turns, and heureka would answer a smaller delta than the bytes the
	// limit serves (at a million, a node's turn read 18,792 a second of a
	// delta emptying against the limit's 75 MiB). Once the registrations
	// are older than the retention, the applications of the first fiftieth
	// of the instances register again before each node's delta turn: the
	// delta is then those instances alone, a redeploy of 2 % of the fleet
	// (20,000 instances in 1,000 applications at a million), and none of
	// it ages out while the turn lasts.
	if wait := time.Until(regEnd.Add(fsm.DefaultDeltaRetention + 2*time.Second)); wait > 0 {
		b.Logf("waiting %s for the registrations to age out of the delta", wait.Round(time.Second))
		time.Sleep(wait)
	}
	deltaApps := max(1, wl.Apps/50)
	stopProfile = profileCPU(b, c, pprofDir, "reads", n) // what the other nodes do meanwhile, too
	for _, nd := range c.Nodes {
		// What the nodes do after a busy spell (the idle return's
		// collection, about 30 s after it at a million; a snapshot the
		// writes made due; the refresh rebuilding what they changed)
		// takes a CPU-second or more, and fell in whichever side of a
		// later turn was reading: the other nodes at 0.4-0.6 CPU-s a
		// second in one side of a one-application turn, which read at
		// ×0.52 or ×1.07 for it. Each node's turns start from a quiet
		// cluster.
		phase.Store(fmt.Sprintf("the wait before %s's turns", nd.ID))
		settle(b, c, n, idleFull, 3*time.Minute)
		for _, tg := range targets {
			if tg.name == "delta" {
				phase.Store(fmt.Sprintf("the redeploy before %s's delta turn", nd.ID))
				registerAgain(b, c, wl, deltaApps)
				redeploy, _, err := bench.Fetch(client, nd.URL(tg.path), hdr)
				if err != nil {
					b.Fatal(err)
				}
				// At most 2 minutes, so that the turn ends before the
				// redeploy ages out of the delta (a 2 min 41 s wait left
				// a node an empty delta to read).
				refresh := cache.DefaultConfig().UpdateInterval
				time.Sleep(refresh + 5*time.Second) // the refresh's rebuild
				settle(b, c, n, idleFull, fsm.DefaultDeltaRetention-refresh-65*time.Second)
				tg.minBytes = len(redeploy) / 2
			}
			phase.Store(fmt.Sprintf("%s's %s turn", nd.ID, tg.name))
			row, ratio := readAgainstLimit(b, client, nd, c.Followers(nd) /* every other node */, nodeRole(nd, leader), tg, hdr)
			rows = append(rows, row)
			if r, ok := lowest[tg.name]; !ok || ratio < r {
				lowest[tg.name] = ratio
			}
		}
	}
	stopProfile()
	b.Logf("lowest ratio to the limit over the 3 nodes: full registry %.2f, delta %.2f, one app %.2f",
		lowest["full registry"], lowest["delta"], lowest["one app"])

	if os.Getenv("BENCH_PLAIN_READS") != "" {
		// eureka-js-client's read (the full registry, JSON, no gzip) kept
		// coming on every node until the memory is measured.
		plainCtx, stopPlain := context.WithCancel(ctx)
		defer stopPlain()
		for _, nd := range c.Nodes {
			go func(url string) { // ten reads a second, a fleet of 300 clients
				for plainCtx.Err() == nil {
					_, _, _ = bench.Fetch(client, url, http.Header{"Accept": {"application/json"}})
					time.Sleep(100 * time.Millisecond)
				}
			}(nd.URL("/eureka/apps"))
		}
	}
	phase.Store("the wait once the turns are done")
	time.Sleep(5 * time.Second) // let the runtime collect the warm-up's garbage
	after5s := make([]float64, len(c.Nodes))
	for i, nd := range c.Nodes {
		after5s[i] = rssMB(nd.PID())
	}
	// A node returns its free memory once it has been quiet for a while
	// in proportion to its live heap (about 30 s at a million): the RSS a
	// quiet node settles at is read after that.
	time.Sleep(quietWait(n))
	for i, p := range peaks {
		p.stop()
		b.Logf("%s's RSS at most: %s", c.Nodes[i].ID, p)
	}
	var mem []string
	for i, nd := range c.Nodes {
		st := patientStatus(b, nd)
		rss := rssMB(nd.PID())
		role := nodeRole(nd, leader)
		anon, file := procStatusMiB(nd.PID(), "RssAnon:"), procStatusMiB(nd.PID(), "RssFile:")
		mem = append(mem, fmt.Sprintf("| %s (%s) | %.0f MiB | %.0f MiB | %.0f MiB | %.0f / %.0f MiB | %.0f MiB | %.0f MiB |",
			nd.ID, role, peaks[i].mib, after5s[i], rss, anon, file,
			float64(st.Memory.HeapInuseBytes)/(1<<20), float64(st.Memory.HeapAllocBytes)/(1<<20)))
		b.ReportMetric(rss, nd.ID+"-rss-MiB")
		b.ReportMetric(peaks[i].mib, nd.ID+"-rss-peak-MiB")
		b.Logf("memory measured, %s", logFootprint(nd))
		if pprofDir != "" {
			body, _, err := bench.Fetch(client, nd.URL("/debug/pprof/heap"), nil)
			if err != nil {
				b.Fatal(err)
			}
			f := filepath.Join(pprofDir, fmt.Sprintf("heap-%d-%s-%s.pb.gz", n, nd.ID, role))
			if err := os.WriteFile(f, body, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}

	// A killed follower restarts and serves the whole registry again; a
	// new node joins and catches up.
	servesAll := func(nd *Node) bool {
		st, err := nd.TryStatus()
		if err != nil || st.Instances != n {
			return false
		}
		code, _, _, err := TryDo(http.MethodGet, nd.URL("/eureka/apps/"+wl.AppName(0)), nil, "Accept", "application/json")
		return err == nil && code == http.StatusOK
	}
	start = time.Now()
	follower.Restart(b)
	WaitFor(b, 120*time.Second, func() bool { return servesAll(follower) }, "the restarted follower serves the registry")
	restart := time.Since(start)
	start = time.Now()
	n4 := c.StartNode(b, "n4", leader.HTTPAddr)
	WaitFor(b, 300*time.Second, func() bool { return servesAll(n4) }, "the new node serves the registry")
	join := time.Since(start)
	if pprofDir != "" { // what the restarted and the joining node did, with timestamps
		for _, nd := range []*Node{follower, n4} {
			if log, err := os.ReadFile(nd.LogPath); err == nil {
				_ = os.WriteFile(filepath.Join(pprofDir, fmt.Sprintf("log-%d-%s.txt", n, nd.ID)), log, 0o644)
			}
		}
	}

	variantNames := "JSON and XML, plain and gzip"
	if clientsOnly {
		variantNames = "JSON gzip"
	}
	b.Logf("\n%d instances, %s, load average %s, warm: %s\n\n| node | RSS at most, warm-up and reads | RSS 5 s after | RSS once quiet | anon / file-backed | Go heap in use | heap live (alloc) |\n|---|---|---|---|---|---|---|\n%s\n\n"+
		"full registry (GET /eureka/apps JSON): %.1f MiB plain, %.1f MiB gzip\n"+
		"CPU per registration %.0f µs (%.0f µs during the burst, the rest its snapshots after it; net of idle %.0f µs), per renewal %.0f µs (net of idle %.0f µs) (3 nodes, %d each); %.0f registrations/s, %.0f renewals/s\n"+
		"restarted follower serves the whole registry after %s; a joining node after %s\n\n"+
		"| read | heureka req/s | p99 | GCs (4 s) | RSS at most | limit req/s | p99 | other nodes' CPU (heureka / limit halves) | ratio |\n|---|---|---|---|---|---|---|---|---|\n%s",
		n, time.Now().UTC().Format("2006-01-02 15:04 UTC"), loadAvg(), variantNames, strings.Join(mem, "\n"),
		float64(sizes[variant{"application/json", ""}])/(1<<20), float64(sizes[variant{"application/json", "gzip"}])/(1<<20),
		regAll, regCPU/float64(n)*1e6, regNet, renOp, renNet, n, float64(n)/regTook.Seconds(), ren.PerSec,
		restart.Round(10*time.Millisecond), join.Round(10*time.Millisecond), strings.Join(rows, "\n"))
}

// patientStatus is nd's /v1/status, asked again for up to 2 minutes: at a
// million instances a node busy with a snapshot or a collection has let
// a status request outlast the client's 2 s. How long it took is logged
// rather than failing the run, since the figures after it still hold.
func patientStatus(b *testing.B, nd *Node) Status {
	b.Helper()
	start := time.Now()
	for {
		st, err := nd.TryStatus()
		if err == nil {
			if waited := time.Since(start); waited > 2*time.Second {
				b.Logf("%s answered GET /v1/status after %s", nd.ID, waited.Round(100*time.Millisecond))
			}
			return st
		}
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("%s: no answer to GET /v1/status for %s: %v", nd.ID, time.Since(start).Round(time.Second), err)
		}
		b.Logf("%s: GET /v1/status: %v; asking again", nd.ID, err)
		time.Sleep(time.Second)
	}
}

// snapshotsSettled reports whether every node holds the n instances and
// has no snapshot due: fewer log entries since its last snapshot than its
// threshold. (Raft cuts the log right after it records a snapshot, in the
// same call.)
func snapshotsSettled(c *Cluster, n int) bool {
	for _, nd := range c.Nodes {
		st, err := nd.TryStatus()
		if err != nil || st.Instances != n || st.SnapshotThreshold == 0 || st.LastLogIndex-st.LastSnapshotIndex >= st.SnapshotThreshold {
			return false
		}
	}
	return true
}

// clusterGCs is the number of collections the nodes ran since they
// started.
func clusterGCs(c *Cluster) uint32 {
	var sum uint32
	for _, nd := range c.Nodes {
		if st, err := nd.TryStatus(); err == nil {
			sum += st.Memory.NumGC
		}
	}
	return sum
}

// idleRate is the CPU the cluster's nodes spend per second over d while
// nothing is asked of them (polled: but /v1/status of every node every
// 2 s, as while waiting for snapshots).
func idleRate(c *Cluster, d time.Duration, polled bool) float64 {
	cpu0, start := clusterCPU(c), time.Now()
	for time.Since(start) < d {
		time.Sleep(min(2*time.Second, d-time.Since(start)))
		if polled {
			for _, nd := range c.Nodes {
				_, _ = nd.TryStatus()
			}
		}
	}
	return (clusterCPU(c) - cpu0) / time.Since(start).Seconds()
}

// snapshotCount is the number of snapshots the nodes persisted since they
// started (Raft's snapshot.persist timing count in /metrics), or -1.
func snapshotCount(c *Cluster) int {
	total := 0
	for _, nd := range c.Nodes {
		fams, err := scrape(nd)
		if err != nil {
			return -1
		}
		v, ok := collect.Find(fams, "heureka_raft_snapshot_persist", nil)
		if !ok {
			return -1
		}
		total += int(v)
	}
	return total
}

// profileCPU takes back-to-back CPU profiles (5 s each) of every node until
// the returned stop is called, which waits for the profiles under way; they
// are written to dir as cpu-<phase>-<instances>-<node>-<k>.pb.gz, and `go
// tool pprof` merges one node's files into the profile of the whole phase.
// With dir empty it does nothing.
func profileCPU(b *testing.B, c *Cluster, dir, phase string, n int) (stop func()) {
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	client := bench.NewClient(4)
	for _, nd := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !tick.Stopped(done); k++ {
				body, _, err := bench.Fetch(client, nd.URL("/debug/pprof/profile?seconds=5"), nil)
				if err != nil {
					b.Logf("cpu profile of %s: %v", nd.ID, err)
					return
				}
				f := filepath.Join(dir, fmt.Sprintf("cpu-%s-%d-%s-%03d.pb.gz", phase, n, nd.ID, k))
				if err := os.WriteFile(f, body, 0o644); err != nil {
					b.Logf("cpu profile of %s: %v", nd.ID, err)
					return
				}
			}
		}()
	}
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	b.Cleanup(stop) // before the cluster's own cleanup stops the nodes
	return stop
}

// loadAvg is the first three fields of /proc/loadavg, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// rssMB is the resident size of process pid in MiB, or -1.
func rssMB(pid int) float64 { return procStatusMiB(pid, "VmRSS:") }

// procStatusMiB is a kB field of /proc/pid/status (e.g. "RssAnon:", the
// process's own memory, or "RssFile:", mapped file pages such as bolt's
// log and the binary's text) in MiB, or -1.
func procStatusMiB(pid int, field string) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}

// sampleRSS keeps the highest RSS of process pid in *peak, sampled every
// 50 ms until the returned stop is called.
func sampleRSS(pid int, peak *float64) (stop func()) {
	return everyRSS(pid, func(rss float64, _ time.Time) { *peak = max(*peak, rss) })
}

// everyRSS calls fn with the RSS of process pid and the time it was read,
// every 50 ms until the returned stop is called.
func everyRSS(pid int, fn func(rss float64, at time.Time)) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for !tick.Stopped(done) {
			fn(rssMB(pid), time.Now())
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() { close(done); <-finished }
}

// peakRSS is the highest RSS sampled from one node, in MiB: when it
// came, the benchmark's phase then, and the Go runtime's memory as read
// from the node's /metrics near it.
type peakRSS struct {
	mu      sync.Mutex
	mib     float64
	at      time.Time
	phase   string
	runtime string
	stop    func()
}

// watchPeak samples nd's RSS until stop is called, keeping the highest
// and what phase held then. The node's runtime memory is read again when
// the RSS has grown by 32 MiB since it was last read, at most twice a
// second: near the peak, without a scrape in every sample.
func watchPeak(nd *Node, phase *atomic.Value) *peakRSS {
	p := &peakRSS{}
	read, readAt := 0.0, time.Time{}
	p.stop = everyRSS(nd.PID(), func(rss float64, now time.Time) {
		p.mu.Lock()
		if rss > p.mib {
			p.mib, p.at, p.phase = rss, now, phase.Load().(string)
		}
		p.mu.Unlock()
		if rss < read+32 || now.Sub(readAt) < 500*time.Millisecond {
			return
		}
		rt := runtimeMemory(nd)
		read, readAt = rss, now
		p.mu.Lock()
		if rss >= p.mib {
			p.runtime = fmt.Sprintf("%s (RSS %.0f MiB at %s)", rt, rss, now.UTC().Format("15:04:05"))
		}
		p.mu.Unlock()
	})
	return p
}

// String says the peak, when and during what it came, and the runtime's
// memory read nearest before it.
func (p *peakRSS) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%.0f MiB at %s during %s; Go runtime then: %s", p.mib, p.at.UTC().Format("15:04:05.0"), p.phase, p.runtime)
}

// settle waits until the cluster of n instances has been quiet for
// quietWait(n): no node with a snapshot due, and the nodes' CPU within
// twice idle (their rate with nothing asked of them, not polled) plus a
// tenth of a CPU-second a second, in every second of it (the polling
// here adds a little; a collection of the million, a CPU-second or
// more). A spike starts the wait again. It gives up after most, and says
// so.
func settle(b *testing.B, c *Cluster, n int, idle float64, most time.Duration) {
	b.Helper()
	need, limit := quietWait(n), idle*2+0.1
	start := time.Now()
	quietSince := start
	for time.Since(quietSince) < need {
		if time.Since(start) > most {
			b.Logf("the cluster was not quiet for %s within %s: the turn starts anyway", need, most)
			return
		}
		if idleRate(c, time.Second, false) > limit || !snapshotsSettled(c, n) {
			quietSince = time.Now()
		}
	}
	b.Logf("the cluster quiet for %s after %s", need.Round(100*time.Millisecond), time.Since(start).Round(time.Second))
}

// registerAgain registers the instances of wl's first apps applications
// again, as they are, through the nodes in turn: each enters the delta
// anew.
func registerAgain(b *testing.B, c *Cluster, wl bench.Workload, apps int) {
	b.Helper()
	var keys []int
	for i := range wl.Instances {
		if i%wl.Apps < apps {
			keys = append(keys, i)
		}
	}
	res := bench.RunFunc(context.Background(), bench.LoadConfig{Concurrency: 64, Duration: time.Hour, MaxRequests: int64(len(keys))},
		func(ctx context.Context, w, i int, seq int64) (int64, error) {
			return 0, registerInstance(c, wl, keys[seq])
		})
	if res.Errors > 0 {
		b.Fatalf("registering %d instances again: %d failed (%s)", len(keys), res.Errors, res.FirstError)
	}
}

// registerInstance registers instance k of wl as the Spring Cloud client
// sends it, through the nodes in turn.
func registerInstance(c *Cluster, wl bench.Workload, k int) error {
	code, body, _, err := TryDo(http.MethodPost, c.Nodes[k%len(c.Nodes)].URL("/eureka/apps/"+wl.App(k)),
		bench.RegisterBody(wl.Spec(k)), "Content-Type", "application/json")
	if err == nil && code != http.StatusNoContent {
		err = fmt.Errorf("register %d: %d %s", k, code, body)
	}
	return err
}

// readTarget is a document the Footprint benchmark reads on every node.
type readTarget struct {
	name, path string
	conc       int           // concurrent readers
	half       time.Duration // how long each side reads in one turn
	// minBytes is the least the document may hold at the turn's start
	// (the delta: half the redeploy it is meant to show).
	minBytes int
}

// readAgainstLimit reads tg on nd, JSON with gzip accepted, against
// `heureka limit-server` serving the bytes nd answered, the two taking
// turns in halves of tg.half twice; it returns the result as a table row,
// and heureka's rate over the limit's. Reads under way when a half ends
// finish and count, the half's time with them: a full registry of a
// million takes a reader about a second, and cutting the half at 2 s
// dropped the reads under way and left 5 to 16 that finished, a ratio
// that moved by a step of 0.1 or more with one read. The row also gives
// the other nodes' CPU during each side's halves: on shared cores their
// own work (a snapshot, the collection of an idle return) takes from
// whichever side is reading, and a ratio read while it did says so.
func readAgainstLimit(b *testing.B, client *http.Client, nd *Node, others []*Node, role string, tg readTarget, hdr http.Header) (string, float64) {
	b.Helper()
	ctx := context.Background()
	body, _, err := bench.Fetch(client, nd.URL(tg.path), hdr)
	if err != nil {
		b.Fatal(err)
	}
	if len(body) < tg.minBytes {
		b.Errorf("%s on %s holds %d bytes at the turn's start, want at least %d: not the document the turn means to read",
			tg.path, nd.ID, len(body), tg.minBytes)
	}
	limit, err := bench.StartLimit(Binary(b), body, "application/json", "", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer limit.Stop() // a full registry's limit holds hundreds of MB: one at a time
	lc := bench.LoadConfig{Concurrency: tg.conc, Duration: tg.half, Drain: time.Minute}
	var hs, ls []bench.Result
	gcs := uint32(0) // nd's collections while it serves
	peak := 0.0      // and its RSS
	var hOthers, lOthers othersLoad
	for range 2 {
		gc0 := patientStatus(b, nd).Memory.NumGC
		stop := sampleRSS(nd.PID(), &peak)
		hs = append(hs, hOthers.during(others, func() bench.Result {
			return bench.Run(ctx, client, lc, bench.Request{URL: nd.URL(tg.path), Header: hdr})
		}))
		stop()
		gcs += patientStatus(b, nd).Memory.NumGC - gc0
		ls = append(ls, lOthers.during(others, func() bench.Result {
			return bench.Run(ctx, client, lc, bench.Request{URL: limit.URLs[0] + tg.path, Header: hdr})
		}))
	}
	// Both sides must have served the same document: one that changed
	// while heureka served it (a delta ageing, a write) makes the ratio
	// meaningless. Timestamps may change a gzip stream's length by a few
	// bytes, a different document by far more.
	again, _, err := bench.Fetch(client, nd.URL(tg.path), hdr)
	if err != nil {
		b.Fatal(err)
	}
	if d := len(again) - len(body); d > len(body)/100 || -d > len(body)/100 {
		b.Errorf("%s on %s changed during the turn (%d bytes, then %d): the ratio compares different documents", tg.path, nd.ID, len(body), len(again))
	}
	var hr, lr float64
	for i := range hs {
		if hs[i].Errors > 0 || ls[i].Errors > 0 {
			b.Fatalf("%s on %s: errors: heureka %d (%s), limit %d (%s)", tg.path, nd.ID, hs[i].Errors, hs[i].FirstError, ls[i].Errors, ls[i].FirstError)
		}
		hr, lr = hr+hs[i].PerSec/2, lr+ls[i].PerSec/2
	}
	return fmt.Sprintf("| %s (%s): GET %s gzip (%d clients, %d KB) | %.0f | %s | %d | %.0f MiB | %.0f | %s | %.0f / %.0f ms/s | %.2f |",
		nd.ID, role, tg.path, tg.conc, len(body)/1024, hr, hs[1].P99.Round(10*time.Microsecond), gcs, peak,
		lr, ls[1].P99.Round(10*time.Microsecond), hOthers.perSec()*1000, lOthers.perSec()*1000, hr/lr), hr / lr
}

// othersLoad adds up the CPU the other nodes spent during one side's
// halves, and the halves' time.
type othersLoad struct {
	cpu  float64 // CPU-seconds
	took time.Duration
}

// during runs read and adds what the nodes in others spent meanwhile.
func (o *othersLoad) during(others []*Node, read func() bench.Result) bench.Result {
	cpu0, start := nodesCPU(others), time.Now()
	res := read()
	o.cpu += nodesCPU(others) - cpu0
	o.took += time.Since(start)
	return res
}

// perSec is the other nodes' CPU-seconds a second.
func (o *othersLoad) perSec() float64 {
	if o.took <= 0 {
		return 0
	}
	return o.cpu / o.took.Seconds()
}

// nodeRole is "leader" or "follower".
func nodeRole(nd, leader *Node) string {
	if nd == leader {
		return "leader"
	}
	return "follower"
}

// quietWait is how long the benchmark waits after the reads for a node
// of n instances to return its free memory: the idle return waits 2 s,
// or 100 ms per 8 MiB of live heap when that is longer (about 30 s for
// the 2.3 GB of a million), plus room for the collection itself.
func quietWait(n int) time.Duration {
	return 5*time.Second + time.Duration(n/1000)*40*time.Millisecond
}
