package httpapi

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// metadataOf is the stored metadata of app/id (nil when not registered).
func metadataOf(fc *fakeCluster, app, id string) map[string]string {
	if e := getEntry(fc, app, id); e != nil {
		return e.Instance.Metadata.Map()
	}
	return nil
}

// TestMetadata_UnparsableQueryIsRefused: a metadata update whose query
// does not parse is a 400 with the parser's message and records nothing,
// not a 200 that kept whichever pairs could be read.
func TestMetadata_UnparsableQueryIsRefused(t *testing.T) {
	ts, fc := newTestServer(t)
	base := ts.URL + "/eureka/apps/SVC/i-1/metadata"
	register(t, ts.URL, "SVC", "i-1")
	before := fc.applied
	for query, want := range map[string]string{
		"a=1;b=2":    "semicolon",
		"c=%zz&d=ok": "invalid URL escape",
	} {
		code, body, _ := do(t, "PUT", base+"?"+query, "", "")
		if code != 400 || !strings.Contains(body, want) {
			t.Errorf("PUT metadata?%s: %d %s, want 400 mentioning %q", query, code, body, want)
		}
	}
	if md := metadataOf(fc, "SVC", "i-1"); fc.applied != before || len(md) != 1 {
		t.Fatalf("refused updates recorded: %d writes, metadata %v", fc.applied-before, md)
	}
	if code, body, _ := do(t, "PUT", base+"?d=ok&e=%41", "", ""); code != 200 || metadataOf(fc, "SVC", "i-1")["e"] != "A" {
		t.Fatalf("good update: %d %s", code, body)
	}
}

// metadataParams is a metadata update's query adding n keys named
// prefix0..prefix(n-1).
func metadataParams(prefix string, n int) string {
	params := make([]string, n)
	for i := range params {
		params[i] = prefix + strconv.Itoa(i) + "=v"
	}
	return strings.Join(params, "&")
}

