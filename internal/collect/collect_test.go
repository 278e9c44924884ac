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
