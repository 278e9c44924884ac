package httpapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/collect"
	"github.com/heureka-registry/heureka/nodeapi"
)

// GET /metrics serves Prometheus text. Three sources feed it:
//
//   - this server's registry: HTTP requests and latency per route, and a
//     collector that reads the node (Raft state, registry size, leases and
//     self-preservation, mode, fallback) and the response cache at scrape time;
//   - hashicorp/raft's own metrics (apply, commit and FSM timings, RPCs),
//     which raft emits through go-metrics and bridgeRaftMetrics routes into
//     Prometheus' default registry under the heureka_raft_ prefix;
//   - the default registry's Go runtime and process collectors.
//
// Route labels are route names (an Eureka endpoint kind or a gin route
// pattern), never raw paths, so their number is bounded.

// metricsNamespace prefixes every heureka series.
const metricsNamespace = "heureka"

// latencyBuckets are the HTTP latency histogram's bounds in seconds.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// serverMetrics is one server's Prometheus registry and HTTP instruments.
type serverMetrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	handler  http.Handler
	// resolved holds the series requests have fed so far (instrumentsFor);
	// resolveMu serialises adding to it.
	resolved  atomic.Pointer[map[instrumentKey]instruments]
	resolveMu sync.Mutex
}

// newMetrics builds the server's registry; call observe from the
// middleware chain and routes to serve GET /metrics.
func (s *Server) newMetrics() *serverMetrics {
	bridgeRaftMetrics(s.log)
	m := &serverMetrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: "http", Name: "requests_total",
		Help: "HTTP requests answered, by route name, method and status code.",
	}, []string{"route", "method", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metricsNamespace, Subsystem: "http", Name: "request_duration_seconds",
		Help: "HTTP request latency, by route name and method.", Buckets: latencyBuckets,
	}, []string{"route", "method"})
	m.reg.MustRegister(m.requests, m.latency, &nodeCollector{s: s})
	m.handler = promhttp.HandlerFor(prometheus.Gatherers{m.reg, prometheus.DefaultGatherer},
		promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, ErrorLog: hclogPrinter{s.log}})
	return m
}

// routes registers GET /metrics.
func (m *serverMetrics) routes(e *gin.Engine) {
	e.GET("/metrics", gin.WrapH(m.handler))
}

// contextKeys recycles the gin contexts' Keys maps: gin makes a new one
// for the first Set of every request, and the Eureka dispatcher sets the
// route label on each, a map allocation per request on the hot read path.
var contextKeys = sync.Pool{New: func() any { return make(map[any]any, 4) }}

// observe is the middleware that counts requests and their latency.
func (m *serverMetrics) observe(c *gin.Context) {
	start := time.Now()
	keys := contextKeys.Get().(map[any]any)
	c.Keys = keys
	defer func() {
		// Nothing holds the map after the request (gin.Context.Copy
		// copies it), so it is handed to the next one.
		c.Keys = nil
		clear(keys)
		contextKeys.Put(keys)
	}()
	c.Next()
	route := routeName(c)
	method := c.Request.Method
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions:
	default:
		method = "OTHER"
	}
	in := m.instrumentsFor(instrumentKey{route: route, method: method, code: c.Writer.Status()})
	in.requests.Inc()
	in.latency.Observe(time.Since(start).Seconds())
}

// instrumentKey names one request series: route, method and status code.
type instrumentKey struct {
	route, method string
	code          int
}

// instruments are the series a request with a given key feeds.
type instruments struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// instrumentsFor returns the series of k. WithLabelValues hashes the label
// values and looks them up under a lock on every call, and the status code
// would be formatted each time; the series are resolved once per key
// instead and kept in a map that is replaced, never modified, so that
// requests read it without a lock. Keys are as bounded as the series
// themselves (route names, methods, status codes).
func (m *serverMetrics) instrumentsFor(k instrumentKey) instruments {
	if p := m.resolved.Load(); p != nil {
		if in, ok := (*p)[k]; ok {
			return in
		}
	}
	m.resolveMu.Lock()
	defer m.resolveMu.Unlock()
	var old map[instrumentKey]instruments
	if p := m.resolved.Load(); p != nil {
		old = *p
		if in, ok := old[k]; ok {
			return in
		}
	}
	in := instruments{
		requests: m.requests.WithLabelValues(k.route, k.method, strconv.Itoa(k.code)),
		latency:  m.latency.WithLabelValues(k.route, k.method),
	}
	next := make(map[instrumentKey]instruments, len(old)+1)
	maps.Copy(next, old)
	next[k] = in
	m.resolved.Store(&next)
	return in
}

