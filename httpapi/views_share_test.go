package httpapi

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unsafe"

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

// within reports whether s lies inside frag's bytes.
func within(s, frag []byte) bool {
	return len(s) > 0 && len(frag) > 0 &&
		uintptr(unsafe.Pointer(&s[0])) >= uintptr(unsafe.Pointer(&frag[0])) &&
		uintptr(unsafe.Pointer(&s[len(s)-1])) <= uintptr(unsafe.Pointer(&frag[len(frag)-1]))
}

// After a registration burst the delta holds every instance: it shares the
// full registry's fragments instead of encoding a second copy; of an
// application it holds in part (one instance deleted) it takes the current
// instances' bytes from the application's fragment, as one run, and
// encodes only the deleted one.
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
		var want []byte
		f.Read(func(r *fsm.Registry) {
			want = eureka.AppendApplication(nil, format, "APP-001", r.AppEntries("APP-001"))
		})
		if !bytes.Equal(shared, want) {
			t.Fatalf("%s: the stored fragment differs from AppendApplication's encoding", format)
		}
		// APP-004's other 19 instances are one slice of its current
		// fragment; only the deleted one is encoded for the delta.
		if kept != 1 {
			t.Fatalf("%s: the delta keeps %d instance encodings of its own, want 1 (the deleted instance)", format, kept)
		}
		inFrag := 0
		for _, s := range delta {
			if len(s) > 0 && len(own) > 0 && &s[0] != &own[0] && within(s, own) {
				inFrag++
			}
		}
		if inFrag != 1 {
			t.Fatalf("%s: APP-004's 19 current instances are %d slices of its fragment, want one run", format, inFrag)
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

// A large gzip document (the full registry) goes out with writev and
// arrives whole: it decompresses to the plain answer.
func TestServe_LargeGzipWrittenVectored(t *testing.T) {
	f, _ := benchRegistry(t, 3000, 100)
	s, err := New(DefaultConfig(), &fakeCluster{fsm: f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Listener = Listener(ts.Listener)
	ts.Start()
	t.Cleanup(ts.Close)
	before := vectoredWrites.Load()
	_, plain, _ := do(t, "GET", ts.URL+"/eureka/apps", "", "", "Accept", "application/json")
	code, z, hdr := do(t, "GET", ts.URL+"/eureka/apps", "", "", "Accept", "application/json", "Accept-Encoding", "gzip")
	if code != 200 || hdr.Get("Content-Length") != fmt.Sprint(len(z)) || len(z) < vectorMin {
		t.Fatalf("%d, length %q of %d bytes (want at least %d)", code, hdr.Get("Content-Length"), len(z), vectorMin)
	}
	zr, err := gzip.NewReader(strings.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || string(got) != plain {
		t.Fatalf("gzip gives %d bytes (%v), plain %d", len(got), err, len(plain))
	}
	if vectoredWrites.Load() == before {
		t.Fatal("the full registry was not written with writev")
	}
}
