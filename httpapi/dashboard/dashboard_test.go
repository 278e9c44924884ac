package dashboard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
)

// fakeNode is a node without a leader, or (troubled) one whose disk is
// full and whose leases are in self-preservation.
type fakeNode struct {
	fsm      *fsm.FSM
	troubled bool
	// other is the HTTP address of one other member, if any.
	other string
}

func (n *fakeNode) ID() string { return "n1" }
func (n *fakeNode) Status() cluster.Status {
	if !n.troubled {
		return cluster.Status{Node: "n1"}
	}
	return cluster.Status{Node: "n1", State: "Leader", Leader: "n1", Term: 7, CommitIndex: 42, AppliedIndex: 41,
		LastLogIndex: 42, Mode: "cp", Quorum: true, LogBytes: 4096, JournalEntries: 4, JournalBytes: 512,
		Ready: true, ReadGate: cluster.GateOpen, DiskFull: true, DiskFullForMs: 3000, DiskFullRefused: 5, DiskWriteFailures: 2}
}
func (n *fakeNode) LeaseStatus(context.Context) (cluster.LeaseStatus, error) {
	if !n.troubled {
		return cluster.LeaseStatus{}, cluster.ErrNoLeader
	}
	return cluster.LeaseStatus{SelfPreservationEnabled: true, SelfPreservationActive: true, RenewsLastMin: 12,
		Threshold: 51, ExpectedRenewsPerMin: 60, Instances: 3, EvictedTotal: 2, From: "n1"}, nil
}
func (n *fakeNode) Members() ([]cluster.MemberInfo, error) {
	if n.other != "" {
		return []cluster.MemberInfo{{ID: "other", HTTPAddr: n.other, Voter: true}}, nil
	}
	if n.troubled {
		return []cluster.MemberInfo{{ID: "n1", Voter: true, Leader: true}, {ID: "n2", Voter: true}, {ID: "n3", Voter: true}}, nil
	}
	return nil, nil
}
func (n *fakeNode) Read(fn func(*fsm.Registry))        { n.fsm.Read(fn) }
func (n *fakeNode) ReadDurable(fn func(*fsm.Registry)) { n.fsm.Read(fn) }

// register applies a register command for app/id to f, as the log would.
func register(tb testing.TB, f *fsm.FSM, idx *uint64, in *fsm.Instance) {
	tb.Helper()
	e, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: in})
	if err != nil {
		tb.Fatal(err)
	}
	_ = fsm.Stamp(e, time.Now().UnixMilli())
	*idx++
	if res := f.Apply(&raft.Log{Index: *idx, Type: raft.LogCommand, Data: e}); res != nil {
		tb.Fatal(res)
	}
}

// serve mounts d at / on a test server.
func serve(t *testing.T, d *Dashboard) *httptest.Server {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.GET("/", d.Serve)
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	return ts
}

// The page renders without a browser too (e2e/dashboard_test.go looks at
// it in Chromium).
func TestDashboardRenders(t *testing.T) {
	for _, c := range []struct {
		name      string
		troubled  bool
		emergency bool
		diskFull  bool
	}{
		{"no leader", false, false, false},
		{"self-preservation, disk full", true, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fsm.New(0, nil)
			var idx uint64
			for _, r := range []struct{ app, id, status string }{{"ORDERS", "o1", "UP"}, {"ORDERS", "o2", "DOWN"}, {"PAY", "p<1>", "UP"}} {
				register(t, f, &idx, &fsm.Instance{InstanceID: r.id, HostName: "h", App: r.app, IPAddr: "10.0.0.1",
					Status: r.status, OverriddenStatus: fsm.StatusUnknown, DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}})
			}
			d := New(Config{}, &fakeNode{fsm: f, troubled: c.troubled})
			t.Cleanup(d.Close)
			ts := serve(t, d)
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
	d := New(Config{PeerTLS: &tls.Config{RootCAs: pool}, ClusterSecret: "s3cret"},
		&fakeNode{fsm: fsm.New(0, nil), other: member.Listener.Addr().String()})
	defer d.Close()
	rows, msg := d.memberRows(context.Background(), auth)
	if msg != "" || len(rows) != 1 {
		t.Fatalf("rows %v, message %q", rows, msg)
	}
	if !rows[0].Healthy || rows[0].State != "Follower" {
		t.Fatalf("probe of a TLS member with auth: healthy=%v state=%q, want true Follower", rows[0].Healthy, rows[0].State)
	}
	if rows, _ := d.memberRows(context.Background(), ""); rows[0].Healthy {
		t.Fatal("probe without the viewer's credentials counted as healthy")
	}
}

// Registrations and cancels observed become the registry trend's counters.
func TestDashboard_ObserveCountsChanges(t *testing.T) {
	d := New(Config{}, &fakeNode{fsm: fsm.New(0, nil)})
	defer d.Close()
	for _, typ := range []fsm.CmdType{fsm.CmdRegister, fsm.CmdRegister, fsm.CmdCancel} {
		d.Observe(fsm.Change{Type: typ})
	}
	if r := d.readTrends(); r.Registrations != 2 || r.Cancels != 1 {
		t.Fatalf("counted %d registrations and %d cancels, want 2 and 1", r.Registrations, r.Cancels)
	}
}

// A remote region that cannot be reached is shown as such, with its copy.
func TestDashboard_ShowsRemoteRegions(t *testing.T) {
	f := fsm.New(0, nil)
	now := time.Now().UnixMilli()
	for i, b := range []*fsm.RegionUpdateBody{
		{Region: "west", Pass: 1, Final: true, Put: []*fsm.Entry{{App: "W", ID: "w1",
			Instance: &fsm.Instance{InstanceID: "w1", HostName: "h", App: "W", Status: "UP", DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}}}},
			Status: &fsm.RegionStatus{Loaded: true, Reachable: false, Kind: "heureka", Source: "http://w:8761/eureka/", SyncedAt: now - 5000, Since: now - 3000, Error: "connection refused"}},
		{Region: "legacy", Pass: 1, Final: true, Status: &fsm.RegionStatus{Kind: "eureka", Error: "no route"}},
	} {
		e, err := fsm.Encode(fsm.CmdRegionUpdate|fsm.CmdIgnoreUnknown, b)
		if err != nil {
			t.Fatal(err)
		}
		_ = fsm.Stamp(e, now)
		if res := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: e}); res != nil {
			t.Fatal(res)
		}
	}
	ts := serve(t, New(Config{}, &fakeNode{fsm: f}))
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	page := string(body)
	for _, want := range []string{`data-region="west"`, `UNREACHABLE</span> for 3s`, "connection refused", `data-region="legacy"`, "NOT COPIED YET"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
