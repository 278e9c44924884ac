package httpapi

import (
	"strings"
	"testing"
)

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
