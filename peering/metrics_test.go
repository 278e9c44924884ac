package peering

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/heureka-registry/heureka/internal/runtime/collect"
)

// The collector describes exactly what it collects (a pedantic registry
// checks that) and reports the replicator's numbers with their types.
func TestCollectorReportsStats(t *testing.T) {
	r := New(DefaultConfig(), nil, nil)
	r.active.Store(true)
	r.stats.batches.Add(2)
	r.countDrop(kindHeartbeat)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r.Collector())
	byName, err := collect.Gather(reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(byName) != 10 {
		t.Fatalf("%d series families, want 10: %v", len(byName), byName)
	}
	for _, c := range []struct {
		name string
		typ  dto.MetricType
		n    int
		v    float64 // of the first sample
	}{
		{"heureka_peer_replication_active", dto.MetricType_GAUGE, 1, 1},
		{"heureka_peer_replication_batches_total", dto.MetricType_COUNTER, 1, 2},
		{"heureka_peer_replication_dropped_total", dto.MetricType_COUNTER, 5, 0},
		{"heureka_peer_replication_lag_seconds", dto.MetricType_GAUGE, 2, 0},
	} {
		f := byName[c.name]
		if f == nil || f.GetType() != c.typ || len(f.Metric) != c.n {
			t.Fatalf("%s: %v, want %d samples of type %v", c.name, f, c.n, c.typ)
		}
		m := f.Metric[0]
		if got := m.GetGauge().GetValue() + m.GetCounter().GetValue(); got != c.v {
			t.Errorf("%s = %v, want %v", c.name, got, c.v)
		}
	}
	var heartbeats float64
	for _, m := range byName["heureka_peer_replication_dropped_total"].Metric {
		if m.GetLabel()[0].GetValue() == kindHeartbeat.String() {
			heartbeats = m.GetCounter().GetValue()
		}
	}
	if heartbeats != 1 {
		t.Fatalf("dropped heartbeats %v, want 1", heartbeats)
	}
}
