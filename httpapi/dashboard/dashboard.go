package dashboard

import (
	"bytes"
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
)

// Node is what the page reads of this node and of the cluster; httpapi's
// Cluster (the cluster node) has these methods.
type Node interface {
	ID() string
	Status() cluster.Status
	LeaseStatus(ctx context.Context) (cluster.LeaseStatus, error)
	Members() ([]cluster.MemberInfo, error)
	Read(fn func(r *fsm.Registry))
	ReadDurable(fn func(r *fsm.Registry))
}

// Config is what the dashboard needs besides the node.
type Config struct {
	// TrendInterval is how often the trends are sampled; the charts reach
	// back trendCapacity samples (0: every 10 s, an hour).
	TrendInterval time.Duration
	// PeerTLS and ClusterSecret are how the nodes reach each other; the
	// page probes the other members with them.
	PeerTLS       *tls.Config
	ClusterSecret string
	// CacheStats reads the response cache's counters (nil: none).
	CacheStats func() cache.Stats
	// CommitTime reads hashicorp/raft's commit-time histogram: its sum in
	// ms and its count (nil: none).
	CommitTime func() (sumMs float64, count uint64)
	// Fail answers a request that failed (nil: a bare 500).
	Fail func(c *gin.Context, err error)
}

// Dashboard is the page and the trend sampler behind it.
type Dashboard struct {
	cfg    Config
	node   Node
	probe  *memberProber
	trends *trendSampler
	// registrations and cancels count the changes applied on this node,
	// for the trends.
	registrations, cancels atomic.Uint64
}

// New starts the trend sampler of a dashboard for node; Close stops it.
func New(cfg Config, node Node) *Dashboard {
	if cfg.CacheStats == nil {
		cfg.CacheStats = func() cache.Stats { return cache.Stats{} }
	}
	if cfg.CommitTime == nil {
		cfg.CommitTime = func() (float64, uint64) { return 0, 0 }
	}
	if cfg.Fail == nil {
		cfg.Fail = func(c *gin.Context, _ error) { c.AbortWithStatus(http.StatusInternalServerError) }
	}
	interval := cfg.TrendInterval
	if interval <= 0 {
		interval = defaultTrendInterval
	}
	d := &Dashboard{cfg: cfg, node: node, probe: newMemberProber(cfg.PeerTLS, cfg.ClusterSecret)}
	d.trends = newTrendSampler(trendCapacity, interval, d.readTrends)
	d.trends.start()
	return d
}

// Observe counts a change applied on this node (registrations and cancels
// are trends).
func (d *Dashboard) Observe(ch fsm.Change) {
	switch ch.Type {
	case fsm.CmdRegister:
		d.registrations.Add(1)
	case fsm.CmdCancel:
		d.cancels.Add(1)
	}
}

// Close stops the trend sampler.
func (d *Dashboard) Close() { d.trends.close() }

//go:embed index.html.tmpl style.css
var assets embed.FS

const (
	// dashboardRefresh is the default reload interval in seconds (?refresh=N overrides).
	dashboardRefresh = 10
	// dashboardInstancesPerApp caps the instances listed under one
	// application, dashboardInstancesTotal those listed on the page, so the
	// page stays small with tens of thousands of instances.
	dashboardInstancesPerApp = 100
	dashboardInstancesTotal  = 250
	// memberProbeTimeout bounds the health probe of each member.
	memberProbeTimeout = 700 * time.Millisecond
)

var (
	dashboardTmpl = template.Must(template.New("index.html.tmpl").Funcs(template.FuncMap{
		"upper": strings.ToUpper,
		"coord": coord,
		"sub":   func(a, b int) int { return a - b },
		"half":  func(a int) int { return a / 2 },
		"bytes": humanBytes,
		"ms": func(ms int64) string {
			return shortDuration(max(time.Duration(ms)*time.Millisecond, time.Second).Round(time.Second))
		},
		"ratio": func(hits, misses uint64) string {
			if hits+misses == 0 {
				return "–"
			}
			return fmt.Sprintf("%.1f%%", 100*float64(hits)/float64(hits+misses))
		},
	}).ParseFS(assets, "index.html.tmpl"))
	dashboardCSS = mustRead(assets, "style.css")
)

