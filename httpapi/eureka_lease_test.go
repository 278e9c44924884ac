package httpapi

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
