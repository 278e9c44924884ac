// Package cache is heureka's two-level response cache, after eureka-server's
// ResponseCacheImpl: a readWrite level that builds finished response bytes
// on demand (one build per key at a time, expiring after a while), and a
// readOnly level, a plain concurrent map that readers try first. Invalidation
// is driven by the FSM's change notices and touches exactly the keys a change
// affects; renewals touch nothing. Unlike eureka-server, whose readOnly level
// changes only on a timer, the affected readOnly documents are rebuilt and
// swapped in right after each change (coalesced over a short window), so
// cached reads follow the registry within milliseconds; a document nobody
// read since its last build is dropped instead (refreshKey); the timer remains as
// an upper bound and, with the push turned off, as the only refresh
// (eureka-server's behaviour). Watch lets readers block until a document
// changes (push.go). A document is a list of segments, the large ones held
// compressed only (pieces the builder makes once and shares between
// documents): gzip answers write the pieces as they are (gzip.go), plain
// answers inflate them, and a document being read plain keeps a plain copy
// for a while, within a byte budget (plain.go). The package knows nothing
// of HTTP or of the Eureka encoding: the builder is injected. It imports
// fsm (change notices), internal/runtime/tick (the refresh loop) and opapi
// (its counters' wire type) only; it must not import httpapi or cluster.
package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
	"github.com/heureka-registry/heureka/opapi"
)

// Entity is the kind of document a key names.
type Entity uint8

// Entities, one per cached Eureka read.
const (
	EntityApps     Entity = iota // every application (GET /apps)
	EntityDelta                  // the delta (GET /apps/delta)
	EntityApp                    // one application (GET /apps/{app}); Name is the upper-cased app
	EntityVIP                    // one VIP (GET /vips/{vip}); Name is the VIP
	EntitySVIP                   // one secure VIP (GET /svips/{svip})
	EntityInstance               // one instance: Name is "APP/id" (GET /apps/{app}/{id}) or "/id" (GET /instances/{id})
	numEntities
)

var entityNames = [numEntities]string{"apps", "delta", "app", "vip", "svip", "instance"}

func (e Entity) String() string {
	if e < numEntities {
		return entityNames[e]
	}
	return fmt.Sprintf("entity(%d)", e)
}

// Key names one cached document. Format is opaque here (the codec's format
// number); gzip is not part of the key: a Value holds both encodings. The
// Name of a registry-wide document (EntityApps, EntityDelta) is empty for
// the local registry, or names the remote regions merged into it, sorted
// and comma-separated ("legacy,west").
type Key struct {
	Entity Entity
	Name   string
	Format uint8
}

// InstanceName is the Name of an EntityInstance key: the application's
// length, then the application and the id. A separator alone would be
// ambiguous: with strict input off, an application's name may hold any
// byte, and "A/B" with id "x" must not be application "A" with id "B/x".
func InstanceName(app, id string) string { return strconv.Itoa(len(app)) + ":" + app + id }

// SplitInstanceName reads the application and id of an InstanceName.
func SplitInstanceName(name string) (app, id string) {
	n, rest, _ := strings.Cut(name, ":")
	l, err := strconv.Atoi(n)
	if err != nil || l < 0 || l > len(rest) {
		return "", name // not an InstanceName
	}
	return rest[:l], rest[l:]
}

// Value is a finished document. Its body is the concatenation of
// Segments: documents share the compressed pieces of unchanged
// applications instead of each holding a copy, and no plain copy of a
// piece is kept with it (plain.go).
type Value struct {
	// Segments make up the body; they are never modified.
	Segments []Segment
	// Len is the body's (plain) length.
	Len int
	// Version is the registry version the document was built from.
	Version uint64
	// BuiltAt is when the build finished.
	BuiltAt time.Time

	// pieces says whether a segment is compressed: the plain body is
	// then inflated when read.
	pieces bool
	// plain keeps the plain copies of documents being read plain (the
	// cache's; nil for values built outside a cache).
	plain *plainKeeper

	// The gzip form, assembled on first use from the segments' pieces
	// (gzip.go).
	gzipOnce sync.Once
	gz       *gzDoc
	gzDone   atomic.Bool
	gzServed atomic.Bool // a reader asked for the gzip form
	onGzip   func(*Value, int)

	// read says a reader got the value from Get: the pusher and the
	// refresher rebuild only documents read since their last build
	// (refreshKey).
	read atomic.Bool

	// held and gzCounted are the cache's byte accounting (Cache.mu): held
	// while readWrite holds the value, gzCounted once its gzip form is
	// counted.
	held      bool
	gzCounted int

	// memo is what the serving layer derived from the value (Memo).
	memo atomic.Pointer[any]
}