// internalRoutes are the node-to-node endpoints named in route labels.
var internalRoutes = map[string]bool{"apply": true, "renew-batch": true, "lease-status": true,
	"join": true, "remove": true, "snapshot": true, "restore": true}

// routeName names the endpoint a request reached: "eureka_<kind>" for the
// Eureka API, "internal_<call>" between nodes, the gin route pattern for
// the rest, "unmatched" for anything else.
func routeName(c *gin.Context) string {
	p := c.Request.URL.Path
	switch {
	case strings.HasPrefix(p, "/eureka/") || p == "/eureka":
		if label := c.GetString(eurekaRouteKey); label != "" {
			return label
		}
		return "eureka_other"
	case strings.HasPrefix(p, nodeapi.Prefix):
		if name := strings.TrimPrefix(p, nodeapi.Prefix); internalRoutes[name] {
			return "internal_" + name
		}
		return "internal_other"
	}
	if fp := c.FullPath(); fp != "" {
		return fp
	}
	return "unmatched"
}

// nodeSeries is every series nodeCollector reports, in the order declared:
// it describes them all, so a new series cannot be left out of Describe.
var nodeSeries = collect.NewSet(metricsNamespace + "_")

// desc declares one of nodeCollector's series, heureka_<name>.
func desc(name, help string, labels ...string) *prometheus.Desc {
	return nodeSeries.Desc(name, help, labels...)
}

// Descriptions of the series nodeCollector reports.
var (
	descRaftState     = desc("raft_state", "1 for this node's Raft state (Leader, Follower, Candidate, Shutdown), 0 for the others.", "state")
	descRaftLeader    = desc("raft_is_leader", "1 when this node is the Raft leader.")
	descRaftTerm      = desc("raft_term", "Current Raft term.")
	descCommitIndex   = desc("raft_commit_index", "Raft commit index.")
	descAppliedIndex  = desc("raft_applied_index", "Last Raft index applied to the FSM.")
	descLastLogIndex  = desc("raft_last_log_index", "Last index in the Raft log.")
	descSnapshotIndex = desc("raft_last_snapshot_index", "Index of the last Raft snapshot.")
	descLastContact   = desc("raft_last_contact_seconds", "Seconds since this follower last heard from the leader (0 on the leader).")
	descLogBytes      = desc("raft_log_bytes", "Size of the Raft log store on disk.")
	descMembers       = desc("cluster_members", "Members in the Raft configuration.")
	descQuorum        = desc("quorum", "1 when this node is in touch with a leader holding a quorum.")
	descMode          = desc("mode", "1 for the cluster's consistency mode (ap or cp), 0 for the other.", "mode")
	descReady         = desc("ready", "1 once this node caught up after start and serves registry reads.")
	descReadGate      = desc("read_gate", "1 for the read gate's state: open, durable_stale (reads from the durable state, marked stale) or closed (reads refused).", "state")
	descGateCloses    = desc("read_gate_closes_total", "Times the read gate closed again after opening (a loss of touch with the leader), each followed by a catch-up.")
	descFallback      = desc("fallback_active", "1 while this node serves AP fallback (quorum lost, or journal writes awaiting replay).")
	descJournalItems  = desc("journal_entries", "Writes in the AP fallback journal awaiting replay.")
	descJournalBytes  = desc("journal_bytes", "Size of the AP fallback journal.")
	descJournalFull   = desc("journal_refused_total", "Writes refused without quorum because the AP fallback journal was full (--journal-max-entries, --journal-max-bytes).")
	descDiskFull      = desc("disk_full", "1 while the disk holding the data directory is full: writes this node would store get 503 until there is room again.")
	descDiskRefused   = desc("disk_full_refused_total", "Registry writes refused (503) because the disk holding the data directory was full.")
	descDiskFailures  = desc("disk_write_failures_total", "Writes of the Raft log, the AP fallback journal or a snapshot that failed for lack of room on the disk.")
	descInstances     = desc("registry_instances", "Registered instances.")
	descApps          = desc("registry_applications", "Registered applications.")
	descByStatus      = desc("registry_instances_by_status", "Registered instances by status.", "status")
	descRegVersion    = desc("registry_version", "Registry change version.")
	descRenewals      = desc("renewals_last_minute", "Renewals the leader counted in the last minute (scaled from the renewal rate window).")
	descThreshold     = desc("self_preservation_threshold", "Renewals per minute below which self-preservation stops eviction.")
	descExpected      = desc("renewals_expected_per_minute", "Renewals per minute the registered instances should send.")
	descSPEnabled     = desc("self_preservation_enabled", "1 when self-preservation is enabled.")
	descSPActive      = desc("self_preservation_active", "1 while self-preservation stops eviction (EMERGENCY on the dashboard).")
	descExpired       = desc("leases_expired", "Leases past expiry at the last evaluation.")
	descEvicted       = desc("evicted_total", "Instances evicted by the current leader since it took office.")
	descLeaseKnown    = desc("lease_status_up", "1 when the leader's lease numbers could be read for this scrape.")
	descCacheHits     = desc("cache_hits_total", "Response cache hits, by level (read_only, read_write).", "level")
	descCacheMisses   = desc("cache_misses_total", "Response cache misses, by level (read_only, read_write).", "level")
	descCacheEntries  = desc("cache_entries", "Documents held, by level (read_only, read_write).", "level")
	descCacheBuilds   = desc("cache_builds_total", "Documents built (in the read_write level).", "level")
	descCacheBuildErr = desc("cache_build_errors_total", "Document builds that failed (in the read_write level).", "level")
	descCacheBuildSec = desc("cache_build_seconds_total", "Time spent building documents (in the read_write level).", "level")
	descCacheBytes    = desc("cache_bytes", "Logical size of the cached documents, plain and gzipped, by level; read_only shares read_write's values and is not counted again.", "level")
	descCacheInval    = desc("cache_invalidations_total", "Cache invalidations caused by registry changes.")
	descCacheRefresh  = desc("cache_refreshes_total", "Refreshes of the read_only level from read_write.")
	descCachePushes   = desc("cache_pushes_total", "Passes that rebuilt the read_only documents a change touched, right after it.")
	descBlocking      = desc("blocking_reads_waiting", "Blocking reads (?index=) waiting for their document to change.")
	descPeerReceived  = desc("peer_replication_received_total", "Replicated changes this node received from eureka peers in /peerreplication/batch.")
)

