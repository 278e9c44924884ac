package httpapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// BenchmarkDeltaRebuildAfterOneChange measures rebuilding GET
// /eureka/apps/delta (JSON) of 10,000 instances in 500 applications after
// one more instance changed, the registrations being older than the
// delta's retention and 300 instances of various applications changed
// since: the delta holds applications in part, as in steady operation.
// The build encodes the changed application's fragment (and compresses
// it) and lists the delta's instances.
func BenchmarkDeltaRebuildAfterOneChange(b *testing.B) {
	f, idx := benchRegistry(b, 10000, 500)
	cfg := DefaultConfig()
	var retention time.Duration
	f.Read(func(r *fsm.Registry) { retention = r.DeltaRetention() })
	mid := time.Now()
	time.Sleep(2 * time.Millisecond)
	cfg.Now = func() time.Time { return mid.Add(retention) } // the delta starts after the registrations
	v := newViews(f.Read, cfg)
	change := func(i int) {
		app := i % 500
		applyCmd(b, f, idx, fsm.CmdMetadata, &fsm.MetadataBody{App: fmt.Sprintf("APP-%03d", app),
			ID: fmt.Sprintf("10.0.%d.%d:app-%03d:8080", i/250, i%250, app), Metadata: map[string]string{"n": fmt.Sprint(i)}})
	}
	for i := range 300 {
		change(i * 31 % 10000)
	}
	benchRebuildAfter(b, v, cache.Key{Entity: cache.EntityDelta, Format: uint8(eureka.JSON)}, func(i int) {
		change((300 + i) * 31 % 10000)
	})
}