// Memo returns what derive returns for v, computed once per value and kept
// with it: the serving layer keeps there what it would otherwise work out
// again on every read of the same document (its header values). derive
// must be a pure function of v; two readers racing may both call it, and
// one result is kept.
func (v *Value) Memo(derive func(*Value) any) any {
	if p := v.memo.Load(); p != nil {
		return *p
	}
	m := derive(v)
	if v.memo.CompareAndSwap(nil, &m) {
		return m
	}
	return *v.memo.Load()
}

// NewValue makes a value of segments.
func NewValue(segments []Segment, version uint64) *Value {
	v := &Value{Segments: segments, Version: version, BuiltAt: time.Now()}
	for _, s := range segments {
		v.Len += s.Len()
		v.pieces = v.pieces || s.p != nil
	}
	return v
}

// WriteTo writes the plain body, inflating the compressed segments as it
// goes (w should be buffered: pieces are inflated in small writes).
func (v *Value) WriteTo(w io.Writer) (int64, error) {
	return writePlain(w, v.Segments)
}

// PlainBytes returns the plain body as one slice when it is at hand
// without inflating it for this read alone: the only segment of a plain
// value, or the copy the cache keeps of a document being read plain
// (made by one inflate that concurrent readers share). It returns nil
// when the body is to be written with WriteTo (several plain segments, or
// a document the cache's plain budget cannot hold). The slice must not be
// modified.
func (v *Value) PlainBytes() []byte {
	if !v.pieces {
		if len(v.Segments) == 1 {
			return v.Segments[0].b
		}
		return nil
	}
	return v.plain.get(v)
}

// Bytes returns the plain body as one slice (a new one when the value
// has several segments or compressed ones).
func (v *Value) Bytes() []byte {
	if !v.pieces && len(v.Segments) == 1 {
		return v.Segments[0].b
	}
	buf := bytes.NewBuffer(make([]byte, 0, v.Len))
	if _, err := v.WriteTo(buf); err != nil {
		// Pieces are made here and never modified: a failure is a bug.
		panic(fmt.Sprintf("cache: plain body of a document: %v", err))
	}
	return buf.Bytes()
}

// GzipLen returns the length of the gzip-compressed body, assembling it
// on first use only. It and WriteGzipTo are what readers call: the cache
// keeps making the gzip form of a document's next builds ahead of time
// only while readers use it.
func (v *Value) GzipLen() int {
	return v.served().n
}

// WriteGzipTo writes the gzip-compressed body, piece by piece: the
// compressed bytes of the fragments are shared with other documents, and
// no finished copy of the whole is kept.
func (v *Value) WriteGzipTo(w io.Writer) (int64, error) {
	return writeParts(w, v.served().parts)
}

// GzipParts returns the slices that make up the gzip-compressed body, in
// order (for a vectored write). They are the document's own: neither the
// returned slice nor the slices in it may be modified.
func (v *Value) GzipParts() [][]byte {
	return v.served().parts
}

// Gzip returns the gzip-compressed body as one new slice (tests, and
// callers that need one; servers write it with WriteGzipTo).
func (v *Value) Gzip() []byte {
	d := v.served()
	return joinParts(d.parts, d.n)
}

// markRead records that a reader got v, and returns v.
func (v *Value) markRead() *Value {
	if !v.read.Load() { // read-mostly: no store on every call
		v.read.Store(true)
	}
	return v
}

func (v *Value) served() *gzDoc {
	if !v.gzServed.Load() { // read-mostly: no store on every call
		v.gzServed.Store(true)
	}
	return v.gzip()
}

