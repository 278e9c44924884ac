package cache

import (
	"sync"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// topic is what a change touches and a watcher waits on: one document in
// every format (entity and name), or, for instance documents, every
// instance of one application (Name is the application; "" stands for the
// lookups by id alone, which any change may affect).
type topic struct {
	entity Entity
	name   string
}

func topicOf(k Key) topic {
	if k.Entity == EntityInstance {
		app, _ := SplitInstanceName(k.Name)
		return topic{EntityInstance, app}
	}
	return topic{k.Entity, k.Name}
}

// pace is the last rebuild of a readOnly key by a refresh pass.
type pace struct {
	at   time.Time
	cost time.Duration
}

// Pacing bounds the share of a core the pusher spends on one key: a key
// whose rebuild took d is rebuilt again no sooner than pace × d after the
// last rebuild started, pace being the lane's. In the wide lane (8) a large
// gzip-served full registry under a stream of changes is rebuilt every few
// hundred milliseconds instead of once per change, keeping read throughput
// where it was. In the small lane (1) an application's document follows
// every pass unless its rebuild took longer than the time since the last
// one: a rebuild's measured cost includes waiting for the builder's lock
// while a registry-wide document is built, and eight times that held
// blocking readers of a busy application back by tens of milliseconds.
var lanePace = [numLanes]time.Duration{laneSmall: 1, laneWide: 8}

// maxPaceDelay caps the pacing delay, whatever a rebuild cost: an unmarked
// read must hold every write acknowledged more than a second before it, so
// a document may not wait out eight times a slow build (130 ms on a loaded
// machine kept the full registry a second behind). A key is then at most
// this much plus one pass behind its last change; under a stream of
// changes an expensive document costs more of a core instead.
const maxPaceDelay = 250 * time.Millisecond

// paceDelay is how long after a rebuild costing cost a key of lane idx may
// be rebuilt again.
func paceDelay(idx int, cost time.Duration) time.Duration {
	return min(lanePace[idx]*cost, maxPaceDelay)
}

// Lanes: registry-wide documents (the full registry, the delta) cost far
// more to rebuild than one application's; each kind has its own pusher.
const (
	laneSmall = iota
	laneWide
	numLanes
)

func laneOf(t topic) int {
	if t.entity == EntityApps || t.entity == EntityDelta {
		return laneWide
	}
	return laneSmall
}

// lane is one pusher's state.
type lane struct {
	idx int // laneSmall or laneWide
	// mu serializes the lane's passes (Refresh takes every lane's); pace
	// is the last rebuild of each of the lane's readOnly keys (mu).
	mu   sync.Mutex
	pace map[Key]pace
	// pmu guards the topics changed since their documents were last
	// pushed (all: every topic); kick wakes the pusher.
	pmu     sync.Mutex
	pending map[topic]struct{}
	all     bool
	kick    chan struct{}
	done    chan struct{}
}

func newLane(idx int) *lane {
	return &lane{idx: idx, pace: map[Key]pace{}, pending: map[topic]struct{}{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// take returns and clears the pending topics.
func (l *lane) take() (map[topic]struct{}, bool) {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	ts, all := l.pending, l.all
	l.pending, l.all = map[topic]struct{}{}, false
	return ts, all
}

func (l *lane) wake() {
	select {
	case l.kick <- struct{}{}:
	default: // a pass is already due; it will see the new topics
	}
}

// changed records the topics of a change for the pushers and wakes them.
// With the readOnly level off, reads come from readWrite, which Invalidate
// has already updated: watchers are woken at once.
func (c *Cache) changed(ch fsm.Change) {
	if !c.cfg.UseReadOnly {
		if ch.All {
			c.notify(nil, true)
		} else {
			c.notifyList(c.changeTopics(ch))
		}
		return
	}
	var topics []topic
	if !ch.All {
		topics = c.changeTopics(ch)
	}
	for i, l := range c.lanes {
		l.pmu.Lock()
		if ch.All {
			l.all = true
		} else {
			for _, t := range topics {
				if laneOf(t) == i {
					l.pending[t] = struct{}{}
				}
			}
		}
		l.pmu.Unlock()
		if c.cfg.PushWindow > 0 {
			l.wake()
		}
	}
	if c.cfg.PushWindow <= 0 && !ch.All {
		// Without the push the topics queued above wait for the next
		// Refresh; instance documents skip readOnly, so a read already
		// sees the change: their watchers wake now.
		var ts []topic
		for _, t := range topics {
			if t.entity == EntityInstance {
				ts = append(ts, t)
			}
		}
		c.notifyList(ts)
	}
}

// changeTopics lists the topics a change touches.
func (c *Cache) changeTopics(ch fsm.Change) []topic {
	names := c.registryNames(ch)
	ts := make([]topic, 0, 1+2*len(names)+2*len(ch.Apps)+len(ch.VIPs)+len(ch.SVIPs))
	for _, n := range names {
		ts = append(ts, topic{EntityApps, n}, topic{EntityDelta, n})
	}
	ts = append(ts, topic{EntityInstance, ""})
	for _, a := range ch.Apps {
		ts = append(ts, topic{EntityApp, a}, topic{EntityInstance, a})
	}
	for _, v := range ch.VIPs {
		ts = append(ts, topic{EntityVIP, v})
	}
	for _, v := range ch.SVIPs {
		ts = append(ts, topic{EntitySVIP, v})
	}
	return ts
}

// pushLoop runs a push pass of lane l after a change, and again when a pass
// left paced keys for later.
func (c *Cache) pushLoop(l *lane) {
	defer close(l.done)
	if c.cfg.PushWindow <= 0 || !c.cfg.UseReadOnly {
		<-c.stop
		return
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	sleep := func(d time.Duration) bool {
		t.Reset(d)
		select {
		case <-c.stop:
			t.Stop()
			return false
		case <-t.C:
			return true
		}
	}
	// Passes run at most once per window, on the window's leading edge: a
	// change after a quiet spell is pushed at once, and the changes that
	// follow it within the window wait for its end and share one pass.
	window := c.window(l)
	var last time.Time // when the last pass ended
	for {
		select {
		case <-c.stop:
			return
		case <-l.kick:
		}
		if wait := window - time.Since(last); wait > 0 && !sleep(wait) {
			return
		}
		for next := c.push(l); next > 0; next = c.push(l) {
			if !sleep(max(next, window)) {
				return
			}
		}
		last = time.Now()
	}
}

// window is lane l's push window. The small lane has none: an
// application's document is rebuilt after every change, as soon as the
// previous pass ended and its pacing allows, since under a stream of
// changes a window of 2 ms held each change up to 2 ms for a rebuild that
// costs tens of microseconds; passes still run one at a time, so changes
// that arrive during one share the next. The wide lane's documents cost
// milliseconds and keep the window.
func (c *Cache) window(l *lane) time.Duration {
	if l.idx == laneSmall {
		return 0
	}
	return c.cfg.PushWindow
}

// push rebuilds the readOnly documents of lane l's pending topics and
// wakes their watchers, each topic's as soon as its documents are in. A
// topic with a key rebuilt too recently for its cost (paceDelay) stays
// pending, untouched; push returns how long until the first such key is
// due (0 when none is left).
func (c *Cache) push(l *lane) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	topics, all := l.take()
	if all {
		// A restore replaced everything: rebuild every readOnly document
		// of the lane.
		c.ro.Range(func(k, v any) bool {
			if key := k.(Key); laneOf(topicOf(key)) == l.idx {
				c.refreshKey(key, v.(*Value))
			}
			return true
		})
		c.stats.pushes.Add(1)
		c.notify(nil, true)
		return 0
	}
	if len(topics) == 0 {
		return 0
	}
	now := time.Now()
	var wait time.Duration
	var later []topic
	for t := range topics {
		due := true
		for f := uint8(0); f < c.cfg.Formats; f++ {
			k := Key{Entity: t.entity, Name: t.name, Format: f}
			if p, ok := l.pace[k]; ok {
				if left := p.at.Add(paceDelay(l.idx, p.cost)).Sub(now); left > 0 {
					due = false
					if wait == 0 || left < wait {
						wait = left
					}
				}
			}
		}
		if !due {
			later = append(later, t)
			continue
		}
		if t.entity != EntityInstance { // instance documents live in readWrite only
			for f := uint8(0); f < c.cfg.Formats; f++ {
				k := Key{Entity: t.entity, Name: t.name, Format: f}
				if v, ok := c.ro.Load(k); ok {
					c.refreshKey(k, v.(*Value))
				} else {
					delete(l.pace, k)
				}
			}
		}
		c.notifyList([]topic{t})
	}
	c.stats.pushes.Add(1)
	if len(later) > 0 {
		l.pmu.Lock()
		for _, t := range later {
			l.pending[t] = struct{}{}
		}
		l.pmu.Unlock()
	}
	return wait
}

// Watch returns a channel closed once the document of key may have changed:
// when readOnly (or, for documents served from readWrite, readWrite) holds
// a newer build. Take the channel before reading the document, then wait
// on it: a change in between closes it. One channel serves every watcher
// of a document, so a waiting reader costs a channel receive and nothing
// while it waits.
func (c *Cache) Watch(key Key) <-chan struct{} {
	t := topicOf(key)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ch := c.watchers[t]
	if ch == nil {
		if len(c.watchers) >= c.cfg.MaxEntries {
			// A channel is kept until its topic changes: client-named
			// topics (VIPs, instances) that never do would pile up, one
			// for each blocking read that timed out. Past the cache's
			// bound they all go; their waiters, if any, wake as for a
			// change ("may have changed") and watch again.
			for t2, ch2 := range c.watchers {
				if sheddable(t2.entity) {
					close(ch2)
					delete(c.watchers, t2)
				}
			}
		}
		ch = make(chan struct{})
		c.watchers[t] = ch
	}
	return ch
}

// notify wakes the watchers of topics (all: every watcher).
func (c *Cache) notify(topics map[topic]struct{}, all bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if all {
		for t, ch := range c.watchers {
			close(ch)
			delete(c.watchers, t)
		}
		return
	}
	for t := range topics {
		if ch := c.watchers[t]; ch != nil {
			close(ch)
			delete(c.watchers, t)
		}
	}
}

func (c *Cache) notifyList(topics []topic) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for _, t := range topics {
		if ch := c.watchers[t]; ch != nil {
			close(ch)
			delete(c.watchers, t)
		}
	}
}
