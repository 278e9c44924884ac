package memlimit

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Policy{
		"auto": {Auto: true}, "": {Auto: true}, "off": {}, "0": {},
		"512MiB": {Fixed: 512 << 20}, "1GiB": {Fixed: 1 << 30}, "100MB": {Fixed: 100e6}, "1.5 GiB": {Fixed: 3 << 29},
		"67108864": {Fixed: 64 << 20},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"lots", "-5MiB", "1MiB", "12XB", "1e30GiB"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q): want an error", in)
		}
	}
}

func TestAutoLimit(t *testing.T) {
	if got := AutoLimit(0, 0, 0); got != minRoom {
		t.Errorf("empty heap: %d, want the least room %d", got, minRoom)
	}
	if got := AutoLimit(900<<20, 0, 0); got != 900<<20+900<<20/roomShare {
		t.Errorf("900 MiB live: %d MiB", got>>20)
	}
	// The runtime's own memory counts against the limit: it is added, so
	// that the heap keeps its room. A small heap's share is below the
	// least room, which it gets instead.
	if got := AutoLimit(90<<20, 16<<20, 0); got != 90<<20+minRoom+16<<20 {
		t.Errorf("90 MiB live, 16 MiB runtime: %d MiB", got>>20)
	}
	if got := AutoLimit(200<<20, 16<<20, 0); got != 200<<20+200<<20/roomShare+16<<20 {
		t.Errorf("200 MiB live, 16 MiB runtime: %d MiB", got>>20)
	}
	if got := AutoLimit(800<<20, 16<<20, 500<<20); got != 450<<20 {
		t.Errorf("under a 500 MiB cgroup: %d MiB, want 450", got>>20)
	}
}

// The runtime's own share is measured: stacks and metadata are never zero
// in a running program, and never all of its memory.
func TestUsage(t *testing.T) {
	runtime.GC() // live is what a collection marked
	live, own := usage()
	if live <= 0 || own <= 0 || own > 1<<30 {
		t.Fatalf("usage: live %d, runtime's own %d", live, own)
	}
}

// The unused space of the heap's spans is counted with the runtime's
// share, as the Go runtime counts it against the limit: a heap with half
// of its small objects freed holds that space until new objects fill it.
func TestUsage_CountsSpanSpace(t *testing.T) {
	keep := make([]*[64]byte, 0, 1<<19)
	for i := range 1 << 20 {
		p := new([64]byte)
		if i%2 == 0 {
			keep = append(keep, p)
		}
	}
	runtime.GC()
	_, own := usage()
	s := []metrics.Sample{{Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	if unused := int64(s[0].Value.Uint64()); unused < 1<<20 || own < unused {
		t.Fatalf("span space unused %d MiB, runtime share %d MiB: want the share to hold it", unused>>20, own>>20)
	}
	runtime.KeepAlive(keep)
}

func TestCgroupLimit(t *testing.T) {
	write := func(root, p, s string) {
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v2, v2max, v1, v1none, empty := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	write(v2, "sys/fs/cgroup/memory.max", "268435456\n")
	write(v2max, "sys/fs/cgroup/memory.max", "max\n")
	write(v1, "sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n")
	write(v1none, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
	for root, want := range map[string]int64{v2: 256 << 20, v2max: 0, v1: 512 << 20, v1none: 0, empty: 0} {
		if got := CgroupLimit(root); got != want {
			t.Errorf("CgroupLimit(%s) = %d, want %d", root, got, want)
		}
	}
}

// TestAfterEachGC: the hook runs after collections, and no more once
// stopped.
func TestAfterEachGC(t *testing.T) {
	stop := make(chan struct{})
	var calls atomic.Int64
	afterEachGC(stop, func() { calls.Add(1) })
	for i := 0; i < 500 && calls.Load() < 3; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if n := calls.Load(); n < 3 {
		t.Fatalf("%d calls after up to 500 collections", n)
	}
	close(stop)
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	before := calls.Load()
	for range 5 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if n := calls.Load(); n != before {
		t.Fatalf("%d calls after stop", n-before)
	}
}

// gcPercent reads the collector's GOGC without setting it.
func gcPercent() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestApply_AutoLimitAlonePacesTheCollector: under the automatic limit
// GOGC is off while the limit follows the heap (so the limit's room, not
// twice a small heap, decides when to collect), and back once it stops; a
// GOGC from the environment, or a fixed limit, leaves it as it is.
func TestApply_AutoLimitAlonePacesTheCollector(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set: the automatic limit does not apply")
	}
	t.Setenv("GOGC", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	before := gcPercent()
	if before < 0 || before == 1<<63-1 {
		t.Skipf("GOGC is off in this test process (%d)", before)
	}
	wait := func(want int64) {
		t.Helper()
		for range 500 {
			if gcPercent() == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("GOGC %d, want %d", gcPercent(), want)
	}
	apply := func(p Policy) context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		Apply(ctx, p, time.Hour, hclog.NewNullLogger())
		return cancel
	}

	cancel := apply(Policy{Auto: true})
	// Off: the metric reads as the largest value (no GOGC goal).
	if got := gcPercent(); got != 1<<63-1 && got >= 0 {
		cancel()
		t.Fatalf("GOGC %d under the automatic limit, want off", got)
	}
	cancel()
	wait(before)

	t.Setenv("GOGC", "150")
	cancel = apply(Policy{Auto: true})
	if got := gcPercent(); got != before {
		t.Fatalf("GOGC from the environment changed to %d", got)
	}
	cancel()
	t.Setenv("GOGC", "")
	cancel = apply(Policy{Fixed: 1 << 30})
	if got := gcPercent(); got != before {
		t.Fatalf("GOGC changed to %d under a fixed limit", got)
	}
	cancel()
}
