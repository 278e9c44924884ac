package bench

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

func TestRunFunc_MaxRequestsCoversEverySeqOnce(t *testing.T) {
	const n = 1000
	var mu sync.Mutex
	seen := map[int64]int{}
	res := RunFunc(context.Background(), LoadConfig{Concurrency: 16, Duration: 10 * time.Second, MaxRequests: n},
		func(_ context.Context, w, i int, seq int64) (int64, error) {
			mu.Lock()
			seen[seq]++
			mu.Unlock()
			if seq%100 == 0 {
				return 1, errors.New("boom")
			}
			return 2, nil
		})
	if res.Requests != n || len(seen) != n {
		t.Fatalf("requests %d, distinct seqs %d, want %d", res.Requests, len(seen), n)
	}
	for seq, c := range seen {
		if seq < 0 || seq >= n || c != 1 {
			t.Fatalf("seq %d seen %d times", seq, c)
		}
	}
	if res.Errors != 10 || res.FirstError != "boom" || res.Bytes != 10*1+990*2 {
		t.Fatalf("errors %d (%q), bytes %d", res.Errors, res.FirstError, res.Bytes)
	}
}

func TestRunFunc_DurationBound(t *testing.T) {
	start := time.Now()
	res := RunFunc(context.Background(), LoadConfig{Concurrency: 4, Duration: 200 * time.Millisecond},
		func(ctx context.Context, _, _ int, _ int64) (int64, error) {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(10 * time.Millisecond):
				return 0, nil
			}
		})
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("run took %s, bounded to 200ms", took)
	}
	if res.Errors != 0 {
		t.Fatalf("calls cut off by the deadline were counted as errors: %+v", res)
	}
	// At least one call per worker; how many more depends on the machine's
	// load, which this test must not assert.
	if res.Requests < 4 || res.P50 < 10*time.Millisecond {
		t.Fatalf("unexpected result %+v", res)
	}
}

func TestRun_HTTPAndLimitHandler(t *testing.T) {
	body := []byte(`{"applications":{}}`)
	srv := httptest.NewServer(LimitHandler(body, http.Header{"Content-Type": {"application/json"}}))
	defer srv.Close()
	res := Run(context.Background(), NewClient(4), LoadConfig{Concurrency: 4, Duration: 5 * time.Second, MaxRequests: 200},
		Request{URL: srv.URL + "/eureka/apps"})
	if res.Requests != 200 || res.Errors != 0 || res.Bytes != 200*int64(len(body)) {
		t.Fatalf("%+v", res)
	}
	res = Run(context.Background(), NewClient(1), LoadConfig{Concurrency: 1, MaxRequests: 3},
		Request{URL: srv.URL, WantMin: 204, WantMax: 204})
	if res.Errors != 3 {
		t.Fatalf("a 200 where 204 is wanted must count as an error: %+v", res)
	}
}