// TestMetadata_LimitIsOnTheMergedMap: an update is refused when the map it
// merges into would pass the entry limit, also when concurrent updates of
// one instance each stay within it; an update of keys already held is not.
func TestMetadata_LimitIsOnTheMergedMap(t *testing.T) {
	ts, fc := newStrictServer(t, true)
	base := ts.URL + "/eureka/apps/APP1/mdfull/metadata?"
	if code, b, _ := do(t, "POST", ts.URL+"/eureka/apps/APP1", "application/json", withMetadata(instanceJSON("APP1", "mdfull"), 1024)); code != 204 {
		t.Fatalf("register with 1024 entries: %d %s", code, b)
	}
	before := fc.applied
	for _, q := range []string{metadataParams("n", 1024), "extra=1", "k0=changed&extra=1"} {
		if code, b, _ := do(t, "PUT", base+q, "", ""); code != 400 || !strings.Contains(b, "at most 1024") {
			t.Errorf("PUT %.40s...: %d %s, want 400", q, code, b)
		}
	}
	if n := len(metadataOf(fc, "APP1", "mdfull")); fc.applied != before || n != 1024 {
		t.Fatalf("refused updates recorded: %d writes, %d entries", fc.applied-before, n)
	}
	if code, b, _ := do(t, "PUT", base+"k0=changed&k1023=changed", "", ""); code != 200 || metadataOf(fc, "APP1", "mdfull")["k0"] != "changed" {
		t.Fatalf("update of held keys: %d %s", code, b)
	}

	// Concurrent updates of one instance, each within the limit alone:
	// 900 stored, four updates of 100 new keys each; one fits.
	if code, b, _ := do(t, "POST", ts.URL+"/eureka/apps/APP1", "application/json", withMetadata(instanceJSON("APP1", "race"), 900)); code != 204 {
		t.Fatalf("register with 900 entries: %d %s", code, b)
	}
	var wg sync.WaitGroup
	var ok atomic.Int32
	for w := range 4 {
		wg.Go(func() {
			code, _, _ := do(t, "PUT", ts.URL+"/eureka/apps/APP1/race/metadata?"+metadataParams("w"+strconv.Itoa(w)+"-", 100), "", "")
			if code == 200 {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if n := len(metadataOf(fc, "APP1", "race")); ok.Load() != 1 || n != 1000 {
		t.Fatalf("concurrent updates: %d accepted, %d entries stored; want 1 and 1000", ok.Load(), n)
	}
}

// TestDelta_CannotNameAnApplication: every path that reads the delta
// refuses a registration with 405 and a message, and records nothing.
func TestDelta_CannotNameAnApplication(t *testing.T) {
	ts, fc := newTestServer(t)
	for _, path := range []string{"/eureka/apps/delta", "/eureka/v2/apps/delta/", "/eureka/apps/%64elta", "/eureka/V1/apps/%64%65lta/"} {
		code, b, _ := do(t, "POST", ts.URL+path, "application/json", instanceJSON("delta", "i-1"))
		if code != 405 || !strings.Contains(b, "cannot name an application") {
			t.Errorf("POST %s: %d %s, want 405 with a message", path, code, b)
		}
		if code, _, _ := do(t, "GET", ts.URL+path, "", ""); code != 200 {
			t.Errorf("GET %s: %d, want the delta", path, code)
		}
	}
	if fc.applied != 0 {
		t.Fatalf("refused registrations recorded %d writes", fc.applied)
	}
	// The upper-case path names the application, as in eureka-server.
	if code, b, _ := do(t, "POST", ts.URL+"/eureka/apps/DELTA", "application/json", instanceJSON("DELTA", "i-1")); code != 204 {
		t.Fatalf("POST /apps/DELTA: %d %s", code, b)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                        false,
		"gzip":                    true,
		"gzip, deflate, br":       true,
		"deflate":                 false,
		"identity":                false,
		"gzip;q=0":                false,
		"gzip; q=0.000":           false,
		"deflate, GZIP;Q=0":       false,
		"gzip;q=0.5":              true,
		"gzip;q=1, identity;q=0":  true,
		"br;q=1, gzip;q=0, *;q=0": false,
		"x-gzip;q=0.1, br":        true,
		"gzip;level=1":            true,
	} {
		if got := acceptsGzip(accept); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", accept, got, want)
		}
	}
}

// TestGzip_QZeroIsNotAcceptable: gzip;q=0 gets the plain document, from a
// read answered at once and from a parked one alike.
func TestGzip_QZeroIsNotAcceptable(t *testing.T) {
	ts, _ := newPushServer(t)
	register(t, ts.URL, "SVC", "i-1")
	url := ts.URL + "/eureka/apps/SVC"
	code, body, hdr := do(t, "GET", url, "", "", "Accept-Encoding", "gzip;q=0")
	if code != 200 || hdr.Get("Content-Encoding") != "" || !strings.HasPrefix(body, "<application>") {
		t.Fatalf("gzip;q=0: %d %v %.80q", code, hdr, body)
	}
	code, body, hdr = do(t, "GET", url+"?index="+strconv.FormatUint(index(t, hdr), 10)+"&wait=50ms", "", "", "Accept-Encoding", "deflate, gzip;q=0")
	if code != 200 || hdr.Get("Content-Encoding") != "" || !strings.HasPrefix(body, "<application>") {
		t.Fatalf("parked, gzip;q=0: %d %v %.80q", code, hdr, body)
	}
	code, body, hdr = do(t, "GET", url, "", "", "Accept-Encoding", "gzip;q=0.5")
	if code != 200 || hdr.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(gunzipString(t, []byte(body)), "<application>") {
		t.Fatalf("gzip;q=0.5: %d %v", code, hdr)
	}
}

// TestBody_UnknownContentEncodingIs415: a body in a coding other than gzip
// or identity is refused, not decoded as if it were plain.
func TestBody_UnknownContentEncodingIs415(t *testing.T) {
	ts, fc := newTestServer(t)
	url := ts.URL + "/eureka/apps/SVC"
	for _, ce := range []string{"deflate", "br", "gzip, deflate"} {
		code, b, _ := do(t, "POST", url, "application/json", instanceJSON("SVC", "i-1"), "Content-Encoding", ce)
		if code != 415 || !strings.Contains(b, "gzip or identity") {
			t.Errorf("Content-Encoding %s: %d %s, want 415 with a message", ce, code, b)
		}
	}
	if fc.applied != 0 {
		t.Fatalf("refused bodies recorded %d writes", fc.applied)
	}
	if code, b, _ := do(t, "POST", url, "application/json", instanceJSON("SVC", "i-1"), "Content-Encoding", "identity"); code != 204 {
		t.Fatalf("Content-Encoding identity: %d %s", code, b)
	}
}