// nodeCollector reads the node, its registry and its cache at scrape time.
type nodeCollector struct{ s *Server }

// Describe implements prometheus.Collector.
func (nc *nodeCollector) Describe(ch chan<- *prometheus.Desc) { nodeSeries.Describe(ch) }

// Collect implements prometheus.Collector.
func (nc *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	out := collect.Out(ch)
	nc.collectNode(out)
	nc.collectRegistry(out)
	nc.collectLeases(out)
	nc.collectCache(out)
	out.Gauge(descBlocking, float64(nc.s.waiting.Load()))
	out.Counter(descPeerReceived, float64(nc.s.peerItems.Load()))
}

// collectNode sends the node's Raft, membership, mode, read gate, AP
// fallback and disk series.
func (nc *nodeCollector) collectNode(out collect.Out) {
	s := nc.s
	gauge, counter, b2f := out.Gauge, out.Counter, collect.Bool
	st := s.cluster.Status()
	for _, state := range []string{"Leader", "Follower", "Candidate", "Shutdown"} {
		gauge(descRaftState, b2f(st.State == state), state)
	}
	gauge(descRaftLeader, b2f(st.State == "Leader"))
	gauge(descRaftTerm, float64(st.Term))
	gauge(descCommitIndex, float64(st.CommitIndex))
	gauge(descAppliedIndex, float64(st.AppliedIndex))
	gauge(descLastLogIndex, float64(st.LastLogIndex))
	gauge(descSnapshotIndex, float64(st.LastSnapshotIndex))
	lastContact := 0.0
	if st.State != "Leader" {
		lastContact = float64(st.LastContactMs) / 1000
	}
	gauge(descLastContact, lastContact)
	gauge(descLogBytes, float64(st.LogBytes))
	if members, err := s.cluster.Members(); err == nil {
		gauge(descMembers, float64(len(members)))
	}
	gauge(descQuorum, b2f(st.Quorum))
	for _, mode := range []string{cluster.ModeAP, cluster.ModeCP} {
		gauge(descMode, b2f(st.Mode == mode), mode)
	}
	gauge(descReady, b2f(st.Ready))
	for _, g := range []string{cluster.GateOpen, cluster.GateDurable, cluster.GateClosed} {
		gauge(descReadGate, b2f(st.ReadGate == g), g)
	}
	counter(descGateCloses, float64(st.ReadGateCloses))
	gauge(descFallback, b2f(st.Fallback))
	gauge(descJournalItems, float64(st.JournalEntries))
	gauge(descJournalBytes, float64(st.JournalBytes))
	counter(descJournalFull, float64(st.JournalRefused))
	gauge(descDiskFull, b2f(st.DiskFull))
	counter(descDiskRefused, float64(st.DiskFullRefused))
	counter(descDiskFailures, float64(st.DiskWriteFailures))
}

