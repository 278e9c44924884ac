package cache

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// Instance lookups of ids that do not exist (404s, not cached) under an
// application that never changes must not grow the cache without bound.
func TestCache_InstanceIndexForgetsWhatItSheds(t *testing.T) {
	const max = 100
	c, b := newTestCache(t, func(cfg *Config) { cfg.MaxEntries = max })
	for i := range 10 * max {
		id := fmt.Sprint("nope-", i)
		b.mu.Lock()
		b.fail[InstanceName("A", id)] = true
		b.mu.Unlock()
		if _, err := c.Get(Key{Entity: EntityInstance, Name: InstanceName("A", id)}); err == nil {
			t.Fatal("want a 404")
		}
		// and successful ones, shed when the cache is full
		_, _ = c.Get(Key{Entity: EntityInstance, Name: InstanceName("B", id)})
	}
	c.mu.Lock()
	n := 0
	for _, ks := range c.instKeys {
		n += len(ks)
	}
	rw := len(c.rw)
	c.mu.Unlock()
	if n > max {
		t.Fatalf("instKeys indexes %d instance keys (readWrite holds %d, bound %d)", n, rw, max)
	}
}

// Client-named documents shed from a full cache must not leave their
// pacing records behind: VIP names come from clients.
func TestCache_PacingForgetsShedDocuments(t *testing.T) {
	const max = 50
	c, _ := newTestCache(t, func(cfg *Config) { cfg.MaxEntries = max })
	for round := range 40 {
		for i := range max {
			mustGet(t, c, Key{Entity: EntityVIP, Name: fmt.Sprint("vip-", round, "-", i)})
		}
		c.Invalidate(fsm.Change{Apps: []string{"OTHER"}}) // any change: the refresh then goes through readOnly
		c.Refresh()
	}
	l := c.lanes[laneSmall]
	l.mu.Lock()
	n := len(l.pace)
	l.mu.Unlock()
	if n > 2*max {
		t.Fatalf("the small lane keeps %d pacing records for a cache of %d entries", n, max)
	}
}

// With the push off, instance documents still come from readWrite, which
// Invalidate updates at once: their watchers must be woken then, not at the
// next refresh (Watch: "for documents served from readWrite, readWrite").
func TestCache_InstanceWatcherWokenAtOnceWithPushOff(t *testing.T) {
	c, b := newTestCache(t, nil) // PushWindow 0, UseReadOnly
	mustGet(t, c, kInstA)
	ch := c.Watch(kInstA)
	b.gen.Store(1)
	c.Invalidate(fsm.Change{Apps: []string{"A"}})
	if got := mustGet(t, c, kInstA); got != "instance/A/1/0@1" {
		t.Fatalf("instance read: %s", got)
	}
	select {
	case <-ch:
	case <-time.After(time.Second):
		t.Fatal("the instance document changed, its watcher still waits (until the next refresh, UpdateInterval)")
	}
}

// A blocking read of a client-named document takes a channel and, once its
// wait ends, leaves: the channels of documents that never change must not
// pile up (VIP names and instance ids come from clients).
func TestCache_WatchChannelsForClientNamesAreBounded(t *testing.T) {
	const max = 100
	c, _ := newTestCache(t, func(cfg *Config) { cfg.MaxEntries = max })
	for i := range 100 * max {
		k := Key{Entity: EntityVIP, Name: fmt.Sprint("vip-", i)}
		_ = c.Watch(k) // the reader's wait times out; nothing ever changes this VIP
		_, _ = c.Get(k)
	}
	c.wmu.Lock()
	n := len(c.watchers)
	c.wmu.Unlock()
	if n > max {
		t.Fatalf("%d watch channels kept for documents nobody waits on (cache bound %d)", n, max)
	}
}

// With the push off, a refresh pass that publishes a newer document must
// wake that document's watchers, also when the change came in during the
// pass (after it took the pending topics): otherwise a blocking reader
// sleeps through a change readOnly already serves, until the next refresh.
func TestCache_RefreshWakesWatchersOfWhatItPublished(t *testing.T) {
	for attempt := range 40 {
		c, b := newTestCache(t, nil) // push off
		var block atomic.Bool
		started, release := make(chan struct{}), make(chan struct{})
		c.build = func(k Key) ([]Segment, uint64, error) {
			g := b.gen.Load() // the state this build reads
			if k == kApps && block.CompareAndSwap(true, false) {
				close(started)
				<-release
			}
			return PlainSegments([]byte(fmt.Sprintf("%s/%s/%d@%d", k.Entity, readableName(k), k.Format, g))), g, nil
		}
		mustGet(t, c, kApps)
		mustGet(t, c, kAppA)
		b.gen.Store(1)
		c.Invalidate(fsm.Change{Apps: []string{"B"}}) // makes the next refresh rebuild the full registry
		ch := c.Watch(kAppA)                          // a blocking reader of A, holding A@0
		block.Store(true)
		done := make(chan struct{})
		go func() { c.Refresh(); close(done) }()
		<-started // the refresh is rebuilding the full registry
		b.gen.Store(2)
		c.Invalidate(fsm.Change{Apps: []string{"A"}}) // A changes during the pass
		close(release)
		<-done
		v, _ := c.ro.Load(kAppA)
		if got := string(v.(*Value).Bytes()); got != "app/A/0@2" {
			c.Close()
			continue // the pass went through A before the change: nothing published, try again
		}
		select {
		case <-ch:
			t.Logf("attempt %d: woken", attempt)
			return
		default:
			t.Fatalf("readOnly serves A@2 since this refresh, but A's watcher is not woken until the next one (UpdateInterval)")
		}
	}
	t.Skip("the refresh never went through the full registry before A")
}

// An instance's name keeps its application and id apart whatever bytes
// they hold.
func TestInstanceName_SplitsAsMade(t *testing.T) {
	for _, c := range [][2]string{{"A", "1"}, {"A/B", "x"}, {"A", "B/x"}, {"", "id"}, {"12:x", ":3"}, {"APP", ""}} {
		if app, id := SplitInstanceName(InstanceName(c[0], c[1])); app != c[0] || id != c[1] {
			t.Errorf("%q, %q came back as %q, %q", c[0], c[1], app, id)
		}
	}
	if InstanceName("A/B", "x") == InstanceName("A", "B/x") {
		t.Error("two instances share a name")
	}
}
