package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// envInt reads a positive integer from the environment, else def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// pct is the nearest-rank percentile p (0..100) of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// blockingGet issues GET path?index=idx on nd with gzip accepted and returns
// when the answer's headers arrive (the document changed), with its index
// and its decompressed body.
func blockingGet(client *http.Client, nd *Node, path string, idx uint64) (time.Time, uint64, []byte, error) {
	req, err := http.NewRequest("GET", nd.URL(fmt.Sprintf("%s?index=%d&wait=20s", path, idx)), nil)
	if err != nil {
		return time.Time{}, 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := client.Do(req)
	if err != nil {
		return time.Time{}, 0, nil, err
	}
	at := time.Now()
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return at, 0, nil, err
		}
		r = zr
	}
	body, err := io.ReadAll(r)
	next, _ := strconv.ParseUint(resp.Header.Get("X-Heureka-Index"), 10, 64)
	if resp.StatusCode == http.StatusNotFound {
		return at, next, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return at, next, nil, fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return at, next, body, err
}

// instanceIn finds instance id in a JSON document's bytes and returns its
// status and action type ("" when absent), without decoding the document
// (the full registry at 10,000 instances is 18 MB).
func instanceIn(doc []byte, id string) (status, action string) {
	i := bytes.Index(doc, []byte(`"instanceId":"`+id+`"`))
	if i < 0 {
		return "", ""
	}
	field := func(name string) string {
		rest := doc[i:]
		j := bytes.Index(rest, []byte(`"`+name+`":"`))
		if j < 0 {
			return ""
		}
		rest = rest[j+len(name)+4:]
		return string(rest[:bytes.IndexByte(rest, '"')])
	}
	return field("status"), field("actionType")
}