func (v *Value) gzip() *gzDoc {
	v.gzipOnce.Do(func() {
		v.gz = gzipSegments(v.Segments)
		v.gzDone.Store(true)
		if v.onGzip != nil {
			v.onGzip(v, v.gz.n)
		}
	})
	return v.gz
}

// Builder builds the document for a key from the current registry, as
// segments whose concatenation is the body.
type Builder func(Key) (segments []Segment, version uint64, err error)

// Config tunes the cache.
type Config struct {
	// UpdateInterval is how often readOnly is refreshed from readWrite
	// as a whole: the upper bound on how stale it can be.
	UpdateInterval time.Duration
	// PushWindow bounds how often the affected registry-wide readOnly
	// documents (the full registry, the delta) are rebuilt after changes:
	// a change after a quiet window is pushed at once, later ones within
	// the window wait for its end and share one rebuild. Smaller documents
	// (an application's, a VIP's) are pushed after every change, paced by
	// their cost only. 0 turns the push off: readOnly then changes only
	// every UpdateInterval, exactly as in eureka-server.
	PushWindow time.Duration
	// AutoExpiration is how long a readWrite entry lives after its build.
	AutoExpiration time.Duration
	// UseReadOnly sends reads to readOnly first; false reads readWrite only.
	UseReadOnly bool
	// Formats is how many formats keys can have (invalidation covers each).
	Formats uint8
	// MaxEntries bounds the number of keys held (VIP names come from clients).
	MaxEntries int
	// PlainBudget bounds the bytes of the plain copies kept of documents
	// read without gzip (plain.go); a document that does not fit is
	// inflated per read. 0 keeps none.
	PlainBudget int
	// PlainKeep is how long a plain copy outlives its last read.
	PlainKeep time.Duration
}

// DefaultConfig returns eureka-server's defaults, and heureka's for the
// plain copies (plain.go): a copy outlives its last read by 10 s, a third
// of a Eureka client's polling interval, so that a fleet of plain readers
// keeps it and a lone one pays one inflate per poll (about 8 ms for the
// full registry of 10,000 instances); 128 MiB holds the full registry of
// 50,000 instances in JSON, and bounds what plain readers can make a node
// hold.
func DefaultConfig() Config {
	return Config{UpdateInterval: 30 * time.Second, PushWindow: 50 * time.Millisecond, AutoExpiration: 180 * time.Second,
		UseReadOnly: true, Formats: 2, MaxEntries: 50000, PlainBudget: 128 << 20, PlainKeep: 10 * time.Second}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.UpdateInterval <= 0 || c.AutoExpiration <= 0 {
		return errors.New("cache intervals must be positive")
	}
	if c.PushWindow < 0 {
		return errors.New("cache push window must not be negative")
	}
	if c.PlainBudget < 0 || c.PlainKeep < 0 {
		return errors.New("cache plain budget and keep must not be negative")
	}
	if c.Formats == 0 || c.MaxEntries <= 0 {
		return errors.New("cache formats and max entries must be positive")
	}
	return nil
}

// entry is one readWrite slot; ready closes when the build finishes. val
// and err are written under Cache.mu before ready closes: read them under
// the lock, or without it once ready is closed.
type entry struct {
	ready chan struct{}
	val   *Value
	err   error
}

// Cache is the two-level response cache.
type Cache struct {
	cfg   Config
	build Builder
	log   hclog.Logger

	mu sync.Mutex
	rw map[Key]*entry
	// plain keeps the plain copies of documents being read plain
	// (plain.go).
	plain *plainKeeper
	// instKeys indexes the instance keys per application for invalidation.
	instKeys map[string]map[Key]struct{}
	// dirty is set by invalidation and cleared by the refresher.
	dirty bool
	// shedKeys are the client-named keys (sheddable) readWrite holds,
	// which shedLocked drops when readWrite is full. Kept apart because
	// a cache full of applications' documents, which it may not shed,
	// went through the whole map under mu at every miss looking for
	// them: with 50,000 applications the refresh's rebuilds did that
	// 50,000 times each (BENCHMARKS.md, "The million with `heureka
	// serve`'s defaults, every node"). Invariant: a key is here exactly
	// while readWrite holds it and it is sheddable.
	shedKeys map[Key]struct{}
	// shedVisited counts the entries shedLocked went through (the tests).
	shedVisited int

	ro sync.Map // Key -> *Value

	// lanes push changes into readOnly: one for the documents of single
	// applications, VIPs and instances, one for the registry-wide
	// documents, so that a small document is never held up behind the
	// full registry's rebuild (push.go).
	lanes [numLanes]*lane

	// wmu guards watchers: one channel per topic, closed when the topic's
	// documents change (push.go).
	wmu      sync.Mutex
	watchers map[topic]chan struct{}

	// regionSets are the names of the registry-wide documents with
	// remote regions ever requested ("east,west"; see Key), which a change
	// reaches besides the local ones (registryNames).
	rsMu       sync.RWMutex
	regionSets map[string]struct{}

	stats counters
	stop  chan struct{}
	done  chan struct{}
}

