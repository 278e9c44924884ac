package httpapi

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// holds reports whether segs holds the very piece p (not a copy).
func holds(segs []cache.Segment, p *cache.Piece) bool {
	for _, s := range segs {
		if s.Piece() == p {
			return true
		}
	}
	return false
}

// After a registration burst the delta holds every instance: it shares the
// full registry's fragments (their compressed pieces) instead of encoding a
// second copy; of an application it holds in part (one instance deleted)
// it lists the current instances as one run, one piece, kept for the next
// delta build, and encodes the deleted one apart.
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
		v.fmu.Lock()
		shared, own := v.frags[fragKey{app: "APP-001", format: format}].piece, v.frags[fragKey{app: "APP-004", format: format}].piece
		v.fmu.Unlock()
		kept, runs := len(v.deltaInst[format]), v.deltaRuns[format]
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
		if got := cache.NewValue([]cache.Segment{cache.Compressed(shared)}, 0).Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("%s: the stored fragment differs from AppendApplication's encoding", format)
		}
		// APP-004's other 19 instances are one run; only the deleted one
		// is encoded apart.
		if kept != 1 || len(runs) != 1 {
			t.Fatalf("%s: the delta keeps %d instances and %d runs of its own, want 1 and 1", format, kept, len(runs))
		}
		var run *cache.Piece
		for k, p := range runs {
			if k.app != "APP-004" || k.j-k.i != 18 {
				t.Fatalf("%s: run %+v, want APP-004's 19 current instances", format, k)
			}
			run = p
		}
		again, _, err := v.build(cache.Key{Entity: cache.EntityDelta, Format: uint8(format)})
		if err != nil {
			t.Fatal(err)
		}
		if !holds(delta, run) || !holds(again, run) {
			t.Fatalf("%s: the next delta build did not reuse the run's piece", format)
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
			code, plain, phdr := getPlain(t, ts.URL+path, accept)
			if phdr.Get("Content-Length") != fmt.Sprint(len(plain)) || phdr.Get("Content-Encoding") != "" {
				t.Fatalf("%s %s: plain answer with length %q of %d, encoding %q", path, accept, phdr.Get("Content-Length"), len(plain), phdr.Get("Content-Encoding"))
			}
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
	ts := serveAsHeureka(t, s.Handler(), nil)
	before := vectoredWrites.Load()
	_, plain, _ := getPlain(t, ts.URL+"/eureka/apps", "application/json")
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

// The plain documents inflated from the fragments' pieces are byte for
// byte what the encoder writes, in all four formats: the full registry
// and one application's document, built by the views and read through
// the cache (its kept plain copy and the streamed inflate alike).
func TestViews_PlainFromPiecesMatchesTheEncoder(t *testing.T) {
	f, _ := benchRegistry(t, 120, 7)
	c := newViewsCache(t, newViews(f.Read, DefaultConfig()))
	for format := eureka.Format(0); format < eureka.NumFormats; format++ {
		var apps, one []byte
		f.Read(func(r *fsm.Registry) {
			var frags [][]byte
			for _, name := range r.AppNames() {
				frags = append(frags, eureka.AppendApplication(nil, format, name, r.AppEntries(name)))
			}
			apps = eureka.AppendApplications(nil, format, "1", r.HashCode(), frags)
			one = eureka.AppendApplicationDoc(nil, format, eureka.AppendApplication(nil, format, "APP-003", r.AppEntries("APP-003")))
		})
		for _, tc := range []struct {
			key  cache.Key
			want []byte
		}{
			{cache.Key{Entity: cache.EntityApps, Format: uint8(format)}, apps},
			{cache.Key{Entity: cache.EntityApp, Name: "APP-003", Format: uint8(format)}, one},
		} {
			val, err := c.Get(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			var streamed bytes.Buffer
			if _, err := val.WriteTo(&streamed); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(streamed.Bytes(), tc.want) || !bytes.Equal(val.PlainBytes(), tc.want) || val.Len != len(tc.want) {
				t.Fatalf("%s %s: the plain document inflated from pieces differs from the encoder's (%d bytes, want %d)",
					format, tc.key.Entity, streamed.Len(), len(tc.want))
			}
			if got := gunzipString(t, val.Gzip()); got != string(tc.want) {
				t.Fatalf("%s %s: the gzip document differs from the encoder's", format, tc.key.Entity)
			}
		}
	}
}

// newViewsCache serves v's documents through a cache with the default
// settings, closed when tb ends.
func newViewsCache(tb testing.TB, v *views) *cache.Cache {
	tb.Helper()
	c, err := cache.New(cache.DefaultConfig(), v.build, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

func gunzipString(t *testing.T, z []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A plain answer is the same bytes, with the same Content-Length, whether
// it comes from the kept copy or is inflated as it is written (a document
// beyond the plain budget), and decompresses from the gzip answer.
func TestServe_PlainKeptAndStreamedAgree(t *testing.T) {
	f, _ := benchRegistry(t, 3000, 100)
	var bodies []string
	for _, budget := range []int{DefaultConfig().Cache.PlainBudget, 0} {
		cfg := DefaultConfig()
		cfg.Cache.PlainBudget = budget
		s, err := New(cfg, &fakeCluster{fsm: f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ts := serveAsHeureka(t, s.Handler(), nil)
		for _, accept := range []string{"application/json", "application/xml"} {
			for range 2 { // the first read makes the copy, the second takes it
				code, plain, hdr := getPlain(t, ts.URL+"/eureka/apps", accept)
				if code != 200 || hdr.Get("Content-Length") != fmt.Sprint(len(plain)) || hdr.Get("Content-Encoding") != "" {
					t.Fatalf("budget %d, %s: %d, length %q of %d", budget, accept, code, hdr.Get("Content-Length"), len(plain))
				}
				_, z, _ := do(t, "GET", ts.URL+"/eureka/apps", "", "", "Accept", accept, "Accept-Encoding", "gzip")
				if gunzipString(t, []byte(z)) != plain {
					t.Fatalf("budget %d, %s: the plain answer differs from the gzip one", budget, accept)
				}
				bodies = append(bodies, plain)
			}
		}
		ts.Close()
		s.Close()
	}
	for i := range 4 {
		if bodies[i] != bodies[i+4] {
			t.Fatal("the kept copy and the streamed inflate differ")
		}
	}
}

// getPlain reads url without gzip (http.DefaultClient would ask for gzip
// and decompress it itself).
func getPlain(t *testing.T, url, accept string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	resp, b := readAll(t, client, req)
	return resp.StatusCode, string(b), resp.Header
}

// readAll sends req with client and reads the whole answer.
func readAll(t *testing.T, client *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// After the views build the full registry, what stays on the heap is the
// compressed pieces (and one application's encoding in the scratch
// buffer), not the plain documents: measured as the live heap the built
// documents add, against their plain size.
func TestViews_BuildKeepsNoPlainCopy(t *testing.T) {
	f, _ := benchRegistry(t, 3000, 100)
	v := newViews(f.Read, DefaultConfig())
	var before, after runtime.MemStats
	collect := func(m *runtime.MemStats) {
		for range 3 { // pooled objects survive one collection
			runtime.GC()
		}
		runtime.ReadMemStats(m)
	}
	collect(&before)
	var docs [][]cache.Segment
	plain := 0
	for _, format := range []eureka.Format{eureka.JSON, eureka.XML} {
		segs, _, err := v.build(cache.Key{Entity: cache.EntityApps, Format: uint8(format)})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, segs)
		plain += cache.NewValue(segs, 0).Len
	}
	collect(&after)
	added := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if added > int64(plain)/3 {
		t.Fatalf("building %d plain bytes of documents left %d bytes on the heap: more than the pieces", plain, added)
	}
	t.Logf("%d plain bytes held in %d bytes", plain, added)
	runtime.KeepAlive(docs)
	runtime.KeepAlive(v) // and the registry it reads
}

// An application's document does not wait for a registry-wide build: a
// blocking read of one application would otherwise sit behind the encoding
// of a large delta. The test holds the wide-build lock, as a long delta
// build does, and builds application documents meanwhile, while other
// goroutines build the full registry and the delta over and over (run
// with -race, this also checks the fragment store's locking).
func TestViews_ApplicationDocumentNeverWaitsForAWideBuild(t *testing.T) {
	f, idx := benchRegistry(t, 200, 40)
	cfg := DefaultConfig()
	cfg.Now = time.Now
	v := newViews(f.Read, cfg)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Applications come and go while documents are built.
			app := fmt.Sprintf("NEW-%d", i%3)
			in := &fsm.Instance{InstanceID: "i-1", HostName: "h", App: app, IPAddr: "10.0.0.1", Status: fsm.StatusUp,
				OverriddenStatus: fsm.StatusUnknown, Port: 8080, PortEnabled: true, DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}}
			applyCmd(t, f, idx, fsm.CmdRegister, &fsm.RegisterBody{Instance: in})
			applyCmd(t, f, idx, fsm.CmdCancel, &fsm.KeyBody{App: app, ID: "i-1"})
			for _, e := range []cache.Entity{cache.EntityApps, cache.EntityDelta} {
				if _, _, err := v.build(cache.Key{Entity: e, Format: uint8(eureka.JSON)}); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	for i := 0; i < 200; i++ {
		app := fmt.Sprintf("APP-%03d", i%40)
		if _, _, err := v.build(cache.Key{Entity: cache.EntityApp, Name: app, Format: uint8(eureka.JSON)}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done

	v.mu.Lock() // a wide build in progress
	defer v.mu.Unlock()
	built := make(chan error, 1)
	go func() {
		_, _, err := v.build(cache.Key{Entity: cache.EntityApp, Name: "APP-007", Format: uint8(eureka.XML)})
		built <- err
	}()
	select {
	case err := <-built:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an application's document waited for the wide-build lock")
	}
}

// A registry-wide build that read an application's fragment as current
// uses that fragment even when an application document built meanwhile
// stored a newer one: it must not encode the application from the entries
// it did not read (it would list it empty).
func TestViews_WideBuildKeepsTheFragmentItRead(t *testing.T) {
	f, idx := benchRegistry(t, 20, 2)
	cfg := DefaultConfig()
	cfg.Now = time.Now
	v := newViews(f.Read, cfg)
	key := cache.Key{Entity: cache.EntityApp, Name: "APP-000", Format: uint8(eureka.JSON)}
	old, _, err := v.build(key)
	if err != nil {
		t.Fatal(err)
	}
	var p part
	f.Read(func(r *fsm.Registry) { p = v.wholeApp(r, eureka.JSON, "APP-000") })
	if !p.hasCurrent {
		t.Fatal("the fragment just built is not current")
	}
	applyCmd(t, f, idx, fsm.CmdCancel, &fsm.KeyBody{App: "APP-000", ID: "10.0.0.0:app-000:8080"})
	if _, _, err := v.build(key); err != nil { // stores the newer fragment
		t.Fatal(err)
	}
	got := string(cache.NewValue([]cache.Segment{v.segment(eureka.JSON, p)}, 0).Bytes())
	want := string(cache.NewValue(old[1:2], 0).Bytes())
	if got != want || !strings.Contains(got, "10.0.0.0:app-000:8080") {
		t.Fatalf("the wide build's part of APP-000 is not the fragment it read:\n%.300s\nwant\n%.300s", got, want)
	}
}

// A restore that lands between an application document's read of the
// registry and its storing of the fragment: the fragment of the state
// before must not be kept, or the restored application, at the same
// version with other instances, would be served from it for good.
func TestViews_FragmentReadBeforeARestoreIsNotKept(t *testing.T) {
	registry := func(host string) *fsm.FSM {
		f := fsm.New(0, nil)
		var idx uint64
		applyCmd(t, f, &idx, fsm.CmdRegister, &fsm.RegisterBody{Instance: &fsm.Instance{InstanceID: "i-1",
			HostName: host, App: "APP", IPAddr: "10.0.0.1", Status: fsm.StatusUp, VIPAddress: "app"}})
		return f
	}
	before, restored := registry("host-before"), registry("host-restored")
	current := before
	var v *views
	restoreAfterRead := false
	v = newViews(func(fn func(*fsm.Registry)) {
		current.Read(fn)
		if restoreAfterRead { // the restore swaps the state, then its change reaches the views
			restoreAfterRead = false
			current = restored
			v.forget(fsm.Change{All: true})
		}
	}, DefaultConfig())
	body := func() string {
		segs, _, err := v.app(eureka.JSON, "APP")
		if err != nil {
			t.Fatal(err)
		}
		return string(cache.NewValue(segs, 0).Bytes())
	}
	restoreAfterRead = true
	if got := body(); !strings.Contains(got, "host-before") {
		t.Fatalf("the build that read before the restore: %s", got)
	}
	if got := body(); !strings.Contains(got, "host-restored") {
		t.Fatalf("after the restore, the application is served from the fragment of the state before: %s", got)
	}
}
