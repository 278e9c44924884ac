package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/bench"
	"github.com/heureka-registry/heureka/opapi"
)

// benchInstance is a registration with about 1 KB of metadata.
func benchInstance(i, apps int) (app, id string, extra map[string]any) {
	app = fmt.Sprintf("BENCH-%03d", i%apps)
	id = fmt.Sprintf("10.1.%d.%d:%s:8080", i/250, i%250, strings.ToLower(app))
	md := map[string]any{}
	for k := 0; k < 10; k++ {
		md[fmt.Sprintf("meta.key.%d", k)] = strings.Repeat("v", 90)
	}
	return app, id, map[string]any{"metadata": md}
}

// registerBench registers benchInstance 0..n-1 through the nodes in turn,
// waits until on holds them all, and then 6 s more: the benchmarks run
// with a 5 s delta retention, so the registration burst has left the
// delta before they measure.
func registerBench(b *testing.B, nodes []*Node, on *Node, n, apps int) {
	b.Helper()
	start := time.Now()
	var mu sync.Mutex
	var first error
	onWorkers(64, n, func(w, i int) {
		app, id, extra := benchInstance(i, apps)
		if err := TryRegisterJSON(nodes[w%len(nodes)].BaseURL(), app, id, extra); err != nil {
			mu.Lock()
			first = cmp.Or(first, err)
			mu.Unlock()
		}
	})
	if first != nil {
		b.Fatal(first)
	}
	b.Logf("registered %d instances in %s", n, time.Since(start).Round(time.Millisecond))
	WaitFor(b, 60*time.Second, func() bool {
		st, err := on.TryStatus()
		return err == nil && st.Instances == n
	}, on.ID+" holds every instance")
	time.Sleep(6 * time.Second)
}

// startLimitServer runs `heureka limit-server` serving body, and returns its URL.
func startLimitServer(b *testing.B, body []byte, contentType string) string {
	b.Helper()
	l, err := bench.StartLimit(Binary(b), body, contentType, "", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.Stop)
	return l.URLs[0]
}

func nodeCache(b *testing.B, nd *Node) opapi.CacheStats {
	return nd.Status(b).Cache
}

