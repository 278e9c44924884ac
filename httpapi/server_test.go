package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
)

// fakeCluster applies commands straight to a real FSM, without Raft, and
// counts what reached "the log".
type fakeCluster struct {
	mu      sync.Mutex
	fsm     *fsm.FSM
	index   uint64
	applied int
	renews  int
	// replicatedRenews counts the heartbeats renewed as replicated.
	replicatedRenews int
	applyFn          func() error
	catchUp          []func() // OnCatchUp hooks
}

func (f *fakeCluster) ID() string       { return "n1" }
func (f *fakeCluster) LeaderID() string { return "n1" }
func (f *fakeCluster) Mode() string     { return "ap" }
func (f *fakeCluster) HasQuorum() bool  { return true }
func (f *fakeCluster) Apply(_ context.Context, entry []byte) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.applyFn != nil {
		if err := f.applyFn(); err != nil {
			return 0, err
		}
	}
	f.index++
	f.applied++
	_ = fsm.Stamp(entry, time.Now().UnixMilli())
	res := f.fsm.Apply(&raft.Log{Index: f.index, Type: raft.LogCommand, Data: entry})
	if err, ok := res.(error); ok {
		return f.index, err
	}
	return f.index, nil
}
func (f *fakeCluster) Renew(_ context.Context, app, id string, _ int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var e *fsm.Entry
	f.fsm.Read(func(r *fsm.Registry) { e = r.Get(app, id) })
	if e == nil {
		return fsm.ErrInstanceNotFound
	}
	f.renews++
	return nil
}
func (f *fakeCluster) RenewReplicated(_ context.Context, app, id string, ldt int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var e *fsm.Entry
	f.fsm.Read(func(r *fsm.Registry) { e = r.Get(app, id) })
	if e == nil || fsm.RenewStatus(e) == fsm.StatusUnknown {
		return fsm.ErrInstanceNotFound
	}
	f.renews++
	f.replicatedRenews++
	if ldt > e.Instance.LastDirtyTimestamp {
		return fsm.ErrInstanceNotFound
	}
	return nil
}
func (f *fakeCluster) Ready() bool                                   { return true }
func (f *fakeCluster) WaitReady(context.Context, time.Duration) bool { return true }
func (f *fakeCluster) CaughtUpOnce() bool                            { return true }
func (f *fakeCluster) OnCatchUp(fn func()) {
	f.mu.Lock()
	f.catchUp = append(f.catchUp, fn)
	f.mu.Unlock()
}
func (f *fakeCluster) QuorumLost() bool                      { return false }
func (f *fakeCluster) SetMode(context.Context, string) error { return nil }
func (f *fakeCluster) ReadBarrier(context.Context) error     { return nil }
func (f *fakeCluster) Read(fn func(*fsm.Registry))           { f.fsm.Read(fn) }
func (f *fakeCluster) ReadDurable(fn func(*fsm.Registry))    { f.fsm.Read(fn) }
func (f *fakeCluster) Observe(fn func(fsm.Change))           { f.fsm.Observe(fn) }
func (f *fakeCluster) LeaseStatus(context.Context) (cluster.LeaseStatus, error) {
	return cluster.LeaseStatus{}, cluster.ErrNoLeader
}
func (f *fakeCluster) Status() cluster.Status                       { return cluster.Status{Node: "n1"} }
func (f *fakeCluster) Members() ([]cluster.MemberInfo, error)       { return nil, nil }
func (f *fakeCluster) Join(context.Context, fsm.Member) error       { return nil }
func (f *fakeCluster) Remove(context.Context, string) error         { return cluster.ErrUnknownMember }
func (f *fakeCluster) InternalHandler(func(error) int) http.Handler { return http.NotFoundHandler() }

func newTestServer(t *testing.T) (*httptest.Server, *fakeCluster) {
	t.Helper()
	return newTestServerWith(t, nil)
}

