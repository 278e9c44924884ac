// Package bench holds the measuring tools shared by heureka's benchmarks
// and, later, `heureka bench`: a closed-loop HTTP load generator with
// latency percentiles, and the "limit" server that returns fixed bytes so
// every read figure can be put beside what the machine can do at all.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
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

// Run drives req with the given load and returns the result.
func Run(ctx context.Context, client *http.Client, cfg LoadConfig, req Request) Result {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	if req.WantMin == 0 {
		req.WantMin, req.WantMax = 200, 299
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var sent, errs, bytes, ticket atomic.Int64
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
				if cfg.MaxRequests > 0 && sent.Add(1) > cfg.MaxRequests {
					break
				}
				if cfg.Rate > 0 {
					due := start.Add(time.Duration(float64(ticket.Add(1)-1) / cfg.Rate * float64(time.Second)))
					select {
					case <-ctx.Done():
					case <-time.After(time.Until(due)):
					}
					if ctx.Err() != nil {
						break
					}
				}
				url := req.URL
				if req.Next != nil {
					url = req.Next(w, i)
				}
				t0 := time.Now()
				n, err := do(ctx, client, req, url)
				if ctx.Err() != nil && err != nil {
					break // cut off by the deadline: not a real failure
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
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	res := Result{Requests: int64(len(all)), Errors: errs.Load(), Elapsed: elapsed, Bytes: bytes.Load()}
	if elapsed > 0 {
		res.PerSec = float64(res.Requests) / elapsed.Seconds()
	}
	if len(all) > 0 {
		res.P50 = all[len(all)*50/100]
		res.P99 = all[min(len(all)-1, len(all)*99/100)]
		res.Max = all[len(all)-1]
	}
	if v, ok := firstErr.Load().(string); ok {
		res.FirstError = v
	}
	return res
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
	resp, err := client.Do(r)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	if len(b) == 0 {
		return nil, nil, ErrNoBody
	}
	return b, resp.Header, nil
}
