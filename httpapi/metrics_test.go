package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/collect"
)

// metricsCluster is fakeCluster with lease numbers, a Raft status, members,
// fallback and a journal, so that every series has something to report.
type metricsCluster struct{ *fakeCluster }

func (m metricsCluster) LeaseStatus(context.Context) (cluster.LeaseStatus, error) {
	return cluster.LeaseStatus{SelfPreservationEnabled: true, SelfPreservationActive: true, RenewsLastMin: 12,
		Threshold: 51, ExpectedRenewsPerMin: 60, Instances: 3, EvictedTotal: 2, From: "n1"}, nil
}
func (m metricsCluster) Status() cluster.Status {
	return cluster.Status{Node: "n1", State: "Leader", Leader: "n1", Term: 7, CommitIndex: 42, AppliedIndex: 41,
		LastLogIndex: 42, Mode: "cp", Quorum: true, LogBytes: 4096, JournalEntries: 4, JournalBytes: 512,
		Ready: true, ReadGate: cluster.GateOpen, DiskFull: true, DiskFullForMs: 3000, DiskFullRefused: 5, DiskWriteFailures: 2}
}
func (m metricsCluster) Members() ([]cluster.MemberInfo, error) {
	return []cluster.MemberInfo{{ID: "n1", Voter: true, Leader: true}, {ID: "n2", Voter: true}, {ID: "n3", Voter: true}}, nil
}

// seriesRE finds heureka series names in PromQL.
var seriesRE = regexp.MustCompile(`heureka_[a-zA-Z_]+`)

// scrape fetches /metrics and parses it with Prometheus' text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not valid Prometheus text: %v", err)
	}
	return fams
}

func TestMetricsExposition(t *testing.T) {
	f := fsm.New(0, nil)
	fc := metricsCluster{&fakeCluster{fsm: f}}
	cfg := DefaultConfig()
	cfg.Cache.UseReadOnly = false
	ts, _ := startTestServer(t, cfg, fc, nil)

	for _, id := range []string{"a1", "a2"} {
		body := `{"instance":{"instanceId":"` + id + `","hostName":"h","app":"ORDERS","ipAddr":"10.0.0.1","status":"UP","dataCenterInfo":{"name":"MyOwn"}}}`
		resp, err := http.Post(ts.URL+"/eureka/apps/ORDERS", "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("register %s: %v %v", id, err, resp)
		}
		resp.Body.Close()
	}
	for _, path := range []string{"/eureka/apps", "/eureka/apps", "/eureka/apps/ORDERS/a1", "/eureka/apps/ORDERS/a1?x=1",
		"/v1/status", "/v1/members/n9", "/no/such/path/123"} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		if strings.HasPrefix(path, "/v1/members/") {
			req.Method = http.MethodDelete
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	// A body written whole inside the handler (gzip documents go out in
	// one vectored write) reaches the client before the metrics
	// middleware records the request: wait for the last one's record.
	fams := scrape(t, ts.URL)
	for i := 0; i < 100; i++ {
		apps, _ := collect.Find(fams, "heureka_http_requests_total", map[string]string{"route": "eureka_apps", "method": "GET", "code": "200"})
		inst, _ := collect.Find(fams, "heureka_http_requests_total", map[string]string{"route": "eureka_instance", "method": "GET"})
		if apps == 2 && inst == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
		fams = scrape(t, ts.URL)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64 // -1: present, any value
	}{
		{"heureka_http_requests_total", map[string]string{"route": "eureka_register", "method": "POST", "code": "204"}, 2},
		{"heureka_http_requests_total", map[string]string{"route": "eureka_apps", "method": "GET", "code": "200"}, 2},
		{"heureka_http_requests_total", map[string]string{"route": "eureka_instance", "method": "GET"}, 2},
		{"heureka_http_requests_total", map[string]string{"route": "/v1/members/:id", "method": "DELETE"}, 1},
		{"heureka_http_requests_total", map[string]string{"route": "unmatched", "code": "404"}, 1},
		{"heureka_http_request_duration_seconds", map[string]string{"route": "eureka_apps", "method": "GET"}, 2},
		{"heureka_cache_hits_total", map[string]string{"level": "read_only"}, -1},
		{"heureka_cache_hits_total", map[string]string{"level": "read_write"}, -1},
		{"heureka_cache_misses_total", map[string]string{"level": "read_write"}, -1},
		{"heureka_cache_misses_total", map[string]string{"level": "read_only"}, -1},
		{"heureka_cache_builds_total", map[string]string{"level": "read_write"}, -1},
		{"heureka_cache_bytes", map[string]string{"level": "read_write"}, -1},
		{"heureka_cache_entries", map[string]string{"level": "read_only"}, -1},
		{"heureka_registry_instances", nil, 2},
		{"heureka_registry_applications", nil, 1},
		{"heureka_registry_instances_by_status", map[string]string{"status": "UP"}, 2},
		{"heureka_renewals_last_minute", nil, 12},
		{"heureka_self_preservation_threshold", nil, 51},
		{"heureka_self_preservation_active", nil, 1},
		{"heureka_self_preservation_enabled", nil, 1},
		{"heureka_mode", map[string]string{"mode": "cp"}, 1},
		{"heureka_mode", map[string]string{"mode": "ap"}, 0},
		{"heureka_fallback_active", nil, 0},
		{"heureka_journal_entries", nil, 4},
		{"heureka_journal_bytes", nil, 512},
		{"heureka_disk_full", nil, 1},
		{"heureka_disk_full_refused_total", nil, 5},
		{"heureka_disk_write_failures_total", nil, 2},
		{"heureka_raft_state", map[string]string{"state": "Leader"}, 1},
		{"heureka_raft_state", map[string]string{"state": "Follower"}, 0},
		{"heureka_raft_term", nil, 7},
		{"heureka_raft_commit_index", nil, 42},
		{"heureka_raft_applied_index", nil, 41},
		{"heureka_quorum", nil, 1},
		{"heureka_ready", nil, 1},
		{"heureka_read_gate", map[string]string{"state": "open"}, 1},
		{"heureka_read_gate", map[string]string{"state": "closed"}, 0},
		{"heureka_read_gate", map[string]string{"state": "durable_stale"}, 0},
		{"heureka_cluster_members", nil, 3},
		{"heureka_evicted_total", nil, 2},
		// hashicorp/raft's own timings, bridged from go-metrics (declared up front).
		{"heureka_raft_commitTime", nil, -1},
		{"heureka_raft_fsm_apply", nil, -1},
		{"heureka_raft_apply", nil, -1},
		// The default registry's runtime collectors.
		{"go_goroutines", nil, -1},
		{"process_resident_memory_bytes", nil, -1},
	} {
		got, ok := collect.Find(fams, c.name, c.labels)
		switch {
		case !ok:
			t.Errorf("%s%v missing", c.name, c.labels)
		case c.want >= 0 && got != c.want:
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Every series the Grafana dashboard queries is exposed.
	raw, err := os.ReadFile("../deploy/grafana/heureka.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/heureka.json: %v", err)
	}
	queried := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, name := range seriesRE.FindAllString(tg.Expr, -1) {
				queried++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if fams[name] == nil && fams[base] == nil {
					t.Errorf("Grafana panel %q queries %s, which /metrics does not expose", p.Title, name)
				}
			}
		}
	}
	if queried < 20 {
		t.Errorf("the Grafana dashboard queries only %d series", queried)
	}
	// Route labels are names, never raw paths.
	for _, m := range fams["heureka_http_requests_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "route" && (strings.Contains(l.GetValue(), "a1") || strings.Contains(l.GetValue(), "123")) {
				t.Errorf("route label %q carries a raw path", l.GetValue())
			}
		}
	}
}

