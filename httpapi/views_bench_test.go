package httpapi

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// benchRegistry fills an FSM with n instances over apps applications, each
// carrying about 1 KB of metadata.
func benchRegistry(tb testing.TB, n, apps int) (*fsm.FSM, *uint64) {
	tb.Helper()
	f := fsm.New(0, nil)
	var idx uint64
	pad := strings.Repeat("x", 90)
	for i := 0; i < n; i++ {
		app := fmt.Sprintf("APP-%03d", i%apps)
		md := make(map[string]string, 10)
		for k := 0; k < 10; k++ {
			md[fmt.Sprintf("key.%d", k)] = pad
		}
		in := &fsm.Instance{InstanceID: fmt.Sprintf("10.0.%d.%d:%s:8080", i/250, i%250, strings.ToLower(app)),
			HostName: fmt.Sprintf("host-%d", i), App: app, IPAddr: "10.0.0.1", Status: fsm.StatusUp,
			OverriddenStatus: fsm.StatusUnknown, Port: 8080, PortEnabled: true, SecurePort: 443, CountryID: 1,
			DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}, Metadata: fsm.MetadataOf(md), VIPAddress: strings.ToLower(app),
			HomePageURL: "http://host:8080/", StatusPageURL: "http://host:8080/info", HealthCheckURL: "http://host:8080/health",
			LastDirtyTimestamp: 1700000000000}
		applyCmd(tb, f, &idx, fsm.CmdRegister, &fsm.RegisterBody{Instance: in})
	}
	return f, &idx
}

func applyCmd(tb testing.TB, f *fsm.FSM, idx *uint64, t fsm.CmdType, body any) {
	e, err := fsm.Encode(t, body)
	if err != nil {
		tb.Fatal(err)
	}
	_ = fsm.Stamp(e, time.Now().UnixMilli())
	*idx++
	if res := f.Apply(&raft.Log{Index: *idx, Type: raft.LogCommand, Data: e}); res != nil {
		tb.Fatal(res)
	}
}

// BenchmarkBuildAllApps measures a full build of GET /eureka/apps (JSON) for
// 10,000 instances in 500 applications, every fragment encoded from scratch.
func BenchmarkBuildAllApps(b *testing.B) { benchmarkBuildAllApps(b, 10000, 500) }

// BenchmarkBuildAllAppsMetadataCompressed is the same build for 25,000
// instances in 1,250 applications: past fsm.DefaultCompressAbove, where
// every instance's metadata is held deflated and inflated to be encoded.
func BenchmarkBuildAllAppsMetadataCompressed(b *testing.B) {
	benchmarkBuildAllApps(b, fsm.DefaultCompressAbove+5000, 1250)
}

func benchmarkBuildAllApps(b *testing.B, n, apps int) {
	f, _ := benchRegistry(b, n, apps)
	v := newViews(f.Read, DefaultConfig())
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for i := 0; i < b.N; i++ {
		v.forget(fsm.Change{All: true})
		segs, _, err := v.build(cache.Key{Entity: cache.EntityApps, Format: uint8(eureka.JSON)})
		if err != nil {
			b.Fatal(err)
		}
		size = cache.NewValue(segs, 0).Len
	}
	b.ReportMetric(float64(size)/1e6, "MB/doc")
}

// BenchmarkRebuildAllAppsAfterOneAppChange measures the same document after
// one application changed: only that fragment is re-encoded.
func BenchmarkRebuildAllAppsAfterOneAppChange(b *testing.B) {
	f, idx := benchRegistry(b, 10000, 500)
	v := newViews(f.Read, DefaultConfig())
	benchRebuildAfter(b, v, cache.Key{Entity: cache.EntityApps, Format: uint8(eureka.JSON)}, func(i int) {
		applyCmd(b, f, idx, fsm.CmdMetadata, &fsm.MetadataBody{App: "APP-007", ID: "10.0.0.7:app-007:8080",
			Metadata: map[string]string{"n": fmt.Sprint(i)}})
	})
}

