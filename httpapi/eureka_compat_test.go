package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// newClockServer is newTestServer with a clock the test can move forward.
func newClockServer(t *testing.T) (*httptest.Server, *fakeCluster, *atomic.Int64) {
	t.Helper()
	var skew atomic.Int64
	ts, fc := newTestServerWith(t, func(cfg *Config) {
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	return ts, fc, &skew
}

func mustRegister(t *testing.T, url, app, body string) {
	t.Helper()
	if code, resp, _ := do(t, "POST", url+"/eureka/apps/"+app, "application/json", body); code != 204 {
		t.Fatalf("register: %d %s", code, resp)
	}
}

// TestEureka_OddBodiesAccepted: bodies eureka-server accepts register here
// too, normalised the same way (unknown status UNKNOWN, non-numeric port 0).
func TestEureka_OddBodiesAccepted(t *testing.T) {
	ts, fc := newTestServer(t)
	mustRegister(t, ts.URL, "svc", strings.Replace(instanceJSON("svc", "i-1"), `"status":"UP"`, `"status":"up"`, 1))
	mustRegister(t, ts.URL, "svc", strings.Replace(instanceJSON("svc", "i-2"), `"$":8080`, `"$":"abc"`, 1))
	fc.fsm.Read(func(r *fsm.Registry) {
		if e := r.Get("SVC", "i-1"); e == nil || e.Instance.Status != fsm.StatusUnknown {
			t.Errorf("status \"up\": %+v", e)
		}
		if e := r.Get("SVC", "i-2"); e == nil || e.Instance.Port != 0 {
			t.Errorf("port \"abc\": %+v", e)
		}
	})
}

// TestEureka_UnsupportedContentType: register with a body type other than
// JSON or XML is 415 and records nothing; no type at all is still sniffed.
func TestEureka_UnsupportedContentType(t *testing.T) {
	ts, fc := newTestServer(t)
	code, body, _ := do(t, "POST", ts.URL+"/eureka/apps/svc", "text/plain", instanceJSON("svc", "i-1"))
	if code != http.StatusUnsupportedMediaType || !strings.Contains(body, "error") || fc.applied != 0 {
		t.Fatalf("text/plain: %d %q applied %d", code, body, fc.applied)
	}
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-1"))
	req, _ := http.NewRequest("POST", ts.URL+"/eureka/apps/svc", strings.NewReader(instanceJSON("svc", "i-2")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("no content type: %d", resp.StatusCode)
	}
}

// TestEureka_ExpiredLeaseIsNotFound: a lease past its duration but not yet
// evicted answers 404 on reads by id and on status and metadata updates, as
// in eureka-server, while the full registry still lists it until eviction.
func TestEureka_ExpiredLeaseIsNotFound(t *testing.T) {
	ts, fc, skew := newClockServer(t)
	body := strings.Replace(instanceJSON("svc", "i-1"), `"durationInSecs":90`, `"durationInSecs":1`, 1)
	mustRegister(t, ts.URL, "svc", body)
	base := ts.URL + "/eureka"
	if code, _, _ := do(t, "GET", base+"/apps/svc/i-1", "", ""); code != 200 {
		t.Fatalf("live lease: %d", code)
	}
	skew.Store(int64(time.Minute))
	before := fc.applied
	for _, c := range []struct{ method, path string }{
		{"GET", "/apps/svc/i-1"}, {"GET", "/instances/i-1"}, {"HEAD", "/apps/svc/i-1"},
		{"PUT", "/apps/svc/i-1/status?value=OUT_OF_SERVICE"}, {"DELETE", "/apps/svc/i-1/status"},
		{"PUT", "/apps/svc/i-1/metadata?a=b"},
	} {
		if code, resp, _ := do(t, c.method, base+c.path, "", ""); code != 404 {
			t.Errorf("%s %s on an expired lease: %d %q, want 404", c.method, c.path, code, resp)
		}
	}
	if fc.applied != before {
		t.Errorf("requests on an expired lease reached the log")
	}
	if code, resp, _ := do(t, "GET", base+"/apps", "", "", "Accept", "application/json"); code != 200 || !strings.Contains(resp, `"i-1"`) {
		t.Errorf("full registry before eviction: %d %s", code, resp)
	}
}

// TestEureka_SameStatusOverride: PUT status with the current status records
// nothing, and DELETE status afterwards leaves the instance UP (its
// heartbeats keep working).
func TestEureka_SameStatusOverride(t *testing.T) {
	ts, _ := newTestServer(t)
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-1"))
	base := ts.URL + "/eureka/apps/svc/i-1"
	if code, _, _ := do(t, "PUT", base+"/status?value=UP", "", ""); code != 200 {
		t.Fatalf("put status: %d", code)
	}
	if _, body, _ := do(t, "GET", ts.URL+"/eureka/serverinfo/statusoverrides", "", ""); body != "{}" {
		t.Fatalf("overrides after a same-status PUT: %s", body)
	}
	if code, _, _ := do(t, "DELETE", base+"/status", "", ""); code != 200 {
		t.Fatalf("delete status: %d", code)
	}
	if code, _, _ := do(t, "PUT", base, "", ""); code != 200 {
		t.Fatalf("heartbeat after delete status: %d, want 200", code)
	}
	if _, body, _ := do(t, "GET", base, "", "", "Accept", "application/json"); !strings.Contains(body, `"status":"UP"`) {
		t.Fatalf("instance after delete status: %s", body)
	}
	// A real change is recorded and listed.
	do(t, "PUT", base+"/status?value=OUT_OF_SERVICE", "", "")
	if _, body, _ := do(t, "GET", ts.URL+"/eureka/serverinfo/statusoverrides", "", ""); body != `{"i-1":"OUT_OF_SERVICE"}` {
		t.Fatalf("overrides: %s", body)
	}
}

// TestEureka_StatusInfoAndHead covers GET /eureka/status in both formats and
// HEAD on a read path (headers, no body).
func TestEureka_StatusInfoAndHead(t *testing.T) {
	ts, _ := newTestServer(t)
	code, body, hdr := do(t, "GET", ts.URL+"/eureka/status", "", "", "Accept", "application/json")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") ||
		!strings.Contains(body, `"generalStats":{`) || !strings.Contains(body, `"instanceInfo":{"instanceId":"n1"`) {
		t.Fatalf("status json: %d %s %s", code, hdr.Get("Content-Type"), body)
	}
	code, body, _ = do(t, "GET", ts.URL+"/eureka/v2/status", "", "")
	if code != 200 || !strings.HasPrefix(body, "<com.netflix.eureka.util.StatusInfo><generalStats><environment>heureka</environment>") || !strings.Contains(body, "<instanceInfo><instanceId>n1</instanceId>") {
		t.Fatalf("status xml: %d %s", code, body)
	}
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-1"))
	code, body, hdr = do(t, "HEAD", ts.URL+"/eureka/apps", "", "", "Accept", "application/json")
	if code != 200 || body != "" || hdr.Get("Content-Length") == "" || hdr.Get("Content-Length") == "0" {
		t.Fatalf("HEAD apps: %d %q length %q", code, body, hdr.Get("Content-Length"))
	}
}

// TestEureka_V1StatusRewrite: XML answers on /v1/ paths show OUT_OF_SERVICE
// and UNKNOWN as DOWN, as eureka-server does for v1 clients; v2 and JSON do not.
func TestEureka_V1StatusRewrite(t *testing.T) {
	ts, _ := newTestServer(t)
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-1"))
	do(t, "PUT", ts.URL+"/eureka/apps/svc/i-1/status?value=OUT_OF_SERVICE", "", "")
	_, v1, hdr := do(t, "GET", ts.URL+"/eureka/v1/apps/svc", "", "", "Accept-Encoding", "gzip")
	if !strings.Contains(v1, "<status>DOWN</status>") || strings.Contains(v1, "<status>OUT_OF_SERVICE</status>") ||
		!strings.Contains(v1, "<overriddenstatus>OUT_OF_SERVICE</overriddenstatus>") || hdr.Get("Content-Encoding") != "" {
		t.Fatalf("v1 xml: %s (encoding %q)", v1, hdr.Get("Content-Encoding"))
	}
	_, v2, _ := do(t, "GET", ts.URL+"/eureka/v2/apps/svc", "", "")
	if !strings.Contains(v2, "<status>OUT_OF_SERVICE</status>") {
		t.Fatalf("v2 xml: %s", v2)
	}
	_, j, _ := do(t, "GET", ts.URL+"/eureka/v1/apps/svc", "", "", "Accept", "application/json")
	if !strings.Contains(j, `"status":"OUT_OF_SERVICE"`) {
		t.Fatalf("v1 json: %s", j)
	}
}

// TestEureka_AmazonInstanceID: an Amazon dataCenterInfo without an
// instance-id metadata key gets the instance's id there, as eureka-server's
// register does.
func TestEureka_AmazonInstanceID(t *testing.T) {
	ts, _ := newTestServer(t)
	body := strings.Replace(instanceJSON("svc", "i-1"),
		`{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"}`,
		`{"@class":"com.netflix.appinfo.AmazonInfo","name":"Amazon","metadata":{"availability-zone":"z1"}}`, 1)
	mustRegister(t, ts.URL, "svc", body)
	_, got, _ := do(t, "GET", ts.URL+"/eureka/apps/svc/i-1", "", "", "Accept", "application/json")
	if !strings.Contains(got, `"instance-id":"i-1"`) || !strings.Contains(got, `"availability-zone":"z1"`) {
		t.Fatalf("amazon metadata: %s", got)
	}
}

// TestEureka_CompactAccept: X-Eureka-Accept: compact leaves out what
// eureka-server's mini codec leaves out, on the documents it serves compact;
// the full and compact variants are cached apart and both follow changes.
func TestEureka_CompactAccept(t *testing.T) {
	ts, _ := newTestServer(t)
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-1"))
	for _, accept := range []string{"application/json", "application/xml"} {
		_, compact, _ := do(t, "GET", ts.URL+"/eureka/apps", "", "", "Accept", accept, "X-Eureka-Accept", "compact")
		_, full, _ := do(t, "GET", ts.URL+"/eureka/apps", "", "", "Accept", accept, "X-Eureka-Accept", "full")
		for _, gone := range []string{"leaseInfo", "metadata", "countryId", "lastDirtyTimestamp", "verriddenstatus", "verriddenStatus"} {
			if strings.Contains(compact, gone) {
				t.Errorf("%s compact document holds %s: %s", accept, gone, compact)
			}
			if !strings.Contains(full, gone) && gone != "verriddenStatus" && gone != "verriddenstatus" {
				t.Errorf("%s full document lacks %s: %s", accept, gone, full)
			}
		}
		if !strings.Contains(compact, "i-1") || !strings.Contains(compact, "vipAddress") {
			t.Errorf("%s compact document: %s", accept, compact)
		}
	}
	// The instance document is always full, as in eureka-server.
	if _, body, _ := do(t, "GET", ts.URL+"/eureka/apps/svc/i-1", "", "", "Accept", "application/json", "X-Eureka-Accept", "compact"); !strings.Contains(body, "leaseInfo") {
		t.Errorf("instance document with compact accept: %s", body)
	}
	// A change reaches the cached compact document too.
	mustRegister(t, ts.URL, "svc", instanceJSON("svc", "i-2"))
	if _, body, _ := do(t, "GET", ts.URL+"/eureka/apps/svc", "", "", "Accept", "application/json", "X-Eureka-Accept", "compact"); !strings.Contains(body, "i-2") {
		t.Errorf("compact document after a change: %s", body)
	}
}
