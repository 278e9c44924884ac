package httpapi

import (
	"bytes"
	"strconv"
	"testing"
)

// TestServe_DocHeadersPerDocument: the header values a read shares with
// other reads of the same document (index, lengths, type, Vary) are those
// of the document answered, gzipped or not, and follow a change.
func TestServe_DocHeadersPerDocument(t *testing.T) {
	ts, _ := newTestServer(t)
	register(t, ts.URL, "A", "a-1")
	check := func(accept string, gz bool, wantID string) uint64 {
		t.Helper()
		// An explicit Accept-Encoding keeps Go's client from asking for
		// gzip itself and hiding the length.
		hdr := []string{"Accept", accept, "Accept-Encoding", "identity"}
		if gz {
			hdr[3] = "gzip"
		}
		code, body, h := do(t, "GET", ts.URL+"/eureka/apps/A", "", "", hdr...)
		if code != 200 {
			t.Fatalf("GET %s gzip=%v: %d %s", accept, gz, code, body)
		}
		if got := h.Get("Content-Length"); got != strconv.Itoa(len(body)) {
			t.Errorf("%s gzip=%v: Content-Length %q for a body of %d bytes", accept, gz, got, len(body))
		}
		if got := h.Values("Vary"); len(got) != 1 || got[0] != "Accept, Accept-Encoding, X-Eureka-Accept" {
			t.Errorf("%s gzip=%v: Vary %q", accept, gz, got)
		}
		if got := h.Get("Content-Type"); got != accept {
			t.Errorf("Content-Type %q, want %q", got, accept)
		}
		if gz {
			if h.Get("Content-Encoding") != "gzip" {
				t.Fatalf("Content-Encoding %q", h.Get("Content-Encoding"))
			}
			body = gunzipString(t, []byte(body))
		} else if h.Get("Content-Encoding") != "" {
			t.Errorf("plain answer with Content-Encoding %q", h.Get("Content-Encoding"))
		}
		if !bytes.Contains([]byte(body), []byte(wantID)) {
			t.Errorf("%s gzip=%v: body without %s", accept, gz, wantID)
		}
		return index(t, h)
	}
	var first uint64
	for range 2 { // the second read of each form takes the kept values
		for _, accept := range []string{"application/json", "application/xml"} {
			for _, gz := range []bool{true, false} {
				v := check(accept, gz, "a-1")
				if first == 0 {
					first = v
				} else if v != first {
					t.Errorf("index %d, want %d", v, first)
				}
			}
		}
	}
	register(t, ts.URL, "A", "a-2")
	for _, gz := range []bool{true, false} {
		if v := check("application/json", gz, "a-2"); v <= first {
			t.Errorf("index %d after a change, want above %d", v, first)
		}
	}
}