type counters struct {
	roHits, roMisses, rwHits, rwMisses atomic.Uint64
	builds, buildErrors, buildNanos    atomic.Uint64
	invalidations, refreshes, pushes   atomic.Uint64
	bytes                              atomic.Int64
}

// New starts a cache; Close stops its refresher.
func New(cfg Config, build Builder, log hclog.Logger) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	c := &Cache{cfg: cfg, build: build, log: log.Named("cache"), rw: map[Key]*entry{}, shedKeys: map[Key]struct{}{},
		plain:    newPlainKeeper(cfg.PlainBudget, cfg.PlainKeep),
		instKeys: map[string]map[Key]struct{}{}, watchers: map[topic]chan struct{}{}, regionSets: map[string]struct{}{},
		stop: make(chan struct{}), done: make(chan struct{})}
	for i := range c.lanes {
		c.lanes[i] = newLane(i)
		go c.pushLoop(c.lanes[i])
	}
	go c.refreshLoop()
	return c, nil
}

// Close stops the refresher and the pushers.
func (c *Cache) Close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
	for _, l := range c.lanes {
		<-l.done
	}
	c.plain.close()
}

// Get returns the document for key: from readOnly if enabled and present,
// else from readWrite, building it if needed. Concurrent misses on one key
// wait for a single build.
//
// Instance documents skip readOnly: clients read them to learn whether they
// are registered (fargo skips registering on a 200), so they must reflect a
// cancel at once; readWrite's precise invalidation gives exactly that.
func (c *Cache) Get(key Key) (*Value, error) {
	if key.Name != "" && (key.Entity == EntityApps || key.Entity == EntityDelta) {
		c.noteRegionSet(key.Name)
	}
	useRO := c.cfg.UseReadOnly && key.Entity != EntityInstance
	if useRO {
		if v, ok := c.ro.Load(key); ok {
			c.stats.roHits.Add(1)
			return v.(*Value).markRead(), nil
		}
		c.stats.roMisses.Add(1)
	}
	v, err := c.getRW(key, true)
	if err != nil {
		return nil, err
	}
	v.markRead()
	if useRO {
		// Publish to readOnly only if no invalidation came while building:
		// a refresh that ran meanwhile did not see this key, so a stale
		// value stored now would outlive the change.
		c.mu.Lock()
		if e := c.rw[key]; e != nil && e.val == v {
			c.ro.Store(key, v)
		}
		c.mu.Unlock()
	}
	return v, nil
}

