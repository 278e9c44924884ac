package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

// BenchmarkPeerReplication measures replication between an eureka-server
// ring and a heureka cluster joined to it (docs/migrate-from-eureka.md,
// "A real run"): 1,000 instances heartbeat on each side (every 5 s, six
// times Eureka's default rate), and
// probes registered on one side are timed until the other side lists them.
// It reports the lag of each direction (p50, p99 over the probes) and the
// batches per second each side sends, and heureka's own p99 from a change
// (heartbeats included) to the ring's answer. Run it with
//
//	go test ./e2e -run '^$' -bench BenchmarkPeerReplication -benchtime 1x
func BenchmarkPeerReplication(b *testing.B) {
	java, _, err := javaTools()
	if err != nil {
		b.Skipf("skipping: %v", err)
	}
	esJar, _ := filepath.Abs(eurekaServerJar)
	if _, err := os.Stat(esJar); err != nil {
		b.Skipf("skipping: e2e/%s is not built (run `make deps`)", eurekaServerJar)
	}
	const perSide, interval, probes = 1000, 5 * time.Second, 40
	esAddrs := []string{FreeAddr(b), FreeAddr(b), FreeAddr(b)}
	var esURLs, esBases []string
	for _, a := range esAddrs {
		esURLs = append(esURLs, "http://"+a+"/eureka/")
		esBases = append(esBases, "http://"+a)
	}
	// Production Raft timings: the test timings flap elections on a machine
	// this loaded (three JVMs and 400 heartbeats a second).
	c := StartCluster(b, 3, Options{DefaultRaftTimings: true, ExtraArgs: []string{"--eureka-peers", strings.Join(esURLs, ","), "--eureka-sync-timeout", "3m"}})
	var heURLs, heBases []string
	for _, nd := range c.Nodes {
		heURLs = append(heURLs, nd.URL("/eureka/"))
		heBases = append(heBases, nd.BaseURL())
	}
	startEurekaRing(b, java, esJar, esAddrs, heURLs)
	for _, nd := range c.Nodes {
		if !Eventually(3*clientTimeout, func() bool {
			code, _, _, err := TryDo("GET", nd.URL("/eureka/apps"), nil)
			return err == nil && code == 200
		}) {
			b.Fatalf("%s never served reads", nd.ID)
		}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	load := func(side string, bases []string) {
		const workers = 16
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine []int
				for i := w; i < perSide; i += workers {
					mine = append(mine, i)
				}
				for _, i := range mine {
					_ = TryRegisterJSON(bases[i%len(bases)], "LOAD"+side, fmt.Sprintf("%s-%04d", side, i), nil)
				}
				tick.Every(stop, interval, func() {
					for _, i := range mine {
						u := fmt.Sprintf("%s/eureka/apps/LOAD%s/%s-%04d", bases[i%len(bases)], side, side, i)
						req, _ := http.NewRequest(http.MethodPut, u, nil)
						if resp, err := client.Do(req); err == nil {
							resp.Body.Close()
						}
					}
				})
			}()
		}
	}
	load("ES", esBases)
	load("HE", heBases)
	defer func() { close(stop); wg.Wait() }()
	// Let registrations and the first heartbeat rounds settle.
	time.Sleep(20 * time.Second)

	heSent0, esSent0 := sumMetric(heBases, `heureka_peer_replication_batches_total`), sumMetric(heBases, `heureka_http_requests_total{code="200",method="POST",route="eureka_peer_batch"}`)
	t0 := time.Now()
	probe := func(from, to []string, i int) time.Duration {
		id := fmt.Sprintf("p-%d", i)
		start := time.Now()
		if err := TryRegisterJSON(from[i%len(from)], "PROBE", id, nil); err != nil {
			b.Fatalf("probe: %v", err)
		}
		for time.Since(start) < time.Minute {
			code, _, _, err := TryDo("GET", to[i%len(to)]+"/eureka/apps/PROBE/"+id, nil)
			if err == nil && code == 200 {
				return time.Since(start)
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.Fatalf("probe %s never reached %s", id, to[i%len(to)])
		return 0
	}
	var toHE, toES []time.Duration
	b.ResetTimer()
	for i := range probes {
		toHE = append(toHE, probe(esBases, heBases, i))
		toES = append(toES, probe(heBases, esBases, probes+i))
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	secs := time.Since(t0).Seconds()
	heSent := (sumMetric(heBases, `heureka_peer_replication_batches_total`) - heSent0) / secs
	esSent := (sumMetric(heBases, `heureka_http_requests_total{code="200",method="POST",route="eureka_peer_batch"}`) - esSent0) / secs
	q := func(d []time.Duration, p float64) float64 {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(toHE, 0.5), "es_to_he_p50_ms")
	b.ReportMetric(q(toHE, 0.99), "es_to_he_p99_ms")
	b.ReportMetric(q(toES, 0.5), "he_to_es_p50_ms")
	b.ReportMetric(q(toES, 0.99), "he_to_es_p99_ms")
	b.ReportMetric(heSent, "he_batches/s")
	b.ReportMetric(esSent, "es_batches_in/s")
	b.ReportMetric(sumMetric(heBases, `heureka_peer_replication_dropped_total{kind="heartbeat"}`), "he_dropped")
	// The leader's own measure: from a change (heartbeats included) to the
	// ring's answer, p99 over its last 8,192 items.
	lag := 0.0
	for _, base := range heBases {
		lag = max(lag, sumMetric([]string{base}, `heureka_peer_replication_lag_seconds{quantile="0.99"}`))
	}
	b.ReportMetric(lag*1000, "he_items_lag_p99_ms")
}

var metricLine = regexp.MustCompile(`^(\S+) (\S+)$`)

// sumMetric adds one series' value over the nodes' /metrics.
func sumMetric(bases []string, series string) float64 {
	sum := 0.0
	for _, b := range bases {
		code, body, _, err := TryDo("GET", b+"/metrics", nil)
		if err != nil || code != 200 {
			continue
		}
		for _, line := range strings.Split(string(body), "\n") {
			m := metricLine.FindStringSubmatch(line)
			if m != nil && m[1] == series {
				v, _ := strconv.ParseFloat(m[2], 64)
				sum += v
			}
		}
	}
	return sum
}
