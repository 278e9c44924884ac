package peering

import "github.com/prometheus/client_golang/prometheus"

// Collector returns a Prometheus collector of the replicator's counters
// (heureka_peer_replication_*), read at scrape time.
func (r *Replicator) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Replicator }

// descs is every descriptor pdesc made: what collector describes.
var descs []*prometheus.Desc

func pdesc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc("heureka_peer_replication_"+name, help, labels, nil)
	descs = append(descs, d)
	return d
}

var (
	descActive      = pdesc("active", "1 while this node replicates to the eureka peers (it leads).")
	descQueued      = pdesc("queued", "Changes waiting to be sent, over all peers.")
	descBatches     = pdesc("batches_total", "Batches the peers accepted.")
	descItems       = pdesc("items_total", "Replicated changes the peers answered.")
	descFailures    = pdesc("item_failures_total", "Changes a peer refused (or batches it refused, per item).")
	descRetries     = pdesc("retries_total", "Batches sent again after a peer was unreachable or busy.")
	descDropped     = pdesc("dropped_total", "Changes dropped because a peer's queue was full, by kind.", "kind")
	descReregisters = pdesc("reregisters_total", "Registers sent after a peer answered a heartbeat with 404.")
	descConflicts   = pdesc("conflicts_total", "Newer records taken from a peer's 409.")
	descLag         = pdesc("lag_seconds", "Time from a change to the peer's answer over the last items, by quantile.", "quantile")
)

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.r.Stats()
	g := func(d *prometheus.Desc, t prometheus.ValueType, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, l...)
	}
	active := 0.0
	if st.Active {
		active = 1
	}
	g(descActive, prometheus.GaugeValue, active)
	g(descQueued, prometheus.GaugeValue, float64(st.Queued))
	g(descBatches, prometheus.CounterValue, float64(st.Batches))
	g(descItems, prometheus.CounterValue, float64(st.Items))
	g(descFailures, prometheus.CounterValue, float64(st.ItemFailures))
	g(descRetries, prometheus.CounterValue, float64(st.Retries))
	for _, k := range []kind{kindRegister, kindCancel, kindStatus, kindDeleteOverride, kindHeartbeat} {
		g(descDropped, prometheus.CounterValue, float64(st.Dropped[k.String()]), k.String())
	}
	g(descReregisters, prometheus.CounterValue, float64(st.Reregisters))
	g(descConflicts, prometheus.CounterValue, float64(st.Conflicts))
	g(descLag, prometheus.GaugeValue, st.LagP50Ms/1000, "0.5")
	g(descLag, prometheus.GaugeValue, st.LagP99Ms/1000, "0.99")
}