// getRW returns the readWrite value for key, building it when it is absent
// or expired. count says whether to count the access in the stats.
func (c *Cache) getRW(key Key, count bool) (*Value, error) {
	c.mu.Lock()
	e := c.rw[key]
	if e != nil {
		select {
		case <-e.ready:
			if e.err == nil && time.Since(e.val.BuiltAt) < c.cfg.AutoExpiration {
				v := e.val
				c.mu.Unlock()
				if count {
					c.stats.rwHits.Add(1)
				}
				return v, nil
			}
			c.dropLocked(key, e) // expired or failed: build again
		default:
			// A build is under way: wait for it rather than build twice.
			c.mu.Unlock()
			if count {
				c.stats.rwHits.Add(1)
			}
			<-e.ready
			return e.val, e.err
		}
	}
	if count {
		c.stats.rwMisses.Add(1)
	}
	if len(c.rw) >= c.cfg.MaxEntries {
		c.shedLocked()
	}
	e = &entry{ready: make(chan struct{})}
	c.rw[key] = e
	if sheddable(key.Entity) {
		c.shedKeys[key] = struct{}{}
	}
	if key.Entity == EntityInstance {
		app, _ := SplitInstanceName(key.Name)
		if c.instKeys[app] == nil {
			c.instKeys[app] = map[Key]struct{}{}
		}
		c.instKeys[app][key] = struct{}{}
	}
	c.mu.Unlock()

	start := time.Now()
	segments, version, err := c.safeBuild(key)
	c.stats.builds.Add(1)
	c.stats.buildNanos.Add(uint64(time.Since(start)))
	var val *Value
	if err != nil {
		c.stats.buildErrors.Add(1)
	} else {
		val = NewValue(segments, version)
		val.onGzip, val.plain = c.countGzip, c.plain
	}
	c.mu.Lock()
	e.val, e.err = val, err
	current := c.rw[key] == e
	switch {
	case err != nil && current:
		c.forgetLocked(key) // errors (404s) are not cached
	case err == nil && current:
		// Counted only while held: an entry invalidated mid-build is
		// already gone from readWrite and never enters the statistic.
		val.held = true
		c.stats.bytes.Add(int64(val.Len))
	}
	close(e.ready)
	c.mu.Unlock()
	return val, err
}

// ErrBuildPanic marks a build that panicked: a bug, answered as an internal
// error, with the panic and its stack in the error for the log.
var ErrBuildPanic = errors.New("document build panicked")

// safeBuild runs the build, turning a panic into an error. A build runs on
// a reader's request or in the refresh and push loops: a panic must neither
// take the node down from a loop nor leave its entry unfinished, which
// would hang every later reader of that document on the entry's ready
// channel.
func (c *Cache) safeBuild(key Key) (segments []Segment, version uint64, err error) {
	defer func() {
		if v := recover(); v != nil {
			segments, version = nil, 0
			err = fmt.Errorf("build %v %q: %w: %v\n%s", key.Entity, key.Name, ErrBuildPanic, v, debug.Stack())
		}
	}()
	return c.build(key)
}

// countGzip counts a value's gzip copy if readWrite still holds the value.
func (c *Cache) countGzip(v *Value, n int) {
	c.mu.Lock()
	if v.held && v.gzCounted == 0 {
		v.gzCounted = n
		c.stats.bytes.Add(int64(n))
	}
	c.mu.Unlock()
}

// shedLocked drops readWrite entries for client-named keys (VIPs and
// instances) when the cache is full, so hostile names cannot grow it
// without bound. The registry's own documents (the full registry, the
// delta, each application's) are never shed: their number is the
// registry's.
func (c *Cache) shedLocked() {
	for k := range c.shedKeys {
		c.shedVisited++
		if e := c.rw[k]; e != nil {
			c.dropLocked(k, e)
		} else {
			// Not while the invariant holds (the tests check it); a
			// broken one costs a stale key, not a panic under mu.
			c.forgetLocked(k)
		}
		c.ro.Delete(k)
		if len(c.rw) < c.cfg.MaxEntries*9/10 {
			return
		}
	}
}

// sheddable reports whether documents of entity e are named by clients
// (VIPs and instances), and so may be shed when the cache is full.
func sheddable(e Entity) bool {
	return e == EntityVIP || e == EntitySVIP || e == EntityInstance
}

// dropLocked removes k's entry from readWrite and its bytes from the
// statistic. c.mu must be held.
func (c *Cache) dropLocked(k Key, e *entry) {
	if c.rw[k] == e {
		c.forgetLocked(k)
	}
	if v := e.val; v != nil && v.held {
		c.stats.bytes.Add(-int64(v.Len + v.gzCounted))
		v.held, v.gzCounted = false, 0
	}
}

// forgetLocked removes k from readWrite. c.mu must be held.
func (c *Cache) forgetLocked(k Key) {
	delete(c.rw, k)
	delete(c.shedKeys, k)
	if k.Entity == EntityInstance {
		app, _ := SplitInstanceName(k.Name)
		if ks := c.instKeys[app]; ks != nil {
			delete(ks, k)
			if len(ks) == 0 {
				delete(c.instKeys, app)
			}
		}
	}
}

