// Package collect is the common part of heureka's Prometheus collectors
// that read their numbers at scrape time (the node's collector in httpapi,
// the peer replicator's in peering): a Set declares the series and
// remembers every descriptor it made, so that a collector's Describe cannot
// leave one out, and Out sends the samples. Find and Value read a
// gathered or parsed exposition back, as tests check it.
//
// It imports no heureka package.
package collect

import "github.com/prometheus/client_golang/prometheus"

// Set is the series one collector reports, named prefix+name.
type Set struct {
	prefix string
	descs  []*prometheus.Desc
}

// NewSet returns an empty Set whose series names start with prefix.
func NewSet(prefix string) *Set { return &Set{prefix: prefix} }

// Desc declares the series prefix+name with its help text and variable
// labels. Sets are filled while package variables are initialised, before
// any scrape reads them.
func (s *Set) Desc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc(s.prefix+name, help, labels, nil)
	s.descs = append(s.descs, d)
	return d
}

// Describe sends every descriptor declared, in order: a collector's
// prometheus.Collector Describe.
func (s *Set) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs {
		ch <- d
	}
}

// Out sends the samples a collector's Collect reads.
type Out chan<- prometheus.Metric

// Gauge sends the value v of the gauge d with the given label values.
func (o Out) Gauge(d *prometheus.Desc, v float64, labels ...string) {
	o <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// Counter sends the value v of the counter d with the given label values.
func (o Out) Counter(d *prometheus.Desc, v float64, labels ...string) {
	o <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

// Bool is 1 for true and 0 for false: the value of a yes/no gauge.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