// BenchmarkCacheFollowsChanges measures, with default cache flags on 3 nodes
// (BENCH_INSTANCES instances, default 10,000, in 500 apps, ~1 KB metadata
// each), how long after node A acknowledges a register, a status change
// and a cancel node C's cached reads show it:
//
//   - GET /eureka/apps/{app}: plain reads polled every millisecond;
//   - GET /eureka/apps and /eureka/apps/delta: blocking reads
//     (?index=), timed when their headers arrive, since polling a multi-MB
//     document every millisecond would measure the poller; the answer is
//     the readOnly document every plain read gets from that moment;
//   - a blocking GET /eureka/apps/{app}?index=N on C, parked before the
//     write (the target: p99 within 10 ms of the ack).
//
// Run: go test ./e2e -run XXX -bench CacheFollowsChanges -benchtime 1x -v
// (BENCH_SAMPLES cycles of three writes, default 100).
func BenchmarkCacheFollowsChanges(b *testing.B) {
	n, samples := envInt("BENCH_INSTANCES", 10000), envInt("BENCH_SAMPLES", 100)
	apps := min(500, n)
	// Cache flags at their defaults; a 5 s delta retention (as in the other
	// benchmarks) lets the registration burst leave the delta first, so it
	// is the steady-state document clients fetch.
	c := StartCluster(b, 3, Options{DefaultRaftTimings: true, ExtraArgs: []string{"--delta-retention", "5s"}})
	leader := c.WaitLeader(b, 10*time.Second)
	fs := c.Followers(leader)
	a, cn := fs[0], fs[1] // both followers: writes go through the leader, reads on C are a follower's
	registerBench(b, c.Nodes, cn, n, apps)
	app, _, _ := benchInstance(7, apps)
	appPath := "/eureka/apps/" + app
	paths := []string{appPath, "/eureka/apps", "/eureka/apps/delta"}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}
	for _, p := range paths { // warm C's readOnly level, plain and gzip
		if _, _, _, err := blockingGet(client, cn, p, 0); err != nil {
			b.Fatal(err)
		}
		if _, _, _, err := TryDo("GET", cn.URL(p), nil); err != nil {
			b.Fatal(err)
		}
	}
	type op struct {
		name   string
		method string
		path   func(id string) string
		body   func(id string) []byte
		want   func(status, action string, delta bool) bool
	}
	ops := []op{
		{"register", "POST", func(string) string { return appPath },
			func(id string) []byte { return RegisterBody(app, id, nil) },
			func(st, _ string, _ bool) bool { return st == "UP" }},
		{"status", "PUT", func(id string) string { return appPath + "/" + id + "/status?value=OUT_OF_SERVICE" }, nil,
			func(st, _ string, _ bool) bool { return st == "OUT_OF_SERVICE" }},
		{"cancel", "DELETE", func(id string) string { return appPath + "/" + id }, nil,
			func(st, act string, delta bool) bool {
				if delta {
					return act == "DELETED"
				}
				return st == ""
			}},
	}
	lat := map[string][]time.Duration{}
	var mu sync.Mutex
	record := func(what string, d time.Duration) {
		mu.Lock()
		lat[what] = append(lat[what], d)
		mu.Unlock()
	}
	b.ResetTimer()
	for i := 0; i < samples; i++ {
		id := fmt.Sprintf("follow-%d", i)
		for _, o := range ops {
			// The versions before the write, for the blocking reads.
			idx := map[string]uint64{}
			for _, p := range paths {
				_, v, _, err := blockingGet(client, cn, p, 0)
				if err != nil {
					b.Fatal(err)
				}
				idx[p] = v
			}
			var acked atomic.Pointer[time.Time]
			var wg sync.WaitGroup
			// Blocking reads, parked before the write.
			for _, p := range paths {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v := idx[p]
					for try := 0; try < 20; try++ {
						at, next, body, err := blockingGet(client, cn, p, v)
						if err != nil {
							b.Error(err)
							return
						}
						st, act := instanceIn(body, id)
						if o.want(st, act, p == "/eureka/apps/delta") {
							what := p + " (blocking read)"
							if p != appPath {
								what = p
							}
							for acked.Load() == nil {
								time.Sleep(50 * time.Microsecond)
							}
							record(what, max(at.Sub(*acked.Load()), 0))
							return
						}
						v = next
					}
					b.Errorf("%s %s: %s never showed it", o.name, id, p)
				}()
			}
			time.Sleep(10 * time.Millisecond) // let them park
			code, body, _, err := TryDo(o.method, a.URL(o.path(id)), bodyOf(o.body, id))
			now := time.Now()
			acked.Store(&now)
			if err != nil || code/100 != 2 {
				b.Fatalf("%s %s: %d %s %v", o.name, id, code, body, err)
			}
			// Plain reads of the application document, every millisecond.
			for poll := 0; ; poll++ {
				_, doc, _, err := TryDo("GET", cn.URL(appPath), nil)
				st, act := instanceIn(doc, id)
				if err == nil && o.want(st, act, false) {
					record(appPath+" (plain read)", time.Since(now))
					break
				}
				if poll > 10000 {
					b.Fatalf("%s %s: never visible in a plain read of %s", o.name, id, appPath)
				}
				time.Sleep(time.Millisecond)
			}
			wg.Wait()
		}
	}
	b.StopTimer()
	names := make([]string, 0, len(lat))
	for k := range lat {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		d := lat[k]
		slices.Sort(d)
		b.Logf("%-44s n=%d p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms", k, len(d),
			float64(pct(d, 50))/1e6, float64(pct(d, 99))/1e6, float64(d[len(d)-1])/1e6)
	}
}

func bodyOf(f func(string) []byte, id string) []byte {
	if f == nil {
		return nil
	}
	return f(id)
}

