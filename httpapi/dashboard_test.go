package httpapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
)

// The page renders without a browser too (e2e/dashboard_test.go looks at
// it in Chromium).
func TestDashboardRenders(t *testing.T) {
	for _, c := range []struct {
		name      string
		cluster   func(f *fsm.FSM) Cluster
		emergency bool
		diskFull  bool
	}{
		{"no leader", func(f *fsm.FSM) Cluster { return &fakeCluster{fsm: f} }, false, false},
		{"self-preservation, disk full", func(f *fsm.FSM) Cluster { return metricsCluster{&fakeCluster{fsm: f}} }, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fsm.New(0, nil)
			ts, _ := startTestServer(t, DefaultConfig(), c.cluster(f), nil)
			for _, r := range []struct{ app, id, status string }{{"ORDERS", "o1", "UP"}, {"ORDERS", "o2", "DOWN"}, {"PAY", "p<1>", "UP"}} {
				body := `{"instance":{"instanceId":"` + r.id + `","hostName":"h","app":"` + r.app + `","ipAddr":"10.0.0.1","status":"` + r.status + `","dataCenterInfo":{"name":"MyOwn"}}}`
				resp, err := http.Post(ts.URL+"/eureka/apps/"+r.app, "application/json", strings.NewReader(body))
				if err != nil || resp.StatusCode != http.StatusNoContent {
					t.Fatalf("register: %v %v", err, resp)
				}
				resp.Body.Close()
			}
			resp, err := http.Get(ts.URL + "/?refresh=5")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			page, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("GET /: %s %s", resp.Status, resp.Header.Get("Content-Type"))
			}
			html := string(page)
			for _, want := range []string{`<meta http-equiv="refresh" content="5">`, `data-app="ORDERS"`, "UP (1)", "DOWN (1)",
				`data-app="PAY"`, "p&lt;1&gt;", "2 applications, 3 instances", `id="cache"`,
				`<figure class="trend" id="trend-renewals">`, `id="trend-registry"`, `id="trend-cache"`, `id="trend-commit"`} {
				if !strings.Contains(html, want) {
					t.Errorf("page lacks %q", want)
				}
			}
			if got := strings.Contains(html, `id="disk-full"`) && strings.Contains(html, "DISK FULL"); got != c.diskFull {
				t.Errorf("DISK FULL banner shown: %v, want %v", got, c.diskFull)
			}
			if got := strings.Contains(html, `<td id="disk"><span class="bad">FULL</span>`); got != c.diskFull {
				t.Errorf("disk shown full: %v, want %v", got, c.diskFull)
			}
			if got := strings.Contains(html, "EMERGENCY!"); got != c.emergency {
				t.Errorf("EMERGENCY banner shown: %v, want %v", got, c.emergency)
			}
			if got := strings.Contains(html, `<a href="#trend-renewals">`); got != c.emergency {
				t.Errorf("banner links to the renewals chart: %v, want %v", got, c.emergency)
			}
		})
	}
}

// membersCluster lists one other member besides the fake node.
type membersCluster struct {
	*fakeCluster
	other string
}

func (m membersCluster) Members() ([]cluster.MemberInfo, error) {
	return []cluster.MemberInfo{{ID: "other", HTTPAddr: m.other, Voter: true}}, nil
}

// The member probe reaches the others as the nodes reach each other: over
// HTTPS when node-to-node calls use TLS, with the cluster secret, and with
// the viewer's credentials (GET /v1/status needs the read role).
func TestDashboard_MemberProbeUsesTLSAndCredentials(t *testing.T) {
	const auth = "Basic dmlld2VyOnNlY3JldA=="
	member := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" || r.Header.Get("Authorization") != auth || r.Header.Get(nodeapi.SecretHeader) != "s3cret" {
			http.Error(w, `{"error":"authentication required"}`, http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"state":"Follower"}`)
	}))
	defer member.Close()
	pool := x509.NewCertPool()
	pool.AddCert(member.Certificate())
	cfg := DefaultConfig()
	cfg.PeerTLS = &tls.Config{RootCAs: pool}
	cfg.ClusterSecret = "s3cret"
	s, err := New(cfg, membersCluster{&fakeCluster{fsm: fsm.New(0, nil)}, member.Listener.Addr().String()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, msg := s.memberRows(context.Background(), auth)
	if msg != "" || len(rows) != 1 {
		t.Fatalf("rows %v, message %q", rows, msg)
	}
	if !rows[0].Healthy || rows[0].State != "Follower" {
		t.Fatalf("probe of a TLS member with auth: healthy=%v state=%q, want true Follower", rows[0].Healthy, rows[0].State)
	}
	if rows, _ := s.memberRows(context.Background(), ""); rows[0].Healthy {
		t.Fatal("probe without the viewer's credentials counted as healthy")
	}
}