// BenchmarkCachedReads is the response cache's load benchmark (BENCHMARKS.md, "Response cache"; run it with
// `go test ./e2e -run XXX -bench CachedReads -benchtime 1x -v`): a 3-node
// cluster holding 10,000 instances (500 apps, ~1 KB metadata each); cached
// GET /eureka/apps/delta and GET /eureka/apps/{app} on a follower against a
// trivial server returning the same bytes; the readOnly hit ratio while all
// 10,000 instances renew within 5 s; and each node's RSS with every variant
// warm (JSON and XML, plain and gzip).
func BenchmarkCachedReads(b *testing.B) {
	const n, apps = 10000, 500
	conc, dur := 32, 5*time.Second
	// A short delta retention lets the registration burst leave the delta
	// before measuring, so the delta read is the small steady-state document
	// clients fetch every 30 s.
	// BENCH_GOMEMLIMIT, if set, is passed to the nodes as GOMEMLIMIT (the Go
	// runtime's soft memory limit), to compare memory use with and without.
	var env []string
	if lim := os.Getenv("BENCH_GOMEMLIMIT"); lim != "" {
		env = append(env, "GOMEMLIMIT="+lim)
	}
	c := StartCluster(b, 3, Options{Env: env, DefaultRaftTimings: true, ExtraArgs: []string{"--delta-retention", "5s", "--response-cache-update-interval", "1s"}})
	leader := c.WaitLeader(b, 10*time.Second)
	follower := c.Followers(leader)[0]
	registerBench(b, c.Nodes, follower, n, apps)
	for i := 0; i < 20; i++ { // a few recent changes for the delta
		app, id, _ := benchInstance(i*37, apps)
		Do(b, "PUT", c.Nodes[i%3].URL("/eureka/apps/"+app+"/"+id+"/metadata?round="+fmt.Sprint(i)), nil)
	}
	time.Sleep(1500 * time.Millisecond)

	client := bench.NewClient(conc)
	hdr := http.Header{"Accept": {"application/json"}}
	type target struct{ name, path string }
	targets := []target{{"delta", "/eureka/apps/delta"}, {"app", "/eureka/apps/BENCH-042"}}
	var rows []string
	for _, tg := range targets {
		body, _, err := bench.Fetch(client, follower.URL(tg.path), hdr)
		if err != nil {
			b.Fatal(err)
		}
		limitURL := startLimitServer(b, body, "application/json")
		h := bench.Run(context.Background(), client, bench.LoadConfig{Concurrency: conc, Duration: dur},
			bench.Request{URL: follower.URL(tg.path), Header: hdr})
		l := bench.Run(context.Background(), client, bench.LoadConfig{Concurrency: conc, Duration: dur},
			bench.Request{URL: limitURL + tg.path, Header: hdr})
		if h.Errors > 0 || l.Errors > 0 {
			b.Fatalf("errors: heureka %d (%s), limit %d (%s)", h.Errors, h.FirstError, l.Errors, l.FirstError)
		}
		rows = append(rows, fmt.Sprintf("| GET %s (%d KB) | %.0f | %s | %.0f | %s | %.2f |", tg.path, len(body)/1024,
			h.PerSec, h.P99.Round(10*time.Microsecond), l.PerSec, l.P99.Round(10*time.Microsecond), h.PerSec/l.PerSec))
		b.ReportMetric(h.PerSec/l.PerSec, tg.name+"-ratio")
	}

	// Renewal storm: every instance renews within 5 s while readers read.
	before := nodeCache(b, follower)
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		bench.Run(ctx, client, bench.LoadConfig{Concurrency: 8, Duration: 6 * time.Second},
			bench.Request{URL: follower.URL("/eureka/apps/delta"), Header: hdr})
	}()
	renewStart := time.Now()
	renew := bench.Run(context.Background(), client, bench.LoadConfig{Concurrency: 64, Duration: 5 * time.Second, MaxRequests: n},
		bench.Request{Method: http.MethodPut, Next: func(w, i int) string {
			k := (i*64 + w) % n
			app, id, _ := benchInstance(k, apps)
			return c.Nodes[k%3].URL("/eureka/apps/" + app + "/" + id)
		}})
	renewTook := time.Since(renewStart)
	readers.Wait()
	cancel()
	after := nodeCache(b, follower)
	hits, misses := after.ReadOnlyHits-before.ReadOnlyHits, after.ReadOnlyMisses-before.ReadOnlyMisses
	ratio := float64(hits) / float64(max(hits+misses, 1))
	b.ReportMetric(ratio*100, "ro-hit-%")

	// Memory with every variant warm.
	for _, nd := range c.Nodes {
		for _, accept := range []string{"application/json", "application/xml"} {
			for _, enc := range []string{"", "gzip"} {
				h := http.Header{"Accept": {accept}}
				if enc != "" {
					h.Set("Accept-Encoding", enc)
				}
				for _, p := range []string{"/eureka/apps", "/eureka/apps/delta"} {
					if _, _, err := bench.Fetch(client, nd.URL(p), h); err != nil {
						b.Fatal(err)
					}
				}
				for a := 0; a < apps; a++ {
					if _, _, err := bench.Fetch(client, nd.URL(fmt.Sprintf("/eureka/apps/BENCH-%03d", a)), h); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	time.Sleep(5 * time.Second) // let the runtime return freed build garbage
	var rss []string
	for _, nd := range c.Nodes {
		heap := ""
		if st, err := nd.TryStatus(); err == nil {
			var m struct {
				HeapInuse uint64 `json:"heap_inuse_bytes"`
			}
			_ = json.Unmarshal(st.Raw["memory"], &m)
			heap = fmt.Sprintf(" (Go heap in use %.0f MB)", float64(m.HeapInuse)/1e6)
		}
		rss = append(rss, fmt.Sprintf("%s %.0f MB%s", nd.ID, rssMB(nd.PID()), heap))
		b.ReportMetric(rssMB(nd.PID()), nd.ID+"-rss-MB")
	}
	b.Logf("\n| read (follower, JSON, %d clients, %s) | heureka req/s | heureka p99 | limit req/s | limit p99 | ratio |\n|---|---|---|---|---|---|\n%s\n\nrenewal storm: %d renewals (%d errors) in %s (%.0f/s, p99 %s); readOnly hits %d, misses %d: hit ratio %.4f%%\nRSS with all variants warm: %s",
		conc, dur, strings.Join(rows, "\n"), renew.Requests, renew.Errors, renewTook.Round(time.Millisecond),
		renew.PerSec, renew.P99.Round(time.Millisecond), hits, misses, ratio*100, strings.Join(rss, ", "))
}

// cpuSeconds is a process's user+system CPU time from /proc.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields overall, in clock ticks (100 per second on Linux).
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	var ut, st float64
	fmt.Sscanf(fields[11], "%f", &ut)
	fmt.Sscanf(fields[12], "%f", &st)
	return (ut + st) / 100
}

func clusterCPU(c *Cluster) float64 { return nodesCPU(c.Nodes) }

// nodesCPU is the CPU-seconds the processes of nodes have used.
func nodesCPU(nodes []*Node) float64 {
	var sum float64
	for _, nd := range nodes {
		sum += cpuSeconds(nd.PID())
	}
	return sum
}

// BenchmarkRenewals is the renewals benchmark (BENCHMARKS.md, "Renewals"; run it with
// `go test ./e2e -run XXX -bench Renewals -benchtime 1x -v`): for
// --renew-batch-interval 1s and 0, a 3-node cluster with 10,000 instances;
// renewals/s sustained by 64 concurrent clients spread over all nodes with
// their p99; server CPU-seconds per 1,000 renewals; and the log volume per
// hour at 10,000 instances renewing at Eureka's default 30 s (333/s).
func BenchmarkRenewals(b *testing.B) {
	const n = 10000
	var rows []string
	for _, batch := range []string{"1s", "0s"} {
		c := StartCluster(b, 3, Options{DefaultRaftTimings: true, ExtraArgs: []string{"--renew-batch-interval", batch}})
		leader := c.WaitLeader(b, 10*time.Second)
		onWorkers(64, n, func(w, i int) {
			if err := TryRegisterJSON(c.Nodes[w%3].BaseURL(), fmt.Sprintf("RENEW-%02d", i%50), fmt.Sprint("r-", i), nil); err != nil {
				b.Error(err)
			}
		})
		client := bench.NewClient(64)
		urls := make([]string, n) // built once: the load generator shares the CPU
		for k := range urls {
			urls[k] = c.Nodes[k%3].URL(fmt.Sprintf("/eureka/apps/RENEW-%02d/r-%d", k%50, k))
		}
		url := func(w, i int) string { return urls[(i*64+w)%n] }
		cpu0 := clusterCPU(c)
		max := bench.Run(context.Background(), client, bench.LoadConfig{Concurrency: 64, Duration: 10 * time.Second},
			bench.Request{Method: http.MethodPut, Next: url})
		cpu := clusterCPU(c) - cpu0
		if max.Errors > 0 {
			b.Fatalf("batch %s: %d errors, first: %s", batch, max.Errors, max.FirstError)
		}
		// Paced at Eureka's default load for 10,000 instances, after the
		// last batch of the saturation run reached the log.
		time.Sleep(2 * time.Second)
		_, bytes0 := leaderVolume(b, leader)
		paced := bench.Run(context.Background(), client, bench.LoadConfig{Concurrency: 16, Duration: 10 * time.Second, Rate: n / 30.0},
			bench.Request{Method: http.MethodPut, Next: url})
		entries1, bytes1 := leaderVolume(b, leader)
		perHour := float64(bytes1-bytes0) / paced.Elapsed.Seconds() * 3600
		rows = append(rows, fmt.Sprintf("| %s | %.0f | %s | %.3f | %.1f MB (%d entries in the 10 s paced run, %.0f renewals/s) |",
			batch, max.PerSec, max.P99.Round(100*time.Microsecond), cpu/float64(max.Requests)*1000, perHour/1e6,
			entries1, paced.PerSec))
		b.ReportMetric(max.PerSec, "renew/s-batch-"+batch)
		for _, nd := range c.Nodes {
			nd.Stop()
		}
	}
	b.Logf("\n| --renew-batch-interval | renewals/s (64 clients) | p99 | CPU-s per 1,000 renewals (3 nodes) | log bytes per hour at 10,000 instances |\n|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}

func leaderVolume(b *testing.B, nd *Node) (entries, bytes uint64) {
	st := nd.Status(b)
	var v struct {
		Entries uint64 `json:"applied_entries"`
		Bytes   uint64 `json:"applied_bytes"`
	}
	_ = json.Unmarshal(st.Raw["applied_entries"], &v.Entries)
	_ = json.Unmarshal(st.Raw["applied_bytes"], &v.Bytes)
	return v.Entries, v.Bytes
}
