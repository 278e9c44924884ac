package cache

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// countingBuilder builds "<key>@<generation>" and counts builds per key.
type countingBuilder struct {
	mu     sync.Mutex
	builds map[Key]int
	gen    atomic.Uint64
	delay  time.Duration
	fail   map[string]bool
	panics atomic.Bool
}

func newCountingBuilder() *countingBuilder {
	return &countingBuilder{builds: map[Key]int{}, fail: map[string]bool{}}
}

func (b *countingBuilder) build(k Key) ([]Segment, uint64, error) {
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	b.mu.Lock()
	b.builds[k]++
	fail := b.fail[k.Name]
	b.mu.Unlock()
	if fail {
		return nil, 0, errors.New("no such thing")
	}
	if b.panics.Load() {
		var e *fsm.Entry
		_ = e.App // the nil dereference a build bug would make
	}
	g := b.gen.Load()
	body := fmt.Sprintf("%s/%s/%d@%d", k.Entity, readableName(k), k.Format, g)
	return PlainSegments([]byte(body[:3]), []byte(body[3:])), g, nil
}

// readableName is a key's name as the test documents show it: an
// instance's as app/id.
func readableName(k Key) string {
	if k.Entity == EntityInstance {
		app, id := SplitInstanceName(k.Name)
		return app + "/" + id
	}
	return k.Name
}

func (b *countingBuilder) count(k Key) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.builds[k]
}

func newTestCache(t *testing.T, mutate func(*Config)) (*Cache, *countingBuilder) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.UpdateInterval = time.Hour // tests call Refresh themselves
	cfg.PushWindow = 0             // push tests turn it on
	if mutate != nil {
		mutate(&cfg)
	}
	b := newCountingBuilder()
	c, err := New(cfg, b.build, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, b
}

func mustGet(t *testing.T, c *Cache, k Key) string {
	t.Helper()
	v, err := c.Get(k)
	if err != nil {
		t.Fatalf("get %v: %v", k, err)
	}
	return string(v.Bytes())
}

var (
	kApps  = Key{Entity: EntityApps}
	kDelta = Key{Entity: EntityDelta}
	kAppA  = Key{Entity: EntityApp, Name: "A"}
	kAppB  = Key{Entity: EntityApp, Name: "B"}
	kVIPx  = Key{Entity: EntityVIP, Name: "x"}
	kVIPy  = Key{Entity: EntityVIP, Name: "y"}
	kInstA = Key{Entity: EntityInstance, Name: InstanceName("A", "1")}
	kInstB = Key{Entity: EntityInstance, Name: InstanceName("B", "1")}
	kByID  = Key{Entity: EntityInstance, Name: InstanceName("", "1")}
)

func TestCache_SingleBuildUnderConcurrentMisses(t *testing.T) {
	c, b := newTestCache(t, nil)
	b.delay = 50 * time.Millisecond
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := c.Get(kApps); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := b.count(kApps); n != 1 {
		t.Fatalf("%d builds for 100 concurrent misses, want 1", n)
	}
}

