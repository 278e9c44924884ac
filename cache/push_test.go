package cache

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

func withPush(cfg *Config) { cfg.PushWindow = time.Millisecond }

// waitFor polls cond for up to 5 s (a bounded loop: the push itself takes
// milliseconds).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not within 5 s", what)
}

func TestPush_ChangeReachesReadOnlyWithoutTimer(t *testing.T) {
	c, b := newTestCache(t, withPush)
	mustGet(t, c, kApps)
	mustGet(t, c, kAppA)
	mustGet(t, c, kAppB)
	mustGet(t, c, kDelta)
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "pushed documents", func() bool {
		return mustGet(t, c, kApps) == "apps//0@1" && mustGet(t, c, kAppA) == "app/A/0@1" && mustGet(t, c, kDelta) == "delta//0@1"
	})
	if got := mustGet(t, c, kAppB); got != "app/B/0@0" {
		t.Fatalf("an application the change did not touch was rebuilt: %s", got)
	}
	st := c.Stats()
	if st.ReadOnlyMisses != 4 || st.Pushes == 0 {
		t.Fatalf("want 4 readOnly misses (the first reads) and a push, got %+v", st)
	}
}

func TestPush_RenewalsPushNothing(t *testing.T) {
	c, b := newTestCache(t, withPush)
	mustGet(t, c, kApps)
	c.Invalidate(fsm.Change{Index: 7})
	time.Sleep(20 * time.Millisecond)
	if n := b.count(kApps); n != 1 || c.Stats().Pushes != 0 {
		t.Fatalf("a renewal rebuilt something: %d builds, %d pushes", n, c.Stats().Pushes)
	}
}

func TestPush_OffKeepsTimerOnlyBehaviour(t *testing.T) {
	c, b := newTestCache(t, nil) // PushWindow 0
	mustGet(t, c, kAppA)
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	time.Sleep(20 * time.Millisecond)
	if got := mustGet(t, c, kAppA); got != "app/A/0@0" {
		t.Fatalf("readOnly changed before the refresh with the push off: %s", got)
	}
	c.Refresh()
	if got := mustGet(t, c, kAppA); got != "app/A/0@1" {
		t.Fatalf("after the refresh: %s", got)
	}
}

func TestPush_GoneApplicationLeavesReadOnly(t *testing.T) {
	c, b := newTestCache(t, withPush)
	mustGet(t, c, kAppA)
	b.mu.Lock()
	b.fail["A"] = true
	b.mu.Unlock()
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "404 after the last instance left", func() bool {
		_, err := c.Get(kAppA)
		return err != nil
	})
}

func TestPush_PacesExpensiveDocuments(t *testing.T) {
	c, b := newTestCache(t, withPush)
	b.delay = 20 * time.Millisecond // every build is "expensive"
	mustGet(t, c, kApps)
	// A stream of changes, one per millisecond, for 100 ms: the document
	// is rebuilt at most once per 8 × 20 ms (the wide lane's pace), yet
	// ends current.
	for i := 1; i <= 100; i++ {
		b.gen.Store(uint64(i))
		c.Invalidate(fsm.Change{Apps: []string{"A"}})
		time.Sleep(time.Millisecond)
	}
	waitFor(t, "final state pushed", func() bool { return mustGet(t, c, kApps) == "apps//0@100" })
	if n := b.count(kApps); n > 6 {
		t.Fatalf("%d builds for a paced document under 100 changes", n)
	}
}

// TestPush_SlowBuildStaysWithinASecond: pacing never holds a document
// back past the read invariant (an unmarked read holds every write
// acknowledged more than 1 s before it). A 150 ms full-registry build,
// paced at eight times its cost, would wait 1.2 s before rebuilding; the
// cap brings a change in within maxPaceDelay plus one build.
func TestPush_SlowBuildStaysWithinASecond(t *testing.T) {
	c, b := newTestCache(t, withPush)
	b.delay = 150 * time.Millisecond
	mustGet(t, c, kApps)
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "first change pushed", func() bool { return mustGet(t, c, kApps) == "apps//0@1" })
	// Just rebuilt: the next change falls inside the pacing delay.
	b.gen.Store(2)
	start := time.Now()
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "second change pushed", func() bool { return mustGet(t, c, kApps) == "apps//0@2" })
	if took := time.Since(start); took >= time.Second {
		t.Fatalf("a change reached the cached full registry after %v", took)
	}
}

func TestWatch_ClosedAfterPush(t *testing.T) {
	c, b := newTestCache(t, withPush)
	mustGet(t, c, kAppA)
	chA, chB, chInst := c.Watch(kAppA), c.Watch(kAppB), c.Watch(kInstA)
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	select {
	case <-chA:
	case <-time.After(5 * time.Second):
		t.Fatal("watcher of the changed application not woken")
	}
	// readOnly already holds the new document when the watcher wakes.
	if got := mustGet(t, c, kAppA); got != "app/A/0@1" {
		t.Fatalf("woken before the document changed: %s", got)
	}
	<-chInst
	select {
	case <-chB:
		t.Fatal("watcher of an untouched application woken")
	default:
	}
	if c.Watch(kAppA) == chA {
		t.Fatal("a closed channel was handed out again")
	}
}

