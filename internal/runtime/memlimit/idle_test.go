package memlimit

import (
	"runtime"
	"testing"
	"time"
)

// TestIdleReturn_CollectsOnceQuietWithGarbage: a collection only after
// quietTicks quiet intervals, only with enough garbage and free pages, and
// the count starts again after it.
func TestIdleReturn_CollectsOnceQuietWithGarbage(t *testing.T) {
	calls := 0
	w := &idleReturn{collect: func() { calls++ }}
	const live = 40 << 20
	for i := 1; i < quietTicks; i++ {
		w.quiet = i
		if w.tickQuiet(live, live+20<<20, 0) || calls != 0 {
			t.Fatalf("collected after %d quiet intervals", i)
		}
	}
	w.quiet = quietTicks
	if w.tickQuiet(live, live+4<<20, 2<<20) || calls != 0 {
		t.Fatal("collected for 6 MiB of garbage and free pages")
	}
	if !w.tickQuiet(live, live+4<<20, 5<<20) || calls != 1 || w.quiet != 0 {
		t.Fatalf("9 MiB held, quiet: calls %d, quiet %d", calls, w.quiet)
	}
	// A large heap needs its share, not the floor, and longer quiet.
	w.quiet = quietFor(800 << 20)
	if w.tickQuiet(800<<20, 800<<20+40<<20, 0) || calls != 1 {
		t.Fatal("collected 800 MiB for 40 MiB of garbage")
	}
	if !w.tickQuiet(800<<20, 800<<20+51<<20, 0) || calls != 2 {
		t.Fatal("did not collect 800 MiB for 51 MiB of garbage")
	}
}

// TestIdleReturn_LargeHeapWaitsLonger: the quiet a collection needs grows
// with the live heap it will mark: 2 s up to 160 MiB, about 30 s for a
// million instances' 2.3 GB, so that a reader serving bursts with pauses
// of a few seconds does not collect its whole heap in every pause.
func TestIdleReturn_LargeHeapWaitsLonger(t *testing.T) {
	calls := 0
	w := &idleReturn{collect: func() { calls++ }}
	const live = 2300 << 20
	if n := quietFor(live); n < 250 {
		t.Fatalf("a 2.3 GB heap idle after %d quiet intervals", n)
	}
	if quietFor(40<<20) != quietTicks || quietFor(160<<20) != quietTicks {
		t.Fatal("a small heap waits longer than quietTicks")
	}
	for w.quiet = quietTicks; w.quiet < quietFor(live); w.quiet++ {
		if w.tickQuiet(live, live+400<<20, 0) {
			t.Fatalf("collected 2.3 GB after %d quiet intervals", w.quiet)
		}
	}
	if !w.tickQuiet(live, live+400<<20, 0) || calls != 1 {
		t.Fatal("did not collect 2.3 GB once quiet long enough")
	}
}

// TestIdleReturn_BusyResetsQuiet: an interval allocating at quietRate or
// more starts the quiet count again.
func TestIdleReturn_BusyResetsQuiet(t *testing.T) {
	w := newIdleReturn()
	w.collect = func() { t.Fatal("collected while busy") }
	w.quiet = quietTicks - 1
	allocs, _, _, _, _ := w.read()
	// as if 2 MiB had been allocated in the last second
	w.recent = []allocMark{{allocs - 2*quietRate, w.now().Add(-time.Second)}}
	w.tick()
	if w.quiet != 0 {
		t.Fatalf("quiet count %d after a busy interval", w.quiet)
	}
}

// TestIdleReturn_AfterABusyCollection: with little garbage, a quiet node
// still collects once if its last collection came while it was busy, and
// not again.
func TestIdleReturn_AfterABusyCollection(t *testing.T) {
	calls := 0
	w := &idleReturn{collect: func() { calls++ }, quiet: quietTicks, busyGC: true}
	const live = 40 << 20
	if !w.tickQuiet(live, live+1<<20, 0) || calls != 1 {
		t.Fatalf("calls %d after a busy collection", calls)
	}
	w.quiet = quietTicks
	if w.tickQuiet(live, live+1<<20, 0) || calls != 1 {
		t.Fatalf("collected again: calls %d", calls)
	}
}

// TestIdleReturn_OwnCollectionDoesNotRearm: what the node allocates while
// the idle return's own collection runs (a large heap takes seconds to
// mark) is not judged as a busy interval, so a quiet node collects once
// and then waits for garbage, instead of collecting again and again.
func TestIdleReturn_OwnCollectionDoesNotRearm(t *testing.T) {
	w := newIdleReturn()
	calls := 0
	var sink [][]byte
	w.collect = func() {
		calls++
		for range 64 { // 4 MiB of background work while "marking"
			sink = append(sink, make([]byte, 64<<10))
		}
		sink = nil
		runtime.GC()
	}
	clock := time.Now()
	w.now = func() time.Time { return clock }
	w.mark()
	w.quiet, w.busyGC = quietTicks-1, true
	clock = clock.Add(time.Second)
	if !w.tick() || calls != 1 {
		t.Fatalf("no collection after a busy one: calls %d", calls)
	}
	for i := range 3 * quietTicks {
		clock = clock.Add(time.Second) // a second per interval: quiet unless a MiB is allocated
		w.tick()
		if calls != 1 {
			t.Fatalf("collected again %d intervals after its own collection (busyGC %v)", i+1, w.busyGC)
		}
	}
	_ = sink
}

// TestIdleReturn_BlipsStayQuiet: the rate is judged over the last second,
// so a quiet million-instance node whose periodic work allocates 200 KB at
// once every 10 s (1.95 MiB/s over that one 100 ms interval) still counts
// as quiet and returns its garbage once quiet long enough; a node
// allocating 2 MiB/s steadily never does.
func TestIdleReturn_BlipsStayQuiet(t *testing.T) {
	const live, garbage = 2300 << 20, 600 << 20
	run := func(blip func(i int) bool, bytes uint64, ticks int) (collectedAt int) {
		calls := 0
		w := &idleReturn{collect: func() { calls++ }}
		at, allocs := time.Unix(1e9, 0), uint64(1<<30)
		for i := 1; i <= ticks; i++ {
			at = at.Add(100 * time.Millisecond)
			allocs += 2 << 10 // heartbeats
			if blip(i) {
				allocs += bytes
			}
			if w.judge(allocs, live, live+garbage, 0, 7, at) {
				return i
			}
		}
		return 0
	}
	every := func(n int) func(int) bool { return func(i int) bool { return i%n == 0 } }
	if at := run(every(100), 200<<10, 2*quietFor(live)); at != quietFor(live) {
		t.Fatalf("200 KB every 10 s: collected at interval %d, want %d", at, quietFor(live))
	}
	if at := run(every(1), 200<<10, 4*quietFor(live)); at != 0 {
		t.Fatalf("2 MiB/s steadily: collected at interval %d", at)
	}
	// A burst of a few MB is busy for the second it is in the window,
	// and the quiet count starts again after it.
	once := func(i int) bool { return i == 200 }
	if at := run(once, 3<<20, 2*quietFor(live)+200); at <= 200+quietFor(live) || at > 210+quietFor(live) {
		t.Fatalf("3 MB once at interval 200: collected at interval %d", at)
	}
}
