package httpapi

import (
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
)

// Raft's own metrics. hashicorp/raft (and raft-boltdb) report through
// go-metrics' global sink (the armon-compatible API); bridgeRaftMetrics
// installs, once per process, a raftSink that turns them into Prometheus
// series in the default registry named heureka_raft_<metric>: timings are
// histograms in milliseconds (heureka_raft_commitTime,
// heureka_raft_fsm_apply), counters and gauges stay counters and gauges.
//
// go-metrics' own Prometheus sink keeps every timing as a summary with three
// quantiles over a sliding 10 s window: five quantile streams per series,
// about 7 MB of a 10,000-instance node's 48 MB live heap, and an allocation
// for every sample raft reports (several per write). A histogram is a fixed
// array of buckets updated atomically; quantiles come from its buckets at
// query time (histogram_quantile), and, unlike a summary's, they aggregate
// across nodes.
var raftMetricsOnce sync.Once

// raftTimingBuckets are the bounds of the timing histograms, in
// milliseconds: 25 µs to 1.5 s in steps of 2.5×.
var raftTimingBuckets = prometheus.ExponentialBuckets(0.025, 2.5, 13)

// raftSummaries are declared up front so they are present before the
// first sample (apply latency on a follower, say).
var raftSummaries = [][]string{
	{"raft", "commitTime"},
	{"raft", "fsm", "apply"},
	{"raft", "leader", "dispatchLog"},
	{"raft", "rpc", "appendEntries"},
	{"raft", "snapshot", "persist"},
}

// raftCounters likewise.
var raftCounters = [][]string{{"raft", "apply"}, {"raft", "barrier"}, {"raft", "restore"}}

// raftBlocked are legacy per-peer series (the peer id is in the name,
// and the labelled variant is kept), dropped to bound cardinality.
var raftBlocked = []string{
	"heureka.raft.replication.heartbeat.",
	"heureka.raft.replication.appendEntries.rpc.",
	"heureka.raft.replication.appendEntries.logs.",
	"heureka.raft.replication.installSnapshot.",
}

func bridgeRaftMetrics(log hclog.Logger) {
	raftMetricsOnce.Do(func() {
		sink := newRaftSink()
		for _, name := range raftSummaries {
			sink.find(append([]string{metricsNamespace}, name...), nil, newRaftHistogram)
		}
		for _, name := range raftCounters {
			sink.find(append([]string{metricsNamespace}, name...), nil, newRaftCounter)
		}
		if err := prometheus.DefaultRegisterer.Register(sink); err != nil {
			log.Warn("raft metrics not bridged to Prometheus", "error", err)
			return
		}
		cfg := gometrics.DefaultConfig(metricsNamespace)
		cfg.EnableHostname = false
		cfg.EnableHostnameLabel = false
		cfg.EnableRuntimeMetrics = false
		cfg.BlockedPrefixes = raftBlocked
		if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
			log.Warn("raft metrics not bridged to Prometheus", "error", err)
		}
	})
}

// raftSink is a go-metrics sink and a Prometheus collector: each metric
// name and label set raft reports becomes one series, created on its first
// report and kept (raft's set of names is fixed, and per-peer labels are
// bounded by the cluster's members).
type raftSink struct {
	mu     sync.RWMutex
	series map[string]prometheus.Metric
}

func newRaftSink() *raftSink { return &raftSink{series: map[string]prometheus.Metric{}} }

// Describe sends nothing: the series are known only as raft reports them,
// which makes this an unchecked collector.
func (s *raftSink) Describe(chan<- *prometheus.Desc) {}

// Collect sends every series.
func (s *raftSink) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, m := range s.series {
		ch <- m
	}
}