// benchRebuildAfter times building key after change(i) for each iteration
// i, the change itself untimed; the document is built once first.
func benchRebuildAfter(b *testing.B, v *views, key cache.Key, change func(i int)) {
	if _, _, err := v.build(key); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		change(i)
		b.StartTimer()
		if _, _, err := v.build(key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadOnlyHit measures a cached read of the full registry.
func BenchmarkReadOnlyHit(b *testing.B) {
	f, _ := benchRegistry(b, 10000, 500)
	c := newViewsCache(b, newViews(f.Read, DefaultConfig()))
	key := cache.Key{Entity: cache.EntityApps, Format: uint8(eureka.JSON)}
	if _, err := c.Get(key); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Get(key); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestViews_FragmentsMatchFullBuild(t *testing.T) {
	f, idx := benchRegistry(t, 300, 7)
	v := newViews(f.Read, DefaultConfig())
	for _, format := range []eureka.Format{eureka.JSON, eureka.XML} {
		key := cache.Key{Entity: cache.EntityApps, Format: uint8(format)}
		if _, _, err := v.build(key); err != nil {
			t.Fatal(err)
		}
	}
	applyCmd(t, f, idx, fsm.CmdMetadata, &fsm.MetadataBody{App: "APP-003", ID: "10.0.0.3:app-003:8080", Metadata: map[string]string{"z": "1"}})
	applyCmd(t, f, idx, fsm.CmdCancel, &fsm.KeyBody{App: "APP-004", ID: "10.0.0.4:app-004:8080"})
	// The GET /apps/{app} document shares the fragment and must match a fresh build too.
	for _, format := range []eureka.Format{eureka.JSON, eureka.XML} {
		key := cache.Key{Entity: cache.EntityApp, Name: "APP-003", Format: uint8(format)}
		segs, _, _ := v.build(key)
		fresh, _, _ := newViews(f.Read, DefaultConfig()).build(key)
		if string(cache.NewValue(segs, 0).Bytes()) != string(cache.NewValue(fresh, 0).Bytes()) || len(segs) != 3 {
			t.Fatalf("%s: application document differs from a fresh build", format)
		}
	}
	for _, format := range []eureka.Format{eureka.JSON, eureka.XML} {
		key := cache.Key{Entity: cache.EntityApps, Format: uint8(format)}
		segs, _, _ := v.build(key)
		incremental := cache.NewValue(segs, 0).Bytes()
		segs, _, _ = newViews(f.Read, DefaultConfig()).build(key)
		fresh := cache.NewValue(segs, 0).Bytes()
		if string(incremental) != string(fresh) {
			t.Fatalf("%s: incremental build differs from a fresh one", format)
		}
		if !strings.Contains(string(incremental), "z") {
			t.Fatal("change not visible")
		}
	}
}

// BenchmarkGzipAllApps measures compressing GET /eureka/apps (JSON, 10,000
// instances) whole, as a document without a predecessor is.
func BenchmarkGzipAllApps(b *testing.B) {
	f, _ := benchRegistry(b, 10000, 500)
	v := newViews(f.Read, DefaultConfig())
	segs, _, err := v.build(cache.Key{Entity: cache.EntityApps, Format: uint8(eureka.JSON)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for i := 0; i < b.N; i++ {
		size = cache.NewValue(segs, 0).GzipLen()
	}
	b.ReportMetric(float64(size)/1e6, "MB/gz")
}

// BenchmarkRebuildAndGzipAllAppsAfterOneAppChange measures what the cache
// does for a gzip-served full registry after one application changed:
// rebuild the document and gzip it, reusing the compressed segments of the
// applications that did not change.
func BenchmarkRebuildAndGzipAllAppsAfterOneAppChange(b *testing.B) {
	f, idx := benchRegistry(b, 10000, 500)
	v := newViews(f.Read, DefaultConfig())
	cfg := cache.DefaultConfig()
	cfg.PushWindow = 0
	c, err := cache.New(cfg, v.build, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	key := cache.Key{Entity: cache.EntityApps, Format: uint8(eureka.JSON)}
	val, err := c.Get(key)
	if err != nil {
		b.Fatal(err)
	}
	val.GzipLen()
	b.ReportAllocs()
	b.ResetTimer()
	var size int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		applyCmd(b, f, idx, fsm.CmdMetadata, &fsm.MetadataBody{App: "APP-007", ID: "10.0.0.7:app-007:8080",
			Metadata: map[string]string{"n": fmt.Sprint(i)}})
		c.Invalidate(fsm.Change{Apps: []string{"APP-007"}})
		b.StartTimer()
		c.Refresh()
		val, err = c.Get(key)
		if err != nil {
			b.Fatal(err)
		}
		size = val.GzipLen()
	}
	b.ReportMetric(float64(size)/1e6, "MB/gz")
}

// TestViews_DeltaFromKeptInstancesMatchesAFreshEncoding: the delta built
// from the instances encoded for the previous delta is byte for byte the
// document encoded from scratch.
func TestViews_DeltaFromKeptInstancesMatchesAFreshEncoding(t *testing.T) {
	f, idx := benchRegistry(t, 60, 7)
	cfg := DefaultConfig()
	cfg.Now = time.Now
	v := newViews(f.Read, cfg)
	for _, format := range []eureka.Format{eureka.JSON, eureka.XML} {
		key := cache.Key{Entity: cache.EntityDelta, Format: uint8(format)}
		if _, _, err := v.build(key); err != nil {
			t.Fatal(err)
		}
		applyCmd(t, f, idx, fsm.CmdMetadata, &fsm.MetadataBody{App: "APP-003", ID: "10.0.0.3:app-003:8080", Metadata: map[string]string{"z": format.ContentType()}})
		applyCmd(t, f, idx, fsm.CmdCancel, &fsm.KeyBody{App: "APP-004", ID: fmt.Sprintf("10.0.0.%d:app-004:8080", 4+7*int(format))})
		segs, version, err := v.build(key)
		if err != nil {
			t.Fatal(err)
		}
		// From scratch: one fragment per application, in order of first
		// appearance, as the delta lists them; an application the delta
		// holds whole has its instances in id order, as the fragment the
		// delta shares then, and one whose instances each appear once has
		// the current ones in id order too.
		var order []string
		byApp := map[string][]*fsm.Entry{}
		var hash string
		parted := 0
		f.Read(func(r *fsm.Registry) {
			for _, d := range r.Delta(0) {
				if byApp[d.Entry.App] == nil {
					order = append(order, d.Entry.App)
				}
				byApp[d.Entry.App] = append(byApp[d.Entry.App], d.Entry)
			}
			for a, es := range byApp {
				all := r.AppEntries(a)
				if isWholeApp(es, all) {
					byApp[a] = all
					continue
				}
				ids := map[string]bool{}
				var cur, rest []*fsm.Entry
				for _, e := range es {
					ids[e.ID] = true
					if slices.Contains(all, e) {
						cur = append(cur, e)
					} else {
						rest = append(rest, e)
						parted++ // not in the current fragment: encoded for the delta
					}
				}
				if len(ids) == len(es) {
					// Each instance once: the current ones in id order
					// (runs of the fragment), then the ones gone.
					slices.SortFunc(cur, func(a, b *fsm.Entry) int { return strings.Compare(a.ID, b.ID) })
					byApp[a] = append(cur, rest...)
				}
			}
			hash = r.HashCode()
		})
		if parted == 0 {
			t.Fatalf("%s: every instance of the delta is current: the test needs a replaced or deleted one", format)
		}
		var frags [][]byte
		for _, a := range order {
			frags = append(frags, eureka.AppendApplication(nil, format, a, byApp[a]))
		}
		want := eureka.AppendApplications(nil, format, fmt.Sprint(version), hash, frags)
		if got := cache.NewValue(segs, 0).Bytes(); string(got) != string(want) {
			t.Fatalf("%s: delta differs from a fresh encoding:\n%.300s\nwant\n%.300s", format, got, want)
		}
		if n := len(v.deltaInst[format]); n != parted {
			t.Fatalf("%s: %d encoded instances kept, want the %d no current fragment holds", format, n, parted)
		}
	}
}
