package httpapi

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/httpapi/eureka"
)

// holds reports whether segs holds the very slice frag (not a copy).
func holds(segs [][]byte, frag []byte) bool {
	for _, s := range segs {
		if len(s) == len(frag) && len(s) > 0 && &s[0] == &frag[0] {
			return true
		}
	}
	return false
}

// After a registration burst the delta holds every instance: it shares the
// full registry's fragments instead of encoding a second copy, except for
// an application with a deleted instance, which it encodes on its own.
func TestViews_DeltaSharesWholeApplications(t *testing.T) {
	f, idx := benchRegistry(t, 140, 7)
	applyCmd(t, f, idx, fsm.CmdCancel, &fsm.KeyBody{App: "APP-004", ID: "10.0.0.4:app-004:8080"})
	cfg := DefaultConfig()
	cfg.Now = time.Now
	v := newViews(f.Read, cfg)
	for _, format := range []eureka.Format{eureka.JSON, eureka.XML} {
		apps, _, err := v.build(cache.Key{Entity: cache.EntityApps, Format: uint8(format)})
		if err != nil {
			t.Fatal(err)
		}
		delta, _, err := v.build(cache.Key{Entity: cache.EntityDelta, Format: uint8(format)})
		if err != nil {
			t.Fatal(err)
		}
		v.mu.Lock()
		shared, own := v.frags[fragKey{"APP-001", format}].body, v.frags[fragKey{"APP-004", format}].body
		kept := len(v.deltaInst[format])
		v.mu.Unlock()
		if !holds(apps, shared) || !holds(delta, shared) {
			t.Fatalf("%s: the delta does not share APP-001's fragment with the full registry", format)
		}
		if holds(delta, own) || !strings.Contains(string(cache.NewValue(delta, 0).Bytes()), "DELETED") {
			t.Fatalf("%s: APP-004, with a deleted instance, must be encoded with it", format)
		}
		if kept != 20 { // APP-004's instances, the deleted one included
			t.Fatalf("%s: the delta keeps %d instance encodings of its own, want APP-004's 20", format, kept)
		}
	}
}

// Served gzip documents (the full registry, the delta, one application, a
// VIP, in both formats) decompress to exactly the plain answer, with a
// Content-Length that matches.
func TestServe_GzipMatchesPlain(t *testing.T) {
	ts, _ := newTestServer(t)
	for _, app := range []string{"svc", "web", "db"} {
		for _, id := range []string{"i-1", "i-2", "i-3"} {
			mustRegister(t, ts.URL, app, instanceJSON(app, app+"-"+id))
		}
	}
	for _, path := range []string{"/eureka/apps", "/eureka/apps/delta", "/eureka/apps/WEB", "/eureka/vips/svc"} {
		for _, accept := range []string{"application/json", "application/xml"} {
			code, plain, _ := do(t, "GET", ts.URL+path, "", "", "Accept", accept)
			zcode, z, hdr := do(t, "GET", ts.URL+path, "", "", "Accept", accept, "Accept-Encoding", "gzip")
			if code != 200 || zcode != 200 || hdr.Get("Content-Encoding") != "gzip" || hdr.Get("Content-Length") != fmt.Sprint(len(z)) {
				t.Fatalf("%s %s: %d / %d, encoding %q, length %q of %d", path, accept, code, zcode,
					hdr.Get("Content-Encoding"), hdr.Get("Content-Length"), len(z))
			}
			zr, err := gzip.NewReader(strings.NewReader(z))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(got, []byte(plain)) {
				t.Fatalf("%s %s: gzip gives %q (%v), plain %q", path, accept, got, err, plain)
			}
		}
	}
}
