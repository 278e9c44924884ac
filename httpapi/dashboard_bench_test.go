package httpapi

import (
	"math"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkDashboard10kInstances renders GET / for 10,000 instances in 500
// applications with every trend ring full (360 samples), the page an
// operator loads during an incident.
func BenchmarkDashboard10kInstances(b *testing.B) {
	f, _ := benchRegistry(b, 10000, 500)
	s, err := New(DefaultConfig(), metricsCluster{&fakeCluster{fsm: f}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	s.trends.close() // the benchmark fills the ring itself
	t0 := time.Now().Add(-time.Hour)
	var r trendReading
	for i := 0; i <= trendCapacity; i++ {
		r.RenewsPerMin, r.Threshold = 1000+float64(i%50), 850
		r.Registrations += 3
		r.CacheHits += 100
		r.CacheMisses++
		r.CommitMsSum += 2.5 * 40
		r.CommitCount += 40
		s.trends.sample(t0.Add(time.Duration(i)*10*time.Second), r)
	}
	if p := s.trends.points(); len(p) != trendCapacity || math.IsNaN(p[0].CommitMs) {
		b.Fatalf("ring not filled: %d points", len(p))
	}
	b.ReportAllocs()
	b.ResetTimer()
	size := 0
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != 200 {
			b.Fatalf("GET /: %d", w.Code)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size)/1024, "KiB/page")
}
