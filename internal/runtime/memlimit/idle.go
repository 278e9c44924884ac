package memlimit

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	// quietRate is the allocation rate, in bytes a second, below which a
	// node counts as quiet: an idle node's heartbeats, lease scans and
	// status polls allocate tens of KB a second; a node serving reads or
	// applying writes, MBs.
	quietRate = 1 << 20
	// quietTicks is how many consecutive quiet intervals make a node idle:
	// 2 s at the interval serve uses.
	quietTicks = 20
	// quietPerTick is the live heap that asks for one more quiet interval
	// than quietTicks (quietFor): 2 s for a heap up to 160 MiB, about 30 s
	// for the 2.3 GB of a reader holding a million instances, at the
	// interval serve uses. The collection costs CPU in proportion to the
	// live heap (a CPU-second or more at a million) and the memory it
	// returns is faulted in again by the next burst: waiting in
	// proportion keeps what the return costs to a few percent of the quiet
	// it follows. With 2 s whatever the heap, a million-instance reader
	// serving reads in bursts with pauses of 2-3 s collected in every
	// pause, and every burst after one ran at half the rate of the burst
	// before it (BENCHMARKS.md, "A million instances on one machine").
	quietPerTick = 8 << 20
	// minGarbage is the least garbage worth an idle collection; the share
	// of the live heap below is the other floor, so that a large registry
	// is not marked for a few MB.
	minGarbage   = 8 << 20
	garbageShare = 16
	// rateWindow is the span the allocation rate is judged over: the
	// last second, not the last interval. A quiet node's periodic work
	// comes in lumps: at a million instances, 110-250 KB at once every
	// 10 s on every node, and about as much for each status poll. Judged
	// over one 100 ms interval, each lump read as 1-2.4 MB/s, so a
	// million-instance node never stayed quiet for the 30 s its heap
	// asks, and kept the garbage of its last reads for as long as it ran.
	rateWindow = time.Second
)

// idleReturn collects once and returns the free memory to the system when
// a node goes quiet after a busy spell, as G1's periodic collection does
// for an idle JVM. Without it, the garbage of the last burst of reads or
// writes stays until the runtime's forced collection, up to two minutes
// later: the runtime collects when the heap reaches its goal, and an idle
// node allocates too little to get there. And the limit, which follows
// the live heap measured by the last collection, keeps the free pages:
// a collection during a burst counts what the burst allocated while it
// marked as live. A 10,000-instance follower that had served 35,000
// reads a second held 13 MB of free pages and its reads' garbage 5 s
// after the load.
type idleReturn struct {
	samples []metrics.Sample
	// recent holds the allocation counter as read at the last ticks,
	// oldest first, back to the newest reading at least rateWindow old.
	recent []allocMark
	// lastGCs is the collection count as last read.
	lastGCs uint64
	quiet   int
	// busyGC is set when the last collection ended in a busy interval:
	// what it counted as live included what the burst allocated while it
	// marked, and the limit followed that figure. A node that goes quiet
	// after one collects once whatever its garbage, so that the limit
	// follows the heap that is really live: a quiet 10,000-instance
	// leader kept a limit of 94 MiB while its followers, holding the same
	// registry, were at 67-68.
	busyGC bool
	// collect runs the collection and the return (debug.FreeOSMemory);
	// a field so that tests can count calls.
	collect func()
	// now is the clock (time.Now); a field so that tests can set the
	// time between ticks.
	now func() time.Time
}

func newIdleReturn() *idleReturn {
	w := &idleReturn{collect: debug.FreeOSMemory, now: time.Now, samples: []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}}
	w.mark()
	return w
}

// allocMark is the allocation counter read at a time.
type allocMark struct {
	allocs uint64
	at     time.Time
}

// mark takes the counters and the time the next tick measures from.
func (w *idleReturn) mark() {
	allocs, _, _, _, gcs := w.read()
	w.lastGCs = gcs
	w.recent = append(w.recent[:0], allocMark{allocs, w.now()})
}

func (w *idleReturn) read() (allocs, live, objects, free, gcs uint64) {
	metrics.Read(w.samples)
	var v [5]uint64
	for i := range w.samples {
		if w.samples[i].Value.Kind() == metrics.KindUint64 {
			v[i] = w.samples[i].Value.Uint64()
		}
	}
	return v[0], v[1], v[2], v[3], v[4]
}

// tick is called every interval. It collects when the node has been
// quiet for quietFor its live heap and holds enough garbage and free pages
// to be worth it, and reports whether it did.
func (w *idleReturn) tick() bool {
	allocs, live, objects, free, gcs := w.read()
	if !w.judge(allocs, live, objects, free, gcs, w.now()) {
		return false
	}
	// Its own collection is not judged as busy or quiet: what the node
	// allocated while it ran is counted from its end, and the collection
	// does not count as one that ended in a busy interval. Otherwise a
	// large registry re-arms the return forever: a million-instance
	// follower that took 1-2 s to mark its heap allocated that long's
	// background work, which read as a busy tenth of a second, and it was
	// collected every 4-5 s while doing nothing (half a core each).
	w.mark()
	return true
}

// judge is tick on the counters read at time at, up to the collection
// (tickQuiet), which it reports. It judges the allocation rate over the
// last rateWindow (over the time since the last reading when that is
// longer, as after a slow tick, such as one that collected a large heap).
func (w *idleReturn) judge(allocs, live, objects, free, gcs uint64, at time.Time) bool {
	w.recent = append(w.recent, allocMark{allocs, at})
	cut := 0 // the newest reading at least rateWindow old
	for cut+1 < len(w.recent) && !w.recent[cut+1].at.After(at.Add(-rateWindow)) {
		cut++
	}
	w.recent = append(w.recent[:0], w.recent[cut:]...)
	from := w.recent[0]
	rate := float64(allocs-from.allocs) / max(at.Sub(from.at).Seconds(), 1e-3)
	busy := rate >= quietRate
	if gcs != w.lastGCs {
		w.busyGC = busy
	}
	w.lastGCs = gcs
	if busy {
		w.quiet = 0
		return false
	}
	w.quiet++
	return w.tickQuiet(live, objects, free)
}

// quietFor is how many consecutive quiet intervals make a node with live
// bytes of live heap idle.
func quietFor(live uint64) int {
	return max(quietTicks, int(live/quietPerTick))
}

// Interval is the interval serve follows the limit and judges quiet at.
const Interval = 100 * time.Millisecond

// IdleReturnAfter is how long a node with live bytes of live heap, judged
// every Interval, stays quiet before it collects and returns its free
// memory. The bench waits it out before the limit's turns: the return
// of a million-instance node costs a second or more of CPU, which fell
// in the middle of the limit's turns and counted against the limit.
func IdleReturnAfter(live uint64) time.Duration {
	return time.Duration(quietFor(live)) * Interval
}

// tickQuiet decides for a quiet interval: after quietFor(live) of them,
// it collects when the garbage and free pages held are worth it or the
// last collection came while the node was busy.
func (w *idleReturn) tickQuiet(live, objects, free uint64) bool {
	if w.quiet < quietFor(live) {
		return false
	}
	held := free
	if objects > live {
		held += objects - live
	}
	if held < max(minGarbage, live/garbageShare) && !w.busyGC {
		return false
	}
	w.collect()
	w.quiet, w.busyGC = 0, false
	return true
}