// BenchmarkBlockingWaiters measures what BENCH_WAITERS (default 10,000)
// parked blocking reads cost one node: its RSS before and with them
// waiting, and how long after one change all of them have their answer.
//
// Run: go test ./e2e -run XXX -bench BlockingWaiters -benchtime 1x -v
func BenchmarkBlockingWaiters(b *testing.B) {
	waiters := envInt("BENCH_WAITERS", 10000)
	c := StartCluster(b, 1, Options{DefaultRaftTimings: true, ExtraArgs: []string{"--pprof"}})
	nd := c.WaitLeader(b, 10*time.Second)
	for i := 0; i < 10; i++ {
		RegisterJSON(b, nd.BaseURL(), "WAIT", fmt.Sprint("w-", i), nil)
	}
	_, _, hdr := Do(b, "GET", nd.URL("/eureka/apps/WAIT"), nil)
	idx := hdr.Get("X-Heureka-Index")
	// Warm the HTTP stack and the cache with a few hundred ordinary reads.
	for i := 0; i < 200; i++ {
		Do(b, "GET", nd.URL("/eureka/apps/WAIT"), nil)
	}
	before := settledRSS(nd)
	tr := &http.Transport{MaxIdleConnsPerHost: waiters, DisableCompression: true}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: tr}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var answered, failed atomic.Int64
	var lastAnswer atomic.Int64
	start := time.Now()
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", nd.URL("/eureka/apps/WAIT?index="+idx+"&wait=2m"), nil)
			req.Header.Set("Accept", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				failed.Add(1)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				answered.Add(1)
				lastAnswer.Store(time.Now().UnixNano())
			} else {
				failed.Add(1)
			}
		}()
		if i%500 == 499 {
			time.Sleep(50 * time.Millisecond) // do not overflow the listen backlog
		}
	}
	WaitFor(b, 2*time.Minute, func() bool { return parkedReads(nd) >= float64(waiters) || failed.Load() > 0 }, "every read parked")
	if failed.Load() > 0 {
		b.Fatalf("%d blocking reads failed before the change", failed.Load())
	}
	parkedAfter := time.Since(start)
	peak := rssMB(nd.PID())
	with := settledRSS(nd)
	b.Logf("Go runtime with them waiting: %s", goMemory(nd))
	if path := os.Getenv("BENCH_HEAP_PROFILE"); path != "" { // for `go tool pprof`
		if _, prof, _, err := TryDo("GET", nd.URL("/debug/pprof/heap"), nil); err == nil {
			_ = os.WriteFile(path, prof, 0o644)
		}
	}
	b.ResetTimer()
	RegisterJSON(b, nd.BaseURL(), "WAIT", "wake", nil)
	changed := time.Now()
	wg.Wait()
	b.StopTimer()
	b.Logf("%d blocking reads parked in %s; RSS %.1f MB before, %.1f MB right after they parked, %.1f MB settled with them waiting: +%.1f MB (%.1f KB per waiter)",
		waiters, parkedAfter.Round(time.Millisecond), before, peak, with, with-before, (with-before)*1024/float64(waiters))
	b.Logf("one change answered %d of them (%d failed); the last answer %s after the write's ack",
		answered.Load(), failed.Load(), time.Duration(lastAnswer.Load()-changed.UnixNano()).Round(time.Millisecond))
}

// parkedReads reads blocking_reads_waiting from the node's /metrics.
func parkedReads(nd *Node) float64 {
	_, body, _, err := TryDo("GET", nd.URL("/metrics"), nil)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "heureka_blocking_reads_waiting ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(line, "heureka_blocking_reads_waiting "), 64)
			return v
		}
	}
	return -1
}

// goMemory summarises the node's Go memory from its profiler's heap page
// (the node runs with --pprof).
func goMemory(nd *Node) string {
	_, body, _, err := TryDo("GET", nd.URL("/debug/pprof/heap?debug=1"), nil)
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, line := range strings.Split(string(body), "\n") {
		for _, k := range []string{"# HeapInuse = ", "# StackInuse = ", "# Sys = ", "# NumGC"} {
			if strings.HasPrefix(line, k) {
				parts = append(parts, strings.TrimPrefix(line, "# "))
			}
		}
	}
	_, body, _, _ = TryDo("GET", nd.URL("/debug/pprof/goroutine?debug=1"), nil)
	first, _, _ := strings.Cut(string(body), "\n")
	return strings.Join(append(parts, first), ", ")
}

// settledRSS is the node's RSS once garbage is collected and the runtime
// has had time to return freed memory (its profiler's heap page with gc=1
// collects first).
func settledRSS(nd *Node) float64 {
	_, _, _, _ = TryDo("GET", nd.URL("/debug/pprof/heap?gc=1"), nil)
	time.Sleep(5 * time.Second)
	_, _, _, _ = TryDo("GET", nd.URL("/debug/pprof/heap?gc=1"), nil)
	time.Sleep(time.Second)
	return rssMB(nd.PID())
}
