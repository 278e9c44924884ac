package collect

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Gather gathers g and returns the families keyed by name, as Find takes
// them.
func Gather(g prometheus.Gatherer) (map[string]*dto.MetricFamily, error) {
	fams, err := g.Gather()
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	return byName, nil
}

// Value is the number a reader of the exposition takes from sample m: the
// value of a gauge, counter or untyped series, the sample count of a
// summary or histogram. It is false for a sample of no known kind.
func Value(m *dto.Metric) (float64, bool) {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	case m.Summary != nil:
		return float64(m.Summary.GetSampleCount()), true
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true
	}
	return 0, false
}

// Find returns the Value of the first series of the family name in fams
// (a gathered or parsed exposition) whose labels include want; a nil want
// takes any series. It is false when there is no such series.
func Find(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	fam, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, m := range fam.Metric {
		if hasLabels(m, want) {
			if v, ok := Value(m); ok {
				return v, true
			}
		}
	}
	return 0, false
}

// hasLabels reports whether m carries every label of want with its value,
// an absent label counting as empty, as in Prometheus.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		got := ""
		for _, l := range m.Label {
			if l.GetName() == k {
				got = l.GetValue()
			}
		}
		if got != v {
			return false
		}
	}
	return true
}