// Invalidate drops the readWrite entries a registry change affects: the
// applications it touched, the full registry, the delta, the VIPs and
// secure VIPs (each one, not the comma-separated list), and the instance
// keys of those applications. readOnly keeps serving the old documents until
// the pusher rebuilds the affected ones, within PushWindow (or, with the push
// off, until the next refresh, as in Eureka). Changes without content
// (renewals, membership) invalidate nothing.
func (c *Cache) Invalidate(ch fsm.Change) {
	if ch.Empty() {
		return
	}
	c.stats.invalidations.Add(1)
	c.invalidateRW(ch)
	c.changed(ch)
}

func (c *Cache) invalidateRW(ch fsm.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dirty = true
	if ch.All {
		for k, e := range c.rw {
			c.dropLocked(k, e)
		}
		clear(c.instKeys)
		return
	}
	drop := func(ent Entity, name string) {
		for f := uint8(0); f < c.cfg.Formats; f++ {
			k := Key{Entity: ent, Name: name, Format: f}
			if e := c.rw[k]; e != nil {
				c.dropLocked(k, e)
			}
		}
	}
	for _, name := range c.registryNames(ch) {
		drop(EntityApps, name)
		drop(EntityDelta, name)
	}
	for _, a := range ch.Apps {
		drop(EntityApp, a)
		for k := range c.instKeys[a] {
			if e := c.rw[k]; e != nil {
				c.dropLocked(k, e)
			}
		}
		delete(c.instKeys, a)
	}
	// Lookups by id alone may resolve to any application.
	for k := range c.instKeys[""] {
		if e := c.rw[k]; e != nil {
			c.dropLocked(k, e)
		}
	}
	delete(c.instKeys, "")
	for _, v := range ch.VIPs {
		drop(EntityVIP, v)
	}
	for _, v := range ch.SVIPs {
		drop(EntitySVIP, v)
	}
}