func TestWatch_RefreshWakesWithPushOff(t *testing.T) {
	c, _ := newTestCache(t, nil)
	mustGet(t, c, kApps)
	ch := c.Watch(kApps)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	select {
	case <-ch:
		t.Fatal("woken before readOnly changed")
	default:
	}
	c.Refresh()
	<-ch
}

func TestWatch_RestoreWakesEveryone(t *testing.T) {
	c, _ := newTestCache(t, withPush)
	chs := []<-chan struct{}{c.Watch(kAppA), c.Watch(kVIPx), c.Watch(kByID)}
	c.Invalidate(fsm.Change{All: true})
	for _, ch := range chs {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("watcher not woken by a restore")
		}
	}
}

// TestCache_ConcurrentBuildAndInvalidate builds, reads, gzips, sheds,
// refreshes and invalidates at once (run it with -race): afterwards the
// bytes statistic equals what readWrite holds.
func TestCache_ConcurrentBuildAndInvalidate(t *testing.T) {
	c, b := newTestCache(t, func(cfg *Config) { cfg.PushWindow = time.Millisecond; cfg.MaxEntries = 40 })
	b.delay = 100 * time.Microsecond
	keys := []Key{kApps, kDelta, kAppA, kAppB, kVIPx, kVIPy, kInstA, kInstB, kByID}
	for i := range 20 {
		keys = append(keys, Key{Entity: EntityVIP, Name: fmt.Sprint("v", i)})
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// loop calls step(0), step(1), ... on its own goroutine until stop.
	loop := func(step func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !tick.Stopped(stop); i++ {
				step(i)
			}
		}()
	}
	for w := range 8 {
		loop(func(i int) {
			k := keys[(i*7+w)%len(keys)]
			if v, err := c.Get(k); err == nil && i%3 == 0 {
				v.Gzip()
			}
			_ = c.Watch(k)
		})
	}
	loop(func(i int) {
		b.gen.Add(1)
		ch := fsm.Change{Apps: []string{"A"}, VIPs: []string{"x"}}
		if i%5 == 0 {
			ch = fsm.Change{Apps: []string{"B"}, VIPs: []string{"y"}}
		}
		if i%50 == 0 {
			ch = fsm.Change{All: true}
		}
		c.Invalidate(ch)
		time.Sleep(50 * time.Microsecond)
	})
	loop(func(int) {
		time.Sleep(3 * time.Millisecond)
		c.Refresh()
		_ = c.Stats()
	})
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	c.Close() // no pass runs while the statistic is checked

	c.mu.Lock()
	defer c.mu.Unlock()
	var want int64
	for _, e := range c.rw {
		select {
		case <-e.ready:
		default:
			t.Fatal("a build still under way after every reader stopped")
		}
		if e.val != nil {
			want += int64(e.val.Len + e.val.gzCounted)
		}
	}
	if got := c.stats.bytes.Load(); got != want {
		t.Fatalf("bytes statistic %d, readWrite holds %d", got, want)
	}
}

func TestPush_GzipMadeAheadOnlyWhileRead(t *testing.T) {
	c, b := newTestCache(t, nil)
	v, _ := c.Get(kApps)
	v.Gzip() // a gzip reader
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	c.Refresh()
	v1, _ := c.Get(kApps)
	if !v1.gzDone.Load() {
		t.Fatal("a document read gzipped was not compressed ahead")
	}
	b.gen.Store(2)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	c.Refresh()
	v2, _ := c.Get(kApps)
	if v2.gzDone.Load() {
		t.Fatal("compressed ahead although nobody read the previous build gzipped")
	}
	if got := gunzip(t, v2.Gzip()); string(got) != string(v2.Bytes()) {
		t.Fatal("gzip on demand does not round-trip")
	}
}

// The window bounds how often a registry-wide document is rebuilt, not how
// long the first change waits: a change after a quiet spell is pushed at
// once, and the changes that follow it within the window share one later
// pass. An application's document has no window: it follows each change.
func TestPush_LeadingEdgeOfWindow(t *testing.T) {
	const window = time.Second
	c, b := newTestCache(t, func(cfg *Config) { cfg.PushWindow = window })
	mustGet(t, c, kApps)
	mustGet(t, c, kAppA)
	start := time.Now()
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "the first change pushed", func() bool { return mustGet(t, c, kApps) == "apps//0@1" })
	if d := time.Since(start); d >= window/2 {
		t.Fatalf("the first change after a quiet spell waited %v for a %v window", d, window)
	}
	// Two more changes right away: the full registry waits for the
	// window's end, and one rebuild carries both.
	builds := b.count(kApps)
	b.gen.Store(2)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "the application's document pushed within the window", func() bool { return mustGet(t, c, kAppA) == "app/A/0@2" })
	b.gen.Store(3)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "the application's document pushed again", func() bool { return mustGet(t, c, kAppA) == "app/A/0@3" })
	if d := time.Since(start); d >= window/2 {
		t.Fatalf("the application's document waited %v: it should not wait for the window", d)
	}
	if got := mustGet(t, c, kApps); got != "apps//0@1" {
		t.Fatalf("a change within the window was pushed into the full registry before its end: %s", got)
	}
	waitFor(t, "the later changes pushed", func() bool { return mustGet(t, c, kApps) == "apps//0@3" })
	if n := b.count(kApps) - builds; n != 1 {
		t.Fatalf("%d rebuilds of the full registry for two changes within one window, want 1", n)
	}
}

