package httpapi

import (
	"strings"
	"testing"
)

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
