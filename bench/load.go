// Package bench holds heureka's measuring tools: a closed-loop load
// generator with latency percentiles (Run, RunFunc), the "limit" server
// that returns fixed bytes so every read figure can be put beside what the
// machine can do at all (LimitHandler), and `heureka bench`, one fixed
// workload (W1–W8, see docs/bench.md) driven against a Eureka-compatible
// cluster and against etcd, reported as one table (Suite, Report).
//
// It talks to the systems it measures over HTTP (and etcd's client, with
// the etcdclient build tag) and starts local clusters with
// internal/testkit/launch. It imports internal/runtime/memlimit (for how
// long a quiet node waits before it returns memory, which the bench waits
// out before the limit's turns), internal/runtime/tick,
// internal/testkit/instance, internal/testkit/launch and opapi only; it
// must not import the server's packages, so it measures what clients see.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// Request is one request template; Next, if set, varies the URL per call.
type Request struct {
	Method  string
	URL     string
	Header  http.Header
	Body    func() io.Reader
	Next    func(worker, i int) string
	WantMin int // lowest acceptable status (default 200)
	WantMax int // highest acceptable status (default 299)
}

// LoadConfig bounds a closed-loop run: Concurrency workers issue requests
// back to back until Duration passes or MaxRequests were sent.
type LoadConfig struct {
	Concurrency int
	Duration    time.Duration
	MaxRequests int64
	// Rate, if positive, paces the run to that many requests per second
	// overall (an open-loop schedule the workers follow).
	Rate float64
	// Drain, if positive, lets calls started before Duration ended run up
	// to Drain longer and counts them (the elapsed time then runs until the
	// last one returns), so that operations slower than Duration are
	// measured instead of cut off. 0 cuts every call off at Duration.
	Drain time.Duration
}

// Result summarises a run.
type Result struct {
	Requests int64         `json:"requests"`
	Errors   int64         `json:"errors"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	PerSec   float64       `json:"per_sec"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	Bytes    int64         `json:"bytes"`
	// FirstError is the first failure seen, for the report.
	FirstError string `json:"first_error,omitempty"`
}

// String is the one-line summary progress lines show.
func (r Result) String() string {
	return fmt.Sprintf("%d req in %s (%.0f/s), errors %d, p50 %s, p99 %s, max %s",
		r.Requests, r.Elapsed.Round(time.Millisecond), r.PerSec, r.Errors,
		r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond))
}

// NewClient returns an HTTP client with enough kept-alive connections for
// the given concurrency, and no transparent decompression (bytes are
// measured as sent).
func NewClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        concurrency * 2,
			MaxIdleConnsPerHost: concurrency * 2,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

// Op is one unit of work of a closed-loop run: worker is the worker's
// number, i counts that worker's calls and seq all calls of the run (0, 1,
// 2, ... in the order they were started; below MaxRequests when that is
// set). It returns the bytes it moved, for the report.
type Op func(ctx context.Context, worker, i int, seq int64) (bytes int64, err error)

// Run drives req with the given load and returns the result.
func Run(ctx context.Context, client *http.Client, cfg LoadConfig, req Request) Result {
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	if req.WantMin == 0 {
		req.WantMin, req.WantMax = 200, 299
	}
	return RunFunc(ctx, cfg, func(ctx context.Context, w, i int, _ int64) (int64, error) {
		url := req.URL
		if req.Next != nil {
			url = req.Next(w, i)
		}
		return do(ctx, client, req, url)
	})
}

// RunFunc drives op with the given load (Concurrency workers calling it
// back to back, paced when Rate is set) until Duration passes, MaxRequests
// calls were started or ctx ends, and returns the result. A call that fails
// because the run's deadline cut it off is not counted.
func RunFunc(ctx context.Context, cfg LoadConfig, op Op) Result {
	res, _ := runFunc(ctx, cfg, op)
	return res
}