// An application's document (the small lane) is spaced by its rebuild
// cost only, not eight times it as registry-wide documents are: a change
// that comes after the last rebuild took its time is pushed at once.
func TestPush_ApplicationDocumentsPacedByTheirCost(t *testing.T) {
	c, b := newTestCache(t, withPush)
	// Paced as the full registry is, a rebuild would start 240 ms after the
	// last one started, and a change would be pushed 180 ms after it came.
	b.delay = 30 * time.Millisecond
	mustGet(t, c, kAppA)
	for i := 1; i <= 3; i++ {
		time.Sleep(60 * time.Millisecond) // twice the cost since the last rebuild ended
		start := time.Now()
		b.gen.Store(uint64(i))
		c.Invalidate(fsm.Change{Apps: []string{"A"}})
		want := fmt.Sprintf("app/A/0@%d", i)
		waitFor(t, "change "+want, func() bool { return mustGet(t, c, kAppA) == want })
		// The rebuild's 30 ms and a margin for a busy machine.
		if d := time.Since(start); d >= 120*time.Millisecond {
			t.Fatalf("change %d pushed after %v: the application's document waited out eight times its cost", i, d)
		}
	}
}

// TestPush_UnreadDocumentIsDroppedNotRebuilt: the pusher rebuilds a
// document only if a reader got it since its last build; one nobody read
// leaves both levels at the next change (watchers still woken), and the
// next reader builds the current one.
func TestPush_UnreadDocumentIsDroppedNotRebuilt(t *testing.T) {
	c, b := newTestCache(t, withPush)
	mustGet(t, c, kDelta)
	mustGet(t, c, kAppA)
	inRO := func(k Key) bool { _, ok := c.ro.Load(k); return ok }

	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "read documents rebuilt", func() bool { return b.count(kDelta) == 2 && b.count(kAppA) == 2 })
	waitFor(t, "rebuilt documents in readOnly", func() bool { return inRO(kDelta) && inRO(kAppA) })

	chDelta, chA := c.Watch(kDelta), c.Watch(kAppA)
	b.gen.Store(2)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "unread documents dropped", func() bool { return !inRO(kDelta) && !inRO(kAppA) })
	for _, ch := range []<-chan struct{}{chDelta, chA} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("a watcher of a dropped document was not woken")
		}
	}
	if st := c.Stats(); b.count(kDelta) != 2 || b.count(kAppA) != 2 || st.ReadWriteKeys != 0 || st.ReadOnlyKeys != 0 {
		t.Fatalf("unread documents rebuilt or kept: delta %d, app %d builds; %+v", b.count(kDelta), b.count(kAppA), st)
	}
	if got := mustGet(t, c, kDelta); got != "delta//0@2" || b.count(kDelta) != 3 {
		t.Fatalf("next read: %s after %d builds", got, b.count(kDelta))
	}
	// Read again, so the next change rebuilds it.
	b.gen.Store(3)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	waitFor(t, "read document rebuilt", func() bool { return b.count(kDelta) == 4 })
	waitFor(t, "current in readOnly", func() bool { return mustGet(t, c, kDelta) == "delta//0@3" })
}

// TestRefresh_ExpiredUnreadDocumentIsDropped: a document is rebuilt on
// expiry only if read since its last build, so a node does not keep, and
// rebuild every AutoExpiration, every document ever read once.
func TestRefresh_ExpiredUnreadDocumentIsDropped(t *testing.T) {
	c, b := newTestCache(t, func(cfg *Config) { cfg.AutoExpiration = 500 * time.Millisecond })
	mustGet(t, c, kAppA)
	time.Sleep(600 * time.Millisecond)
	c.Refresh() // read since built: rebuilt
	if b.count(kAppA) != 2 || c.Stats().ReadOnlyKeys != 1 {
		t.Fatalf("a read document was not rebuilt on expiry: %d builds, %+v", b.count(kAppA), c.Stats())
	}
	// Not expired (built well under 500 ms ago, on a busy machine too):
	// kept as it is, read or not.
	c.Refresh()
	if b.count(kAppA) != 2 || c.Stats().ReadOnlyKeys != 1 {
		t.Fatalf("a current document was dropped or rebuilt: %d builds, %+v", b.count(kAppA), c.Stats())
	}
	time.Sleep(600 * time.Millisecond)
	c.Refresh() // expired and nobody read the rebuild: dropped
	if st := c.Stats(); b.count(kAppA) != 2 || st.ReadOnlyKeys != 0 || st.ReadWriteKeys != 0 || st.Bytes != 0 {
		t.Fatalf("an unread expired document was kept or rebuilt: %d builds, %+v", b.count(kAppA), st)
	}
}
