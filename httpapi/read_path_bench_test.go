package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// discardWriter is a ResponseWriter that keeps only the status and the
// header map, reused between requests so that the benchmark counts the
// handler's own work and not a recorder's.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// BenchmarkServeOneAppCached measures the whole handler chain (metrics,
// panic recovery, node headers, dispatch, read gate, cache hit, headers
// and body) of GET /eureka/apps/{app} with gzip, the read a Eureka client
// repeats most, once its document is in the readOnly cache: the
// per-request overhead around a small cached document.
func BenchmarkServeOneAppCached(b *testing.B) {
	benchHandler(b, benchServer(b, 1000, 50).Handler(), "/eureka/apps/APP-007", true) // 20 instances per application
}

// BenchmarkServeOneAppCachedPlain is BenchmarkServeOneAppCached without
// gzip.
func BenchmarkServeOneAppCachedPlain(b *testing.B) {
	benchHandler(b, benchServer(b, 1000, 50).Handler(), "/eureka/apps/APP-007", false)
}

// benchHandler serves path through h repeatedly, without a socket.
func benchHandler(b *testing.B, h http.Handler, path string, gz bool) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Accept", "application/json")
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req) // fills the cache
	if w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	b.StopTimer()
	if w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
}