func TestCache_ReadOnlyServesUntilRefresh(t *testing.T) {
	c, b := newTestCache(t, nil)
	if got := mustGet(t, c, kAppA); got != "app/A/0@0" {
		t.Fatal(got)
	}
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	if got := mustGet(t, c, kAppA); got != "app/A/0@0" {
		t.Fatalf("readOnly must serve the old document until refresh, got %s", got)
	}
	c.Refresh()
	if got := mustGet(t, c, kAppA); got != "app/A/0@1" {
		t.Fatalf("after refresh: %s", got)
	}
	st := c.Stats()
	if st.ReadOnlyHits != 2 || st.ReadOnlyMisses != 1 || st.Builds != 2 || st.Invalidations != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCache_BuildPanicIsAnErrorAndDoesNotHang checks that a build that
// panics answers its reader with an error, leaves no unfinished entry behind
// (the next reader builds again instead of waiting forever), and that a
// panic in the refresh loop's rebuild neither crashes the process nor
// keeps the old document.
func TestCache_BuildPanicIsAnErrorAndDoesNotHang(t *testing.T) {
	c, b := newTestCache(t, nil)
	b.panics.Store(true)
	if _, err := c.Get(kDelta); !errors.Is(err, ErrBuildPanic) {
		t.Fatalf("first read after a panicking build: %v, want ErrBuildPanic", err)
	}
	got := make(chan error, 1)
	go func() { _, err := c.Get(kDelta); got <- err }()
	select {
	case err := <-got:
		if !errors.Is(err, ErrBuildPanic) {
			t.Fatalf("second read: %v, want ErrBuildPanic again", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the read after a panicking build hangs")
	}
	b.panics.Store(false)
	if got := mustGet(t, c, kDelta); got != "delta//0@0" {
		t.Fatalf("after the bug is gone: %s", got)
	}

	// The refresh loop's rebuild of a readOnly document panics.
	mustGet(t, c, kAppA)
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	b.panics.Store(true)
	c.Refresh()
	if _, err := c.Get(kAppA); !errors.Is(err, ErrBuildPanic) {
		t.Fatalf("read after a refresh whose rebuild panicked: %v, want ErrBuildPanic (not the old document)", err)
	}
	b.panics.Store(false)
	if got := mustGet(t, c, kAppA); got != "app/A/0@1" {
		t.Fatalf("after the bug is gone: %s", got)
	}
}

func TestCache_RefreshWithoutChangesBuildsNothing(t *testing.T) {
	c, b := newTestCache(t, nil)
	for _, k := range []Key{kApps, kDelta, kAppA, kVIPx} {
		mustGet(t, c, k)
	}
	before := c.Stats().Builds
	for i := 0; i < 100; i++ {
		c.Refresh()
	}
	if c.Stats().Builds != before {
		t.Fatalf("refresh without changes rebuilt: %d -> %d", before, c.Stats().Builds)
	}
	_ = b
}

func TestCache_PreciseInvalidation(t *testing.T) {
	c, b := newTestCache(t, func(cfg *Config) { cfg.UseReadOnly = false })
	all := []Key{kApps, kDelta, kAppA, kAppB, kVIPx, kVIPy, kInstA, kInstB, kByID,
		{Entity: EntityApp, Name: "A", Format: 1}, {Entity: EntitySVIP, Name: "x"}}
	for _, k := range all {
		mustGet(t, c, k)
	}
	c.Invalidate(fsm.Change{Apps: []string{"A"}, VIPs: []string{"x"}})
	for _, k := range all {
		mustGet(t, c, k)
	}
	want := map[Key]int{kApps: 2, kDelta: 2, kAppA: 2, {Entity: EntityApp, Name: "A", Format: 1}: 2,
		kVIPx: 2, kInstA: 2, kByID: 2, // touched
		kAppB: 1, kVIPy: 1, kInstB: 1, {Entity: EntitySVIP, Name: "x"}: 1} // untouched
	for k, n := range want {
		if got := b.count(k); got != n {
			t.Errorf("%v built %d times, want %d", k, got, n)
		}
	}
}

func TestCache_RenewalsInvalidateNothing(t *testing.T) {
	c, b := newTestCache(t, nil)
	mustGet(t, c, kApps)
	c.Invalidate(fsm.Change{Index: 9, Type: fsm.CmdRenewBatch})
	c.Invalidate(fsm.Change{Index: 10, Type: fsm.CmdSetMember})
	c.Refresh()
	mustGet(t, c, kApps)
	if b.count(kApps) != 1 || c.Stats().Invalidations != 0 {
		t.Fatalf("renewal invalidated: builds %d stats %+v", b.count(kApps), c.Stats())
	}
}

func TestCache_RestoreInvalidatesEverything(t *testing.T) {
	c, b := newTestCache(t, func(cfg *Config) { cfg.UseReadOnly = false })
	mustGet(t, c, kVIPy)
	mustGet(t, c, kInstB)
	c.Invalidate(fsm.Change{All: true})
	mustGet(t, c, kVIPy)
	mustGet(t, c, kInstB)
	if b.count(kVIPy) != 2 || b.count(kInstB) != 2 {
		t.Fatal("restore must drop every key")
	}
}

func TestCache_Expiry(t *testing.T) {
	c, b := newTestCache(t, func(cfg *Config) { cfg.AutoExpiration = 30 * time.Millisecond })
	mustGet(t, c, kApps)
	time.Sleep(40 * time.Millisecond)
	c.Refresh() // the readOnly copy is older than the expiry: rebuilt
	if b.count(kApps) != 2 {
		t.Fatalf("expired entry was not rebuilt: %d builds", b.count(kApps))
	}
}

func TestCache_WithoutReadOnly(t *testing.T) {
	c, b := newTestCache(t, func(cfg *Config) { cfg.UseReadOnly = false })
	mustGet(t, c, kAppA)
	b.gen.Store(7)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	if got := mustGet(t, c, kAppA); got != "app/A/0@7" {
		t.Fatalf("readWrite-only reads must see an invalidation at once, got %s", got)
	}
	if st := c.Stats(); st.ReadOnlyHits+st.ReadOnlyMisses != 0 || st.ReadOnlyKeys != 0 {
		t.Fatalf("readOnly used: %+v", st)
	}
}

func TestCache_ErrorsAreNotCached(t *testing.T) {
	c, b := newTestCache(t, nil)
	b.fail["GONE"] = true
	k := Key{Entity: EntityApp, Name: "GONE"}
	for i := 0; i < 3; i++ {
		if _, err := c.Get(k); err == nil {
			t.Fatal("want error")
		}
	}
	if b.count(k) != 3 || c.Stats().ReadOnlyKeys != 0 {
		t.Fatalf("errors must not be cached: %d builds", b.count(k))
	}
}

func TestCache_GzipBuiltOnceAndValid(t *testing.T) {
	c, _ := newTestCache(t, nil)
	v, _ := c.Get(kApps)
	z1 := v.Gzip()
	d := v.gz
	if z2 := v.Gzip(); v.gz != d || !bytes.Equal(z1, z2) {
		t.Fatal("gzip built twice")
	}
	zr, err := gzip.NewReader(bytes.NewReader(z1))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Equal(plain, v.Bytes()) {
		t.Fatal("gzip does not round-trip")
	}
}

func TestCache_BoundedEntries(t *testing.T) {
	c, _ := newTestCache(t, func(cfg *Config) { cfg.MaxEntries = 100 })
	mustGet(t, c, kApps)
	for i := 0; i < 1000; i++ {
		mustGet(t, c, Key{Entity: EntityVIP, Name: fmt.Sprint("vip-", i)})
	}
	st := c.Stats()
	if st.ReadWriteKeys > 100 {
		t.Fatalf("cache grew to %d keys", st.ReadWriteKeys)
	}
	if c.rw[kApps] == nil {
		t.Fatal("registry-wide document was shed")
	}
	checkShedKeys(t, c)
}

// A cache holding more applications' documents than MaxEntries has
// nothing it may shed: a miss must not go through readWrite again each
// time to find that out, and a client-named key added later is still shed.
func TestCache_FullOfApplicationsDoesNotScanAtEveryMiss(t *testing.T) {
	const max = 100
	c, _ := newTestCache(t, func(cfg *Config) { cfg.MaxEntries = max })
	for i := range 2 * max {
		mustGet(t, c, Key{Entity: EntityApp, Name: fmt.Sprint("APP-", i)})
	}
	if c.shedVisited != 0 {
		t.Fatalf("%d misses over a full cache of applications went through %d entries looking for one to shed, want none",
			max, c.shedVisited)
	}
	checkShedKeys(t, c)
	for i := range 50 {
		mustGet(t, c, Key{Entity: EntityVIP, Name: fmt.Sprint("vip-", i)})
		checkShedKeys(t, c)
	}
	if c.shedVisited > 50 {
		t.Fatalf("50 VIP misses over a full cache went through %d entries, want the one VIP each found", c.shedVisited)
	}
	vips := 0
	for k := range c.rw {
		if k.Entity == EntityVIP {
			vips++
		}
	}
	if vips > 1 {
		t.Fatalf("%d VIP documents held in a cache full of applications, want at most the last one", vips)
	}
	for i := range 2 * max {
		if c.rw[Key{Entity: EntityApp, Name: fmt.Sprint("APP-", i)}] == nil {
			t.Fatalf("application APP-%d was shed", i)
		}
	}
}

// checkShedKeys checks the invariant of Cache.shedKeys: it holds exactly
// the client-named keys readWrite holds.
func checkShedKeys(t *testing.T, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k := range c.rw {
		if sheddable(k.Entity) {
			n++
			if _, ok := c.shedKeys[k]; !ok {
				t.Fatalf("readWrite holds %v, which shedKeys lacks", k)
			}
		}
	}
	if n != len(c.shedKeys) {
		t.Fatalf("shedKeys holds %d keys, readWrite %d client-named ones", len(c.shedKeys), n)
	}
}

// Random reads of every kind of key (some failing to build), invalidations
// and refreshes over a small cache keep shedKeys exactly the client-named
// keys readWrite holds, and those within the bound.
func TestCache_ShedKeysFollowReadWrite(t *testing.T) {
	const max = 20
	c, b := newTestCache(t, func(cfg *Config) { cfg.MaxEntries = max })
	rng := rand.New(rand.NewPCG(1, 2))
	apps := []string{"A", "B", "C"}
	for step := range 3000 {
		app := apps[rng.IntN(len(apps))]
		name := fmt.Sprint(rng.IntN(40))
		b.mu.Lock()
		b.fail[name] = rng.IntN(8) == 0
		b.mu.Unlock()
		switch rng.IntN(6) {
		case 0:
			_, _ = c.Get(Key{Entity: EntityVIP, Name: name})
		case 1:
			_, _ = c.Get(Key{Entity: EntityInstance, Name: InstanceName(app, name)})
		case 2:
			_, _ = c.Get(Key{Entity: EntityApp, Name: app + name})
		case 3:
			_, _ = c.Get(kApps)
		case 4:
			b.gen.Add(1)
			c.Invalidate(fsm.Change{Apps: []string{app}, VIPs: []string{name}})
		case 5:
			c.Refresh()
		}
		checkShedKeys(t, c)
		// Applications' documents are not shed, so readWrite may hold
		// more than the bound; the client-named keys may not, and past
		// the bound only the one just added stays.
		c.mu.Lock()
		n, shed := len(c.rw), len(c.shedKeys)
		c.mu.Unlock()
		if shed > max || (n > max && shed > 1) {
			t.Fatalf("step %d: readWrite holds %d keys, %d of them client-named (bound %d)", step, n, shed, max)
		}
	}
}

func TestCache_InstanceDocumentsSkipReadOnly(t *testing.T) {
	c, b := newTestCache(t, nil)
	mustGet(t, c, kInstA)
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	if got := mustGet(t, c, kInstA); got != "instance/A/1/0@1" {
		t.Fatalf("an instance read must see a change at once, got %s", got)
	}
}

func TestCache_InvalidationDuringBuildIsNotPublished(t *testing.T) {
	c, b := newTestCache(t, nil)
	release := make(chan struct{})
	started := make(chan struct{})
	var once sync.Once
	c.build = func(k Key) ([]Segment, uint64, error) {
		g := b.gen.Load() // the state this build reads...
		once.Do(func() { close(started); <-release })
		return PlainSegments([]byte(fmt.Sprintf("%s/%s/%d@%d", k.Entity, readableName(k), k.Format, g))), g, nil // ...is what it returns
	}
	done := make(chan string)
	go func() { done <- mustGet(t, c, kAppA) }()
	<-started
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	c.Refresh() // runs before the slow build publishes
	close(release)
	if got := <-done; got != "app/A/0@0" {
		t.Fatalf("first read: %s", got)
	}
	if got := mustGet(t, c, kAppA); got != "app/A/0@1" {
		t.Fatalf("a document built before an invalidation was published to readOnly: %s", got)
	}
}

// TestValue_MemoOncePerValue: Memo keeps what it derived with the value.
func TestValue_MemoOncePerValue(t *testing.T) {
	calls := 0
	derive := func(v *Value) any { calls++; return v.Len * 2 }
	v := NewValue(PlainSegments([]byte("abc"), []byte("de")), 7)
	for i := 0; i < 3; i++ {
		if got := v.Memo(derive).(int); got != 10 {
			t.Fatalf("Memo = %d, want 10", got)
		}
	}
	if calls != 1 {
		t.Errorf("derive ran %d times, want 1", calls)
	}
	if got := NewValue(PlainSegments([]byte("x")), 8).Memo(derive).(int); got != 2 || calls != 2 {
		t.Errorf("another value: Memo = %d after %d calls, want 2 after 2", got, calls)
	}
}