// TestEurekaKind: the dispatcher names each Eureka endpoint for the metrics
// (the route label is "eureka_" and the endpoint's kind).
func TestEurekaKind(t *testing.T) {
	srv := newBareServer(t)
	eurekaKind := func(method, path string) string {
		ctx, _ := gin.CreateTestContext(httptest.NewRecorder())
		ctx.Request = httptest.NewRequest(method, path, nil)
		srv.eureka(ctx)
		return routeName(ctx)
	}
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/eureka/apps", "apps"},
		{"GET", "/eureka/v2/apps/", "apps"},
		{"GET", "/eureka/apps/delta", "delta"},
		{"POST", "/eureka/apps/ORDERS", "register"},
		{"GET", "/eureka/apps/ORDERS", "app"},
		{"PUT", "/eureka/apps/ORDERS/i-1", "renew"},
		{"DELETE", "/eureka/apps/ORDERS/i-1", "cancel"},
		{"GET", "/eureka/apps/ORDERS/i-1", "instance"},
		{"PUT", "/eureka/apps/ORDERS/i-1/status", "status_override"},
		{"PUT", "/eureka/apps/ORDERS/i-1/metadata", "metadata"},
		{"GET", "/eureka/instances/i-1", "instance_by_id"},
		{"GET", "/eureka/vips/orders", "vip"},
		{"GET", "/eureka/svips/orders", "svip"},
		{"GET", "/eureka/", "other"},
		{"GET", "/eureka/apps/a/b/c/d/e", "other"},
	} {
		if got := eurekaKind(c.method, c.path); got != "eureka_"+c.want {
			t.Errorf("eurekaKind(%s %s) = %s, want %s", c.method, c.path, got, c.want)
		}
	}
}
