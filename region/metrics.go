package region

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/collect"
)

// series is every series the collector reports.
var series = collect.NewSet("heureka_remote_region_")

var (
	descLoaded     = series.Desc("loaded", "1 once a whole copy of the region was taken.", "region")
	descReachable  = series.Desc("reachable", "1 while the region answers; 0: its last copy is served, marked.", "region")
	descInstances  = series.Desc("instances", "Instances in this node's copy of the region.", "region")
	descSyncedAge  = series.Desc("synced_age_seconds", "Time since the copy was last confirmed equal to the region's registry.", "region")
	descFetches    = series.Desc("fetches_total", "Requests to the region while this node led.", "region")
	descFailures   = series.Desc("failures_total", "Sync passes that found no URL of the region answering, while this node led.", "region")
	descReconciles = series.Desc("reconciles_total", "Full fetches after a delta left the copy's hash unlike the region's.", "region")
	descWrites     = series.Desc("writes_total", "Log entries written for the region's copy while this node led.", "region")
)

// Collector returns a Prometheus collector of the regions' state as this
// node's registry holds it (the same on every node) and of this node's
// sync counters, read at scrape time through read.
func (s *Syncer) Collector(read func(func(*fsm.Registry))) prometheus.Collector {
	return collector{s: s, read: read}
}

type collector struct {
	s    *Syncer
	read func(func(*fsm.Registry))
}

func (collector) Describe(ch chan<- *prometheus.Desc) { series.Describe(ch) }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	out := collect.Out(ch)
	now := time.Now()
	type view struct {
		st    fsm.RegionStatus
		n     int
		known bool
	}
	views := map[string]view{}
	c.read(func(r *fsm.Registry) {
		for _, rm := range c.s.cfg.Remotes {
			rr, ok := r.RemoteRegion(rm.Name)
			v := view{known: ok, st: rr.Status}
			if ok {
				v.n = rr.Copy.Count()
			}
			views[rm.Name] = v
		}
	})
	stats := c.s.Stats()
	for _, rm := range c.s.cfg.Remotes {
		v, st := views[rm.Name], stats[rm.Name]
		out.Gauge(descLoaded, collect.Bool(v.st.Loaded), rm.Name)
		out.Gauge(descReachable, collect.Bool(v.known && v.st.Reachable), rm.Name)
		out.Gauge(descInstances, float64(v.n), rm.Name)
		age := 0.0
		if v.st.SyncedAt > 0 {
			age = now.Sub(time.UnixMilli(v.st.SyncedAt)).Seconds()
		}
		out.Gauge(descSyncedAge, age, rm.Name)
		out.Counter(descFetches, float64(st.Fetches), rm.Name)
		out.Counter(descFailures, float64(st.Failures), rm.Name)
		out.Counter(descReconciles, float64(st.Reconciles), rm.Name)
		out.Counter(descWrites, float64(st.Writes), rm.Name)
	}
}
