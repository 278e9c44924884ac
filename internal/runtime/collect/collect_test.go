package collect

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestSetDescribesEverySeriesAndOutSendsTypedSamples(t *testing.T) {
	s := NewSet("x_")
	up := s.Desc("up", "1 when up.")
	hits := s.Desc("hits_total", "Hits, by level.", "level")
	descs := make(chan *prometheus.Desc, 4)
	s.Describe(descs)
	close(descs)
	var got []*prometheus.Desc
	for d := range descs {
		got = append(got, d)
	}
	if len(got) != 2 || got[0] != up || got[1] != hits {
		t.Fatalf("Describe sent %v, want up and hits_total in order", got)
	}

	ch := make(chan prometheus.Metric, 2)
	Out(ch).Gauge(up, Bool(true))
	Out(ch).Counter(hits, 3, "read_only")
	close(ch)
	var ms []*dto.Metric
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, &pb)
	}
	if len(ms) != 2 || ms[0].GetGauge().GetValue() != 1 || ms[1].GetCounter().GetValue() != 3 ||
		ms[1].GetLabel()[0].GetValue() != "read_only" {
		t.Fatalf("samples %v", ms)
	}
	if Bool(false) != 0 {
		t.Fatal("Bool(false) != 0")
	}
}

func TestFindReadsEveryKindAndMatchesLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	hits := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hits_total", Help: "h"}, []string{"level", "code"})
	hits.WithLabelValues("read_only", "200").Add(3)
	hits.WithLabelValues("read_write", "200").Add(5)
	lat := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latency_seconds", Help: "l"})
	lat.Observe(0.1)
	lat.Observe(0.2)
	up := prometheus.NewGauge(prometheus.GaugeOpts{Name: "up", Help: "u"})
	up.Set(1)
	reg.MustRegister(hits, lat, up)
	fams, err := Gather(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want map[string]string
		v    float64
		ok   bool
	}{
		{"up", nil, 1, true},
		{"latency_seconds", nil, 2, true},
		{"hits_total", nil, 3, true},
		{"hits_total", map[string]string{"level": "read_write"}, 5, true},
		{"hits_total", map[string]string{"level": "read_write", "code": "200"}, 5, true},
		{"hits_total", map[string]string{"level": "read_write", "code": "500"}, 0, false},
		{"hits_total", map[string]string{"route": ""}, 3, true},
		{"missing", nil, 0, false},
	} {
		if v, ok := Find(fams, c.name, c.want); v != c.v || ok != c.ok {
			t.Errorf("Find(%s, %v) = %v, %v; want %v, %v", c.name, c.want, v, ok, c.v, c.ok)
		}
	}
	if _, ok := Value(&dto.Metric{}); ok {
		t.Error("Value of a sample of no kind is ok")
	}
}