// runFunc is RunFunc also returning every latency, sorted.
func runFunc(ctx context.Context, cfg LoadConfig, op Op) (Result, []time.Duration) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	opCtx, opCancel := context.WithTimeout(ctx, cfg.Duration+max(cfg.Drain, 0))
	defer opCancel()
	deadline, _ := opCtx.Deadline()
	ctx, cancel := context.WithTimeout(opCtx, cfg.Duration)
	defer cancel()
	var sent, errs, bytes atomic.Int64
	var firstErr atomic.Value
	lat := make([][]time.Duration, cfg.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			local := make([]time.Duration, 0, 4096)
			for i := 0; ctx.Err() == nil; i++ {
				seq := sent.Add(1) - 1
				if cfg.MaxRequests > 0 && seq >= cfg.MaxRequests {
					break
				}
				if cfg.Rate > 0 {
					due := start.Add(time.Duration(float64(seq) / cfg.Rate * float64(time.Second)))
					select {
					case <-ctx.Done():
					case <-time.After(time.Until(due)):
					}
					if ctx.Err() != nil {
						break
					}
				}
				t0 := time.Now()
				n, err := op(opCtx, w, i, seq)
				if err != nil && (opCtx.Err() != nil || !time.Now().Before(deadline)) {
					// Cut off by the deadline (gRPC's own timer may fire a
					// moment before the context reports it): not a failure.
					break
				}
				local = append(local, time.Since(t0))
				bytes.Add(n)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
			lat[w] = local
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	s := Summarize(all)
	res := Result{Requests: int64(s.N), Errors: errs.Load(), Elapsed: elapsed, Bytes: bytes.Load(), P50: s.P50, P99: s.P99, Max: s.Max}
	if elapsed > 0 {
		res.PerSec = float64(res.Requests) / elapsed.Seconds()
	}
	if v, ok := firstErr.Load().(string); ok {
		res.FirstError = v
	}
	return res, all
}

// Merge combines results of runs of the same load taken in turns (e.g.
// alternating with another system): counts and elapsed times add up, the
// rate is the total over the total time, and percentiles come from all
// latencies together (lat holds each run's latencies).
func Merge(results []Result, lat [][]time.Duration) Result {
	var out Result
	var all []time.Duration
	for i, r := range results {
		out.Requests += r.Requests
		out.Errors += r.Errors
		out.Elapsed += r.Elapsed
		out.Bytes += r.Bytes
		if out.FirstError == "" {
			out.FirstError = r.FirstError
		}
		if i < len(lat) {
			all = append(all, lat[i]...)
		}
	}
	s := Summarize(all)
	out.P50, out.P99, out.Max = s.P50, s.P99, s.Max
	if out.Elapsed > 0 {
		out.PerSec = float64(out.Requests) / out.Elapsed.Seconds()
	}
	return out
}

func do(ctx context.Context, client *http.Client, req Request, url string) (int64, error) {
	var body io.Reader
	if req.Body != nil {
		body = req.Body()
	}
	r, err := http.NewRequestWithContext(ctx, req.Method, url, body)
	if err != nil {
		return 0, err
	}
	for k, v := range req.Header {
		r.Header[k] = v
	}
	resp, err := client.Do(r)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return n, err
	}
	if resp.StatusCode < req.WantMin || resp.StatusCode > req.WantMax {
		return n, fmt.Errorf("%s %s: status %d", req.Method, url, resp.StatusCode)
	}
	return n, nil
}

// ErrNoBody is returned by Fetch for an empty answer.
var ErrNoBody = errors.New("empty body")

// Fetch GETs url once and returns the body and response headers.
func Fetch(client *http.Client, url string, header http.Header) ([]byte, http.Header, error) {
	r, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		r.Header[k] = v
	}
	code, b, hdr, err := launch.Read(client, r)
	if err != nil {
		return nil, nil, err
	}
	if code != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: status %d", url, code)
	}
	if len(b) == 0 {
		return nil, nil, ErrNoBody
	}
	return b, hdr, nil
}
