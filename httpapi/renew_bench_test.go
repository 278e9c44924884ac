package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkServeRenew measures the handler chain (metrics, panic
// recovery, authentication, node headers, dispatch) around a heartbeat,
// PUT /eureka/apps/{app}/{id} as Spring Cloud's client sends it, with the
// cluster's part (a registry lookup in the fake) as small as it gets: the
// per-heartbeat cost of the HTTP layer that a fleet pays 33,000 times a
// second at a million instances.
func BenchmarkServeRenew(b *testing.B) {
	h := benchServer(b, 1000, 50).Handler()
	req := httptest.NewRequest(http.MethodPut, "/eureka/apps/APP-007/10.0.0.7:app-007:8080?status=UP&lastDirtyTimestamp=1700000000000", nil)
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req)
	if w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	if w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
}