// Reset drops every document, in both levels: what is read next is built
// from the registry as it is now. Watchers are not woken: the changes that
// made the old documents old woke theirs already. The node calls
// it when its read gate opens after a catch-up, so that nothing built while
// it was behind is served as current. Holding every lane keeps a refresh or
// push from storing a document it built before the reset.
func (c *Cache) Reset() {
	for _, l := range c.lanes {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	c.invalidateRW(fsm.Change{All: true})
	c.ro.Range(func(k, v any) bool {
		c.ro.Delete(k)
		c.plain.drop(v.(*Value))
		return true
	})
}

// refreshLoop copies readWrite into readOnly every UpdateInterval. When
// nothing was invalidated and nothing expired since the last pass, a pass
// costs one lock and one comparison.
func (c *Cache) refreshLoop() {
	defer close(c.done)
	if !c.cfg.UseReadOnly {
		<-c.stop
		return
	}
	tick.Every(c.stop, c.cfg.UpdateInterval, c.Refresh)
}

// Refresh brings readOnly up to date with readWrite now (the timer calls it;
// tests may too). Documents that readWrite no longer holds are rebuilt here,
// off the request path. Watchers of the changes it covers are woken.
func (c *Cache) Refresh() {
	for _, l := range c.lanes { // lane order: small, then registry-wide
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	topics, all := map[topic]struct{}{}, false
	for _, l := range c.lanes {
		ts, a := l.take()
		maps.Copy(topics, ts)
		all = all || a
	}
	c.mu.Lock()
	dirty := c.dirty
	c.dirty = false
	c.mu.Unlock()
	expiredBefore := time.Now().Add(-c.cfg.AutoExpiration)
	c.ro.Range(func(k, v any) bool {
		key, old := k.(Key), v.(*Value)
		if !dirty && old.BuiltAt.After(expiredBefore) {
			return true
		}
		if c.refreshKey(key, old) {
			topics[topicOf(key)] = struct{}{}
		}
		return true
	})
	// Pacing records of documents readOnly no longer holds (shed, or gone
	// when their rebuild failed) would otherwise stay until their topic
	// changes: for a client-named VIP, never.
	for _, l := range c.lanes {
		for k := range l.pace {
			if _, ok := c.ro.Load(k); !ok {
				delete(l.pace, k)
			}
		}
	}
	c.stats.refreshes.Add(1)
	c.notify(topics, all)
}

// refreshKey rebuilds one readOnly document (its lane's mu held), if a
// reader got it since its last build. One nobody read is dropped instead,
// from both levels: the next reader builds it on its request. Under a
// stream of changes a registry-wide document read once a minute would
// otherwise be rebuilt every push window, each rebuild taking a core's
// milliseconds from the readers that do come (the blocking readers of an
// application wait behind it), and a document read once would be kept,
// and rebuilt on every expiry, for as long as the node runs. A rebuilt
// document whose gzip form a reader used gets the new one made here too,
// so that the first gzip reader after a change does not pay for it; one
// whose gzip form nobody read since the last rebuild does not (under a
// stream of changes, the full registry would otherwise be recompressed for
// no reader).
//
// It reports whether readOnly serves something else for key since (a new
// document, or none): with the push off, Refresh wakes those watchers, or
// a change that lands during the pass would be served without waking
// them until the next one.
func (c *Cache) refreshKey(key Key, old *Value) (published bool) {
	lane := c.lanes[laneOf(topicOf(key))]
	if old != nil && !old.read.Load() {
		c.mu.Lock()
		e := c.rw[key]
		held := e != nil && e.val == old
		if held && time.Since(old.BuiltAt) < c.cfg.AutoExpiration {
			c.mu.Unlock()
			return false // still current: nothing to rebuild or drop
		}
		if held {
			c.dropLocked(key, e)
		}
		c.mu.Unlock()
		c.ro.CompareAndDelete(key, old)
		c.plain.drop(old)
		delete(lane.pace, key)
		return true
	}
	start := time.Now()
	nv, err := c.getRW(key, false)
	switch {
	case err != nil:
		c.ro.Delete(key) // e.g. the application is gone: readers get the 404 from readWrite
		c.plain.drop(old)
		delete(lane.pace, key)
		return true
	case nv != old:
		if old != nil && old.gzServed.Load() {
			nv.gzip()
		}
		c.ro.Store(key, nv)
		c.plain.drop(old) // readers now get nv: its own copy is made on its first plain read
		published = true
	}
	lane.pace[key] = pace{at: start, cost: time.Since(start)}
	return published
}

// Stats is a point-in-time copy of the cache counters.
type Stats = opapi.CacheStats

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	rwKeys := len(c.rw)
	c.mu.Unlock()
	roKeys := 0
	c.ro.Range(func(any, any) bool { roKeys++; return true })
	return Stats{
		ReadOnlyHits: c.stats.roHits.Load(), ReadOnlyMisses: c.stats.roMisses.Load(),
		ReadWriteHits: c.stats.rwHits.Load(), ReadWriteMisses: c.stats.rwMisses.Load(),
		Builds: c.stats.builds.Load(), BuildErrors: c.stats.buildErrors.Load(),
		BuildSeconds:  float64(c.stats.buildNanos.Load()) / 1e9,
		Invalidations: c.stats.invalidations.Load(), Refreshes: c.stats.refreshes.Load(), Pushes: c.stats.pushes.Load(),
		ReadWriteKeys: rwKeys, ReadOnlyKeys: roKeys, Bytes: c.stats.bytes.Load(),
	}
}

// noteRegionSet records a registry-wide document name with remote regions.
func (c *Cache) noteRegionSet(name string) {
	c.rsMu.RLock()
	_, ok := c.regionSets[name]
	c.rsMu.RUnlock()
	if !ok {
		c.rsMu.Lock()
		c.regionSets[name] = struct{}{}
		c.rsMu.Unlock()
	}
}

// registryNames lists the names of the registry-wide documents a change
// reaches: a local change reaches the local one and every one with remote
// regions (they merge the local registry); a change to a remote region's
// copy reaches those that merge that region only.
func (c *Cache) registryNames(ch fsm.Change) []string {
	c.rsMu.RLock()
	defer c.rsMu.RUnlock()
	var names []string
	if ch.Region == "" {
		names = append(names, "")
	}
	for set := range c.regionSets {
		if ch.Region == "" || slices.Contains(strings.Split(set, ","), ch.Region) {
			names = append(names, set)
		}
	}
	return names
}
