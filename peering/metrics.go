package peering

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heureka-registry/heureka/internal/runtime/collect"
)

// Collector returns a Prometheus collector of the replicator's counters
// (heureka_peer_replication_*), read at scrape time.
func (r *Replicator) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Replicator }

// series is every series collector reports: what it describes.
var series = collect.NewSet("heureka_peer_replication_")

var (
	descActive      = series.Desc("active", "1 while this node replicates to the eureka peers (it leads).")
	descQueued      = series.Desc("queued", "Changes waiting to be sent, over all peers.")
	descBatches     = series.Desc("batches_total", "Batches the peers accepted.")
	descItems       = series.Desc("items_total", "Replicated changes the peers answered.")
	descFailures    = series.Desc("item_failures_total", "Changes a peer refused (or batches it refused, per item).")
	descRetries     = series.Desc("retries_total", "Batches sent again after a peer was unreachable or busy.")
	descDropped     = series.Desc("dropped_total", "Changes dropped because a peer's queue was full, by kind.", "kind")
	descReregisters = series.Desc("reregisters_total", "Registers sent after a peer answered a heartbeat with 404.")
	descConflicts   = series.Desc("conflicts_total", "Newer records taken from a peer's 409.")
	descLag         = series.Desc("lag_seconds", "Time from a change to the peer's answer over the last items, by quantile.", "quantile")
)

func (collector) Describe(ch chan<- *prometheus.Desc) { series.Describe(ch) }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.r.Stats()
	out := collect.Out(ch)
	out.Gauge(descActive, collect.Bool(st.Active))
	out.Gauge(descQueued, float64(st.Queued))
	out.Counter(descBatches, float64(st.Batches))
	out.Counter(descItems, float64(st.Items))
	out.Counter(descFailures, float64(st.ItemFailures))
	out.Counter(descRetries, float64(st.Retries))
	for _, k := range []kind{kindRegister, kindCancel, kindStatus, kindDeleteOverride, kindHeartbeat} {
		out.Counter(descDropped, float64(st.Dropped[k.String()]), k.String())
	}
	out.Counter(descReregisters, float64(st.Reregisters))
	out.Counter(descConflicts, float64(st.Conflicts))
	out.Gauge(descLag, st.LagP50Ms/1000, "0.5")
	out.Gauge(descLag, st.LagP99Ms/1000, "0.99")
}
