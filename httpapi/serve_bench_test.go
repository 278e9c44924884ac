package httpapi

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkServeCachedGzip measures a cached read as Eureka clients make it
// (JSON, gzip accepted) over a real loopback connection, for the full
// registry and one application of 10,000 instances in 500 applications:
// the response cache's serving cost, socket writes included.
func BenchmarkServeCachedGzip(b *testing.B) {
	benchLoopback(b, benchServer(b, 10000, 500), true)
}

// BenchmarkServeCachedPlain is BenchmarkServeCachedGzip without gzip: the
// read eureka-js-client makes of the full registry every 30 seconds.
func BenchmarkServeCachedPlain(b *testing.B) {
	benchLoopback(b, benchServer(b, 10000, 500), false)
}

// BenchmarkServeLargeAppGzip reads one application of 800 of this
// benchmark's small instances over loopback: about 34 KiB gzipped, the
// size of an application of 100 instances with 1 KB of metadata each, as
// BenchmarkFootprint reads one at 50,000 instances. "limit" serves the
// same bytes from one slice with one Write, as heureka limit-server does:
// the ratio of the two is the cached read's overhead.
func BenchmarkServeLargeAppGzip(b *testing.B) {
	s := benchServer(b, 10000, 12)
	const path = "/eureka/apps/APP-007"
	b.Run("heureka", func(b *testing.B) { benchLoopbackPaths(b, s.Handler(), true, path) })
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	s.Handler().ServeHTTP(rec, req)
	body, header := rec.Body.Bytes(), rec.Header()
	limit := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		maps.Copy(w.Header(), header)
		_, _ = w.Write(body)
	})
	b.Run("limit", func(b *testing.B) { benchLoopbackPaths(b, limit, true, path) })
}

// benchLoopback reads the full registry and one application from s over
// loopback, in parallel, gzipped or not.
func benchLoopback(b *testing.B, s *Server, gz bool) {
	benchLoopbackPaths(b, s.Handler(), gz, "/eureka/apps", "/eureka/apps/APP-042")
}

// benchLoopbackPaths reads each path from h over loopback, in parallel,
// gzipped or not.
func benchLoopbackPaths(b *testing.B, h http.Handler, gz bool, paths ...string) {
	ts := serveAsHeureka(b, h, nil)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}
	for _, path := range paths {
		b.Run(path, func(b *testing.B) {
			get := func() int64 {
				req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
				req.Header.Set("Accept", "application/json")
				if gz {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET %s: %d", path, resp.StatusCode)
				}
				return n
			}
			b.SetBytes(get())
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					get()
				}
			})
		})
	}
}

// benchServer is a server over a registry of n instances in apps
// applications, closed when the benchmark ends.
func benchServer(b *testing.B, n, apps int) *Server {
	return benchServerConfig(b, n, apps, DefaultConfig())
}

func benchServerConfig(b *testing.B, n, apps int, cfg Config) *Server {
	f, _ := benchRegistry(b, n, apps)
	s, err := New(cfg, &fakeCluster{fsm: f}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	return s
}
