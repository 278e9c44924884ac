package dashboard

import (
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/heureka-registry/heureka/fsm"
)

// BenchmarkDashboard10kInstances renders GET / for 10,000 instances in 500
// applications with every trend ring full (360 samples), the page an
// operator loads during an incident.
func BenchmarkDashboard10kInstances(b *testing.B) {
	f := fsm.New(0, nil)
	var idx uint64
	pad := strings.Repeat("x", 90)
	for i := 0; i < 10000; i++ {
		app := fmt.Sprintf("APP-%03d", i%500)
		md := make(map[string]string, 10)
		for k := 0; k < 10; k++ {
			md[fmt.Sprintf("key.%d", k)] = pad
		}
		register(b, f, &idx, &fsm.Instance{InstanceID: fmt.Sprintf("10.0.%d.%d:%s:8080", i/250, i%250, strings.ToLower(app)),
			HostName: fmt.Sprintf("host-%d", i), App: app, IPAddr: "10.0.0.1", Status: fsm.StatusUp,
			OverriddenStatus: fsm.StatusUnknown, Port: 8080, PortEnabled: true, SecurePort: 443, CountryID: 1,
			DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}, Metadata: fsm.MetadataOf(md), VIPAddress: strings.ToLower(app),
			HomePageURL: "http://host:8080/", StatusPageURL: "http://host:8080/info", HealthCheckURL: "http://host:8080/health",
			LastDirtyTimestamp: 1700000000000})
	}
	s := New(Config{}, &fakeNode{fsm: f, troubled: true})
	b.Cleanup(s.Close)
	s.trends.close() // the benchmark fills the ring itself
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.GET("/", s.Serve)
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
		e.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != 200 {
			b.Fatalf("GET /: %d", w.Code)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size)/1024, "KiB/page")
}