// newBareServer is a Server with the default config over an empty fake
// cluster, closed with the test; the caller serves it as it needs.
func newBareServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(DefaultConfig(), &fakeCluster{fsm: fsm.New(0, nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newTestServerWith is newTestServer with a hook to adjust the config.
func newTestServerWith(t *testing.T, adjust func(*Config)) (*httptest.Server, *fakeCluster) {
	t.Helper()
	f := fsm.New(0, nil)
	fc := &fakeCluster{fsm: f}
	cfg := DefaultConfig()
	cfg.Cache.UseReadOnly = false // these tests read their own writes at once
	if adjust != nil {
		adjust(&cfg)
	}
	ts, _ := startTestServer(t, cfg, fc, nil)
	return ts, fc
}

// startTestServer starts a Server from cfg over c on a test server; both
// are closed with the test.
func startTestServer(t *testing.T, cfg Config, c Cluster, log hclog.Logger) (*httptest.Server, *Server) {
	t.Helper()
	s, err := New(cfg, c, log)
	if err != nil {
		t.Fatal(err)
	}
	ts := serveAsHeureka(t, s.Handler(), nil)
	t.Cleanup(s.Close)
	return ts, s
}

// serveAsHeureka serves h on a test server as cmd/heureka serves (gzip
// documents go out with writev, header and body in one), adjusted by
// adjust if given before it starts; the server is closed with the test.
func serveAsHeureka(tb testing.TB, h http.Handler, adjust func(*http.Server)) *httptest.Server {
	tb.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Listener = Listener(ts.Listener)
	ts.Config.ConnContext = ConnContext
	if adjust != nil {
		adjust(ts.Config)
	}
	ts.Start()
	tb.Cleanup(ts.Close)
	return ts
}

func do(t *testing.T, method, url, contentType, body string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func instanceJSON(app, id string) string {
	return fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"h-%s","app":%q,"ipAddr":"10.0.0.1","status":"UP",
		"port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},
		"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
		"leaseInfo":{"renewalIntervalInSecs":30,"durationInSecs":90},"metadata":{"zone":"a"},
		"vipAddress":"svc","lastDirtyTimestamp":"1700000000000"}}`, id, id, app)
}

func TestServer_RegisterReadRenewCancel(t *testing.T) {
	ts, fc := newTestServer(t)
	base := ts.URL + "/eureka"
	if code, body, _ := do(t, "POST", base+"/apps/svc", "application/json", instanceJSON("svc", "i-1")); code != 204 {
		t.Fatalf("register: %d %s", code, body)
	}
	code, body, hdr := do(t, "GET", base+"/v2/apps/", "", "", "Accept", "application/json")
	if code != 200 || !strings.Contains(body, `"instanceId":"i-1"`) || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("get apps: %d %s %v", code, body, hdr)
	}
	if hdr.Get("X-Heureka-Node") != "n1" || hdr.Get("X-Heureka-Mode") != "ap" || hdr.Get("X-Heureka-Leader") != "n1" {
		t.Fatalf("node headers missing: %v", hdr)
	}
	if code, body, _ := do(t, "GET", base+"/apps/SVC/i-1", "", ""); code != 200 || !strings.HasPrefix(body, "<instance>") {
		t.Fatalf("get instance as XML: %d %s", code, body)
	}
	if code, body, _ := do(t, "PUT", base+"/apps/svc/i-1", "application/json", ""); code != 200 || body != "" || fc.renews != 1 {
		t.Fatalf("renew: %d %q", code, body)
	}
	if code, body, _ := do(t, "DELETE", base+"/apps/svc/i-1", "", ""); code != 200 || body != "" {
		t.Fatalf("cancel: %d %q", code, body)
	}
	if code, body, _ := do(t, "DELETE", base+"/apps/svc/i-1", "", ""); code != 404 || body != "" {
		t.Fatalf("second cancel: %d %q", code, body)
	}
	if code, _, _ := do(t, "GET", base+"/apps/svc", "", ""); code != 404 {
		t.Fatalf("empty app: %d", code)
	}
}

func TestServer_BadInputIsRefusedAndNothingRecorded(t *testing.T) {
	ts, fc := newTestServer(t)
	base := ts.URL + "/eureka/apps"
	cases := []struct {
		name, method, path, ctype, body string
		want                            int
	}{
		{"malformed json", "POST", "/svc", "application/json", `{"instance":{"hostName":`, 400},
		{"truncated", "POST", "/svc", "application/json", instanceJSON("svc", "i-1")[:60], 400},
		{"not json at all", "POST", "/svc", "application/json", `hello`, 400},
		{"malformed xml", "POST", "/svc", "application/xml", `<instance><hostName>x</host`, 400},
		{"empty body", "POST", "/svc", "application/json", ``, 400},
		{"port not an object", "POST", "/svc", "application/json", strings.Replace(instanceJSON("svc", "i-1"), `"$":8080`, `"$":{}`, 1), 400},
		{"missing instance id", "POST", "/svc", "application/json", strings.NewReplacer(`"instanceId":"i-1",`, "", `"hostName":"h-i-1",`, "").Replace(instanceJSON("svc", "i-1")), 400},
		{"app mismatch", "POST", "/other", "application/json", instanceJSON("svc", "i-1"), 400},
		{"data-center name outside the enum", "POST", "/svc", "application/json", strings.Replace(instanceJSON("svc", "i-1"), `"MyOwn"`, `"myown"`, 1), 400},
		{"renew unknown", "PUT", "/svc/i-9", "", ``, 404},
		{"cancel unknown app", "DELETE", "/nope/i-1", "", ``, 404},
		{"status unknown instance", "PUT", "/svc/i-9/status?value=UP", "", ``, 404},
		{"status bad value", "PUT", "/svc/i-9/status?value=up", "", ``, 400},
		{"status missing value", "PUT", "/svc/i-9/status", "", ``, 400},
		{"bad lastDirtyTimestamp", "PUT", "/svc/i-9?lastDirtyTimestamp=abc", "", ``, 400},
		{"unknown route", "GET", "/svc/i-1/bogus/x", "", ``, 404},
	}
	for _, tc := range cases {
		before := fc.applied
		code, body, _ := do(t, tc.method, base+tc.path, tc.ctype, tc.body)
		if code != tc.want {
			t.Errorf("%s: got %d %q, want %d", tc.name, code, body, tc.want)
			continue
		}
		if code == 400 && !strings.Contains(body, `"error"`) {
			t.Errorf("%s: 400 without a message: %q", tc.name, body)
		}
		if code == 404 && body != "" {
			t.Errorf("%s: 404 must have an empty body, got %q", tc.name, body)
		}
		if code == 400 && fc.applied != before {
			t.Errorf("%s: a refused request reached the log", tc.name)
		}
	}
	var n int
	fc.fsm.Read(func(r *fsm.Registry) { n = r.Count() })
	if n != 0 {
		t.Fatalf("registry holds %d instances after bad input", n)
	}
	// The node keeps serving.
	if code, _, _ := do(t, "POST", base+"/svc", "application/json", instanceJSON("svc", "i-1")); code != 204 {
		t.Fatalf("valid register after bad input: %d", code)
	}
}

func TestServer_OversizedBodyIs413(t *testing.T) {
	ts, fc := newTestServer(t)
	big := `{"instance":{"hostName":"` + strings.Repeat("x", 2<<20) + `"}}`
	code, body, _ := do(t, "POST", ts.URL+"/eureka/apps/svc", "application/json", big)
	if code != http.StatusRequestEntityTooLarge || fc.applied != 0 {
		t.Fatalf("got %d %q applied=%d", code, body, fc.applied)
	}
}

func TestServer_ErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w", fsm.ErrInstanceNotFound), 404},
		{fmt.Errorf("x: %w", cluster.ErrNoLeader), 503},
		{fmt.Errorf("x: %w", cluster.ErrUnknownMember), 404},
		{fmt.Errorf("register without quorum: %w", cluster.ErrJournalFull), 503},
		{fmt.Errorf("apply register: %w", cluster.ErrDiskFull), 503},
		{fmt.Errorf("x: %w", fsm.ErrBadCommand), 400},
		{badRequestf("x"), 400},
		{errBodyTooLarge, 413},
		{fmt.Errorf("forward register: %w", context.DeadlineExceeded), 503},
		{fmt.Errorf("apply register: %w", context.Canceled), 503},
		{errors.New("boom"), 500},
	} {
		if got := errorStatus(tc.err); got != tc.want {
			t.Errorf("errorStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestServer_NoLeaderIs503WithRetryAfter(t *testing.T) {
	ts, fc := newTestServer(t)
	fc.applyFn = func() error { return fmt.Errorf("apply: %w", cluster.ErrNoLeader) }
	code, body, hdr := do(t, "POST", ts.URL+"/eureka/apps/svc", "application/json", instanceJSON("svc", "i-1"))
	if code != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(body, "no leader") {
		t.Fatalf("got %d %q %v", code, body, hdr)
	}
}

// Every write refused for a full disk is a 503 the client retries, with
// Retry-After and a message that says why.
func TestServer_DiskFullIs503WithRetryAfter(t *testing.T) {
	ts, fc := newTestServer(t)
	if code, body, _ := do(t, "POST", ts.URL+"/eureka/apps/svc", "application/json", instanceJSON("svc", "i-1")); code != 204 {
		t.Fatalf("register: %d %s", code, body)
	}
	fc.applyFn = func() error {
		return fmt.Errorf("apply register: %w: no room to write in the data directory for 3s", cluster.ErrDiskFull)
	}
	for _, w := range []struct{ method, path, body string }{
		{"POST", "/eureka/apps/svc", instanceJSON("svc", "i-2")},
		{"PUT", "/eureka/apps/svc/i-1/status?value=OUT_OF_SERVICE", ""},
		{"PUT", "/eureka/apps/svc/i-1/metadata?k=v", ""},
		{"DELETE", "/eureka/apps/svc/i-1", ""},
	} {
		code, body, hdr := do(t, w.method, ts.URL+w.path, "application/json", w.body)
		if code != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(body, "disk full") {
			t.Errorf("%s %s on a full disk: %d %q Retry-After %q, want 503 naming the full disk with Retry-After",
				w.method, w.path, code, body, hdr.Get("Retry-After"))
		}
	}
}

func TestEurekaPath(t *testing.T) {
	for in, want := range map[string]string{
		"/eureka/apps":                    "apps",
		"/eureka/apps/":                   "apps",
		"/eureka/v2/apps/FOO":             "apps|FOO",
		"/eureka/V1/apps/FOO/h%3Aapp%3A8": "apps|FOO|h:app:8",
		"/eureka/instances/x/":            "instances|x",
	} {
		segs, err := eurekaPath(in)
		if err != nil || strings.Join(segs, "|") != want {
			t.Errorf("eurekaPath(%q) = %v %v, want %s", in, segs, err, want)
		}
	}
}

// The dashboard (package dashboard) is mounted at / and counts the
// registrations the node applies; its page is tested in its own package.
func TestServer_DashboardAtRoot(t *testing.T) {
	ts, _ := newTestServer(t)
	mustRegister(t, ts.URL, "ORDERS", instanceJSON("ORDERS", "o1"))
	code, page, hdr := do(t, "GET", ts.URL+"/", "", "")
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", code, hdr.Get("Content-Type"))
	}
	for _, want := range []string{`data-app="ORDERS"`, "1 applications, 1 instances", `id="trend-registry"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestServer_BodyLargerThanTheHint: a registration whose body is past the
// room made ahead from its declared length (maxBodyHint) is read whole.
func TestServer_BodyLargerThanTheHint(t *testing.T) {
	ts, _ := newTestServer(t)
	base := ts.URL + "/eureka"
	big := strings.Repeat("x", 10<<10)
	var md strings.Builder
	for i := range 10 {
		fmt.Fprintf(&md, `,"k%d":%q`, i, big)
	}
	body := strings.Replace(instanceJSON("svc", "i-big"), `"metadata":{"zone":"a"}`, `"metadata":{"zone":"a"`+md.String()+`}`, 1)
	if len(body) <= maxBodyHint {
		t.Fatalf("body of %d bytes is within the hint", len(body))
	}
	if code, resp, _ := do(t, "POST", base+"/apps/svc", "application/json", body); code != 204 {
		t.Fatalf("register: %d %s", code, resp)
	}
	code, resp, _ := do(t, "GET", base+"/apps/SVC/i-big", "", "", "Accept", "application/json")
	if code != 200 || !strings.Contains(resp, `"k9":"`+big+`"`) {
		t.Fatalf("read back: %d, %d bytes", code, len(resp))
	}
}