// find returns the series for key and labels, creating it with create when
// it is new. A name reported as two kinds keeps the first: the callers'
// type checks drop the other kind's reports rather than panic in raft. The lookup builds its key on the stack, so a report of a known
// series allocates nothing.
func (s *raftSink) find(parts []string, labels []gometrics.Label, create func(name string, labels prometheus.Labels) prometheus.Metric) prometheus.Metric {
	var buf [160]byte
	key := appendSeriesKey(buf[:0], parts, labels)
	s.mu.RLock()
	m, ok := s.series[string(key)]
	s.mu.RUnlock()
	if ok {
		return m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.series[string(key)]; ok {
		return m
	}
	m = create(string(appendSeriesKey(nil, parts, nil)), prometheusLabels(labels))
	s.series[string(key)] = m
	return m
}

// AddSample observes a timing (milliseconds) or other sample.
func (s *raftSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels observes a labelled sample.
func (s *raftSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	if h, ok := s.find(key, labels, newRaftHistogram).(prometheus.Histogram); ok {
		h.Observe(float64(val))
	}
}

// IncrCounter adds to a counter.
func (s *raftSink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

// IncrCounterWithLabels adds to a labelled counter. A negative increment
// (never sent by raft) is dropped: Prometheus counters only go up.
func (s *raftSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	// A gauge has Add too: only a series made as a counter takes it.
	if c, ok := s.find(key, labels, newRaftCounter).(prometheus.Counter); ok && !isGauge(c) && val >= 0 {
		c.Add(float64(val))
	}
}

// SetGauge sets a gauge.
func (s *raftSink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

// SetGaugeWithLabels sets a labelled gauge.
func (s *raftSink) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	if g, ok := s.find(key, labels, newRaftGauge).(prometheus.Gauge); ok {
		g.Set(float64(val))
	}
}

// EmitKey is dropped: Prometheus has no type for a stream of values.
func (s *raftSink) EmitKey([]string, float32) {}

func isGauge(m prometheus.Metric) bool {
	_, ok := m.(prometheus.Gauge)
	return ok
}

func newRaftHistogram(name string, labels prometheus.Labels) prometheus.Metric {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: raftHelp("timing", name, " in milliseconds"),
		ConstLabels: labels, Buckets: raftTimingBuckets})
}

func newRaftCounter(name string, labels prometheus.Labels) prometheus.Metric {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: raftHelp("counter", name, ""), ConstLabels: labels})
}

func newRaftGauge(name string, labels prometheus.Labels) prometheus.Metric {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: raftHelp("gauge", name, ""), ConstLabels: labels})
}

func raftHelp(kind, name, unit string) string {
	return "hashicorp/raft " + kind + " " + strings.ReplaceAll(strings.TrimPrefix(name, metricsNamespace+"_"), "_", ".") + unit + "."
}

// appendSeriesKey appends the Prometheus name of parts (joined by '_', with
// the characters go-metrics allows in names but Prometheus does not made
// '_') and then each label as "\x00name\x00value": the series' key in the
// sink.
func appendSeriesKey(dst []byte, parts []string, labels []gometrics.Label) []byte {
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, '_')
		}
		for j := 0; j < len(p); j++ {
			switch c := p[j]; c {
			case ' ', '.', '=', '-', '/':
				dst = append(dst, '_')
			default:
				dst = append(dst, c)
			}
		}
	}
	for _, l := range labels {
		dst = append(dst, 0)
		dst = append(dst, l.Name...)
		dst = append(dst, 0)
		dst = append(dst, l.Value...)
	}
	return dst
}

// prometheusLabels returns labels as constant Prometheus labels, nil for
// none.
func prometheusLabels(labels []gometrics.Label) prometheus.Labels {
	if len(labels) == 0 {
		return nil
	}
	out := make(prometheus.Labels, len(labels))
	for _, l := range labels {
		out[l.Name] = l.Value
	}
	return out
}

// raftCommitSummary reads hashicorp/raft's commitTime histogram from the
// metrics bridge above: its sum in ms and its count (the dashboard's
// commit-time trend).
func raftCommitSummary() (float64, uint64) {
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil && len(families) == 0 {
		return 0, 0
	}
	for _, f := range families {
		if f.GetName() != metricsNamespace+"_raft_commitTime" {
			continue
		}
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				return h.GetSampleSum(), h.GetSampleCount()
			}
		}
	}
	return 0, 0
}