// collectRegistry sends the registry's size, version and statuses.
func (nc *nodeCollector) collectRegistry(out collect.Out) {
	var counts map[string]int
	var apps, instances int
	var version uint64
	nc.s.readRegistry(func(r *fsm.Registry) {
		counts = r.StatusCounts()
		apps, instances, version = len(r.AppNames()), r.Count(), r.Version()
	})
	out.Gauge(descInstances, float64(instances))
	out.Gauge(descApps, float64(apps))
	out.Gauge(descRegVersion, float64(version))
	for _, status := range []string{"UP", "DOWN", "STARTING", "OUT_OF_SERVICE", "UNKNOWN"} {
		out.Gauge(descByStatus, float64(counts[status]), status)
	}
}

// collectLeases sends the leader's lease numbers, when they can be read.
func (nc *nodeCollector) collectLeases(out collect.Out) {
	gauge, b2f := out.Gauge, collect.Bool
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	ls, err := nc.s.cluster.LeaseStatus(ctx)
	cancel()
	gauge(descLeaseKnown, b2f(err == nil))
	if err == nil {
		gauge(descRenewals, float64(ls.RenewsLastMin))
		gauge(descThreshold, float64(ls.Threshold))
		gauge(descExpected, ls.ExpectedRenewsPerMin)
		gauge(descSPEnabled, b2f(ls.SelfPreservationEnabled))
		gauge(descSPActive, b2f(ls.SelfPreservationActive))
		gauge(descExpired, float64(ls.Expired))
		out.Counter(descEvicted, float64(ls.EvictedTotal))
	}
}

// collectCache sends the response cache's counters.
func (nc *nodeCollector) collectCache(out collect.Out) {
	gauge, counter := out.Gauge, out.Counter
	cs := nc.s.cache.Stats()
	counter(descCacheHits, float64(cs.ReadOnlyHits), "read_only")
	counter(descCacheHits, float64(cs.ReadWriteHits), "read_write")
	counter(descCacheMisses, float64(cs.ReadOnlyMisses), "read_only")
	counter(descCacheMisses, float64(cs.ReadWriteMisses), "read_write")
	gauge(descCacheEntries, float64(cs.ReadOnlyKeys), "read_only")
	gauge(descCacheEntries, float64(cs.ReadWriteKeys), "read_write")
	counter(descCacheBuilds, float64(cs.Builds), "read_write")
	counter(descCacheBuildErr, float64(cs.BuildErrors), "read_write")
	counter(descCacheBuildSec, cs.BuildSeconds, "read_write")
	gauge(descCacheBytes, float64(cs.Bytes), "read_write")
	counter(descCacheInval, float64(cs.Invalidations))
	counter(descCacheRefresh, float64(cs.Refreshes))
	counter(descCachePushes, float64(cs.Pushes))
}

// readRegistry reads the registry this node's Eureka reads show (the
// node's view includes AP fallback writes not yet replayed).
func (s *Server) readRegistry(fn func(r *fsm.Registry)) { s.cluster.Read(fn) }

// hclogPrinter adapts hclog to promhttp's error log.
type hclogPrinter struct{ log hclog.Logger }

// Println implements promhttp.Logger.
func (p hclogPrinter) Println(v ...any) {
	p.log.Warn("metrics gathering", "error", fmt.Sprint(v...))
}
