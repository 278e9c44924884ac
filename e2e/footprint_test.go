package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/bench"
)

// BenchmarkFootprint is the memory benchmark (BENCHMARKS.md, "Memory
// footprint"; run it with `go test ./e2e -run XXX -bench Footprint
// -benchtime 1x -v`): a 3-node cluster started with default flags and no
// environment variables, BENCH_INSTANCES instances (default 10,000) in 500
// apps with ~1 KB of metadata each, and then every read variant warm on
// every node: the full registry, the delta, each application, each VIP and
// secure VIP, in JSON and XML, plain and gzip. It reports each node's RSS
// and Go heap, and the follower's cached read rate against
// `heureka limit-server` serving the same bytes (full registry gzip, one
// application). With BENCH_PPROF_DIR set, the nodes serve /debug/pprof and
// each node's heap profile is written there.
func BenchmarkFootprint(b *testing.B) {
	n, apps := 10000, 500
	if s := os.Getenv("BENCH_INSTANCES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < apps {
			b.Fatalf("BENCH_INSTANCES=%q: want a number >= %d", s, apps)
		}
		n = v
	}
	pprofDir := os.Getenv("BENCH_PPROF_DIR")
	var args []string
	if pprofDir != "" {
		args = append(args, "--pprof")
	}
	c := StartCluster(b, 3, Options{DefaultRaftTimings: true, ExtraArgs: args})
	leader := c.WaitLeader(b, 10*time.Second)
	follower := c.Followers(leader)[0]
	start := time.Now()
	registerBench(b, c.Nodes, n, apps)
	b.Logf("registered %d instances in %s", n, time.Since(start).Round(time.Millisecond))
	WaitFor(b, 120*time.Second, func() bool {
		for _, nd := range c.Nodes {
			if st, err := nd.TryStatus(); err != nil || st.Instances != n {
				return false
			}
		}
		return true
	}, "every node holds every instance")

	client := bench.NewClient(32)
	var paths []string
	paths = append(paths, "/eureka/apps", "/eureka/apps/delta")
	for a := 0; a < apps; a++ {
		app := fmt.Sprintf("BENCH-%03d", a)
		paths = append(paths, "/eureka/apps/"+app, "/eureka/vips/"+strings.ToLower(app), "/eureka/svips/"+strings.ToLower(app))
	}
	warm := time.Now()
	for _, nd := range c.Nodes {
		for _, accept := range []string{"application/json", "application/xml"} {
			for _, enc := range []string{"", "gzip"} {
				h := http.Header{"Accept": {accept}}
				if enc != "" {
					h.Set("Accept-Encoding", enc)
				}
				for _, p := range paths {
					if _, _, err := bench.Fetch(client, nd.URL(p), h); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	b.Logf("warmed %d documents × 4 variants on 3 nodes in %s", len(paths), time.Since(warm).Round(time.Millisecond))

	// Cached reads against the limit, on the follower, as Eureka clients
	// read: JSON, gzip accepted.
	hdr := http.Header{"Accept": {"application/json"}, "Accept-Encoding": {"gzip"}}
	var rows []string
	for _, tg := range []struct {
		path string
		conc int
	}{{"/eureka/apps", 8}, {"/eureka/apps/BENCH-042", 32}} {
		body, _, err := bench.Fetch(client, follower.URL(tg.path), hdr)
		if err != nil {
			b.Fatal(err)
		}
		limitURL := startLimitServer(b, body, "application/json")
		lc := bench.LoadConfig{Concurrency: tg.conc, Duration: 4 * time.Second}
		h := bench.Run(context.Background(), client, lc, bench.Request{URL: follower.URL(tg.path), Header: hdr})
		l := bench.Run(context.Background(), client, lc, bench.Request{URL: limitURL + tg.path, Header: hdr})
		if h.Errors > 0 || l.Errors > 0 {
			b.Fatalf("errors: heureka %d (%s), limit %d (%s)", h.Errors, h.FirstError, l.Errors, l.FirstError)
		}
		rows = append(rows, fmt.Sprintf("| GET %s gzip (%d clients, %d KB) | %.0f | %s | %.0f | %s | %.2f |", tg.path, tg.conc, len(body)/1024,
			h.PerSec, h.P99.Round(10*time.Microsecond), l.PerSec, l.P99.Round(10*time.Microsecond), h.PerSec/l.PerSec))
	}

	time.Sleep(5 * time.Second) // let the runtime collect the warm-up's garbage
	var mem []string
	for _, nd := range c.Nodes {
		st := nd.Status(b)
		rss := rssMB(nd.PID())
		role := "follower"
		if nd == leader {
			role = "leader"
		}
		mem = append(mem, fmt.Sprintf("| %s (%s) | %.0f MiB | %.0f MiB | %.0f MiB | %.0f MiB |", nd.ID, role, rss,
			float64(st.Memory.HeapInuseBytes)/(1<<20), float64(st.Memory.HeapAllocBytes)/(1<<20), float64(st.Cache.Bytes)/(1<<20)))
		b.ReportMetric(rss, nd.ID+"-rss-MiB")
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
	b.Logf("\n%d instances, %s, load average %s\n\n| node | RSS | Go heap in use | heap live (alloc) | cache bytes (statistic) |\n|---|---|---|---|---|\n%s\n\n| read (follower) | heureka req/s | p99 | limit req/s | p99 | ratio |\n|---|---|---|---|---|---|\n%s",
		n, time.Now().UTC().Format("2006-01-02 15:04 UTC"), loadAvg(), strings.Join(mem, "\n"), strings.Join(rows, "\n"))
}

// loadAvg is the first three fields of /proc/loadavg, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