func mustRead(fs embed.FS, name string) string {
	b, err := fs.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// dashboardPage is what the template renders.
type dashboardPage struct {
	Now                 string
	Refresh             int
	CSS                 template.CSS
	Node                cluster.Status
	Fallback            bool
	Leases              *cluster.LeaseStatus
	LeaseErr            string
	Emergency           bool
	SelfPreservationOff bool
	Members             []memberRow
	MembersErr          string
	Applications        int
	Instances           int
	StatusTotals        []statusCount
	Apps                []appRow
	Cache               cache.Stats
	Trends              []trendChart
	TrendWindow         string
	Regions             []regionRow
}

// regionRow is one remote region's copy (docs/regions.md).
type regionRow struct {
	Name, Kind, Source, Error string
	Instances                 int
	Loaded, Reachable         bool
	// Synced is how long ago the copy was last confirmed equal to the
	// region's registry; Since when it became unreachable.
	Synced, Since string
}

type memberRow struct {
	cluster.MemberInfo
	Self    bool
	Healthy bool
	State   string
}

type statusCount struct {
	Status string
	N      int
}

type appRow struct {
	Name      string
	Total     int
	Counts    []statusCount
	Instances []instanceRow
	More      int
}

type instanceRow struct {
	ID, Host, Status, StatusURL, Renewed string
	Port                                 int32
}

// memberProber asks other members for their status the way the nodes reach
// each other: over HTTPS when node-to-node calls use TLS, with the cluster
// secret when one is set, and with the viewer's own credentials (every
// member has the same users), since /v1/status needs the read role when
// auth is on. It never uses a proxy.
type memberProber struct {
	client *http.Client
	scheme string
	secret string
}

func newMemberProber(peerTLS *tls.Config, secret string) *memberProber {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	scheme := "http://"
	if peerTLS != nil {
		tr.TLSClientConfig = peerTLS.Clone()
		scheme = "https://"
	}
	return &memberProber{client: &http.Client{Timeout: memberProbeTimeout, Transport: tr}, scheme: scheme, secret: secret}
}

// Serve is GET /: it renders the page.
func (d *Dashboard) Serve(c *gin.Context) {
	refresh := dashboardRefresh
	if v, err := strconv.Atoi(c.Query("refresh")); err == nil && v >= 1 && v <= 3600 {
		refresh = v
	}
	now := time.Now()
	p := dashboardPage{Now: now.UTC().Format("2006-01-02 15:04:05 MST"), Refresh: refresh,
		CSS: template.CSS(dashboardCSS), Node: d.node.Status(), Cache: d.cfg.CacheStats()}
	p.Fallback = p.Node.Fallback
	ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
	ls, err := d.node.LeaseStatus(ctx)
	cancel()
	if err == nil {
		p.Leases = &ls
		p.Emergency = ls.SelfPreservationActive
		p.SelfPreservationOff = !ls.SelfPreservationEnabled
	} else {
		p.LeaseErr = err.Error()
	}
	p.Trends = dashboardTrends(d.trends.points(), now, d.trends.span())
	p.TrendWindow = shortDuration(d.trends.span())
	p.Members, p.MembersErr = d.memberRows(c.Request.Context(), c.GetHeader("Authorization"))
	// The registry view follows the read gate: nothing partly replayed.
	switch p.Node.ReadGate {
	case cluster.GateOpen, "":
		d.node.Read(func(r *fsm.Registry) { p.fillRegistry(r, now) })
	case cluster.GateDurable:
		d.node.ReadDurable(func(r *fsm.Registry) { p.fillRegistry(r, now) })
	}
	d.node.Read(func(r *fsm.Registry) { p.Regions = regionRows(r, now) })

	var buf bytes.Buffer
	if err := dashboardTmpl.Execute(&buf, &p); err != nil {
		d.cfg.Fail(c, fmt.Errorf("render dashboard: %w", err))
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Data(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}

// regionRows lists the copies of remote regions the registry holds.
func regionRows(r *fsm.Registry, now time.Time) []regionRow {
	var rows []regionRow
	for _, name := range r.RemoteRegionNames() {
		rr, _ := r.RemoteRegion(name)
		st := rr.Status
		row := regionRow{Name: name, Kind: st.Kind, Source: st.Source, Error: st.Error, Instances: rr.Copy.Count(),
			Loaded: st.Loaded, Reachable: st.Reachable}
		if st.SyncedAt > 0 {
			row.Synced = shortDuration(now.Sub(time.UnixMilli(st.SyncedAt)).Round(time.Second)) + " ago"
		}
		if st.Since > 0 {
			row.Since = shortDuration(now.Sub(time.UnixMilli(st.Since)).Round(time.Second))
		}
		rows = append(rows, row)
	}
	return rows
}

// memberRows lists the members with a health probe of each (GET /v1/status).
// authorization is the viewer's Authorization header, passed on.
func (d *Dashboard) memberRows(ctx context.Context, authorization string) ([]memberRow, string) {
	members, err := d.node.Members()
	if err != nil {
		return nil, "members unavailable: " + err.Error()
	}
	rows := make([]memberRow, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		rows[i] = memberRow{MemberInfo: m, Self: m.ID == d.node.ID()}
		if rows[i].Self {
			rows[i].Healthy, rows[i].State = true, d.node.Status().State
			continue
		}
		if m.HTTPAddr == "" {
			rows[i].State = "address unknown"
			continue
		}
		wg.Add(1)
		go func(r *memberRow) {
			defer wg.Done()
			r.Healthy, r.State = d.probe.status(ctx, r.HTTPAddr, authorization)
		}(&rows[i])
	}
	wg.Wait()
	return rows, ""
}

// status asks the member at addr for its Raft state.
func (p *memberProber) status(ctx context.Context, addr, authorization string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.scheme+addr+"/v1/status", nil)
	if err != nil {
		return false, err.Error()
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if p.secret != "" {
		req.Header.Set(nodeapi.SecretHeader, p.secret)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false, "no answer"
	}
	defer resp.Body.Close()
	var st struct {
		State string `json:"state"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st) != nil {
		return false, resp.Status
	}
	return true, st.State
}

// statusOrder lists Eureka's statuses in the order the page shows them.
var statusOrder = []string{"UP", "DOWN", "STARTING", "OUT_OF_SERVICE", "UNKNOWN"}

func (p *dashboardPage) fillRegistry(r *fsm.Registry, now time.Time) {
	names := r.AppNames() // sorted, and shared: not to be modified
	p.Applications, p.Instances = len(names), r.Count()
	totals := r.StatusCounts()
	for _, st := range sortedStatuses(totals) {
		p.StatusTotals = append(p.StatusTotals, statusCount{st, totals[st]})
	}
	listed := 0
	for _, name := range names {
		entries := r.AppEntries(name)
		sort.Slice(entries, func(i, j int) bool { return entries[i].ID < entries[j].ID })
		row := appRow{Name: name, Total: len(entries)}
		counts := map[string]int{}
		for i, e := range entries {
			counts[e.Instance.Status]++
			if i >= dashboardInstancesPerApp || listed >= dashboardInstancesTotal {
				row.More++
				continue
			}
			listed++
			row.Instances = append(row.Instances, instanceRow{ID: e.ID, Host: e.Instance.HostName,
				Port: e.Instance.Port, Status: e.Instance.Status, StatusURL: safeURL(e.Instance.StatusPageURL),
				Renewed: ago(now, e.RenewedAt())})
		}
		for _, st := range sortedStatuses(counts) {
			row.Counts = append(row.Counts, statusCount{st, counts[st]})
		}
		p.Apps = append(p.Apps, row)
	}
}

// sortedStatuses returns the statuses present in counts, Eureka's first.
func sortedStatuses(counts map[string]int) []string {
	var out []string
	seen := map[string]bool{}
	for _, st := range statusOrder {
		if counts[st] > 0 {
			out = append(out, st)
			seen[st] = true
		}
	}
	var rest []string
	for st, n := range counts {
		if n > 0 && !seen[st] {
			rest = append(rest, st)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// safeURL keeps http(s) links only (html/template escapes the rest anyway).
func safeURL(u string) string {
	if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
		return u
	}
	return ""
}

func ago(now time.Time, ms int64) string {
	if ms <= 0 {
		return "never"
	}
	d := now.Sub(time.UnixMilli(ms)).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

// shortDuration writes 1h0m0s as 1h and 3m0s as 3m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
