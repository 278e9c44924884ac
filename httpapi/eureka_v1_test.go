package httpapi

import (
	"strings"
	"testing"
)

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
