package cluster

import "container/heap"

// deadlines is the leader's schedule of lease deadlines: a min-heap of
// (deadline, instance) with at most one live item per instance, the
// earliest scheduled. Renewals do not touch it: when an item comes due the
// leader looks at the lease again and, if it was renewed, schedules its new
// deadline (lazy rescheduling), so the heap costs nothing per heartbeat.
// Not safe for concurrent use: only the lease keeper's goroutine uses it.
//
// An instance is keyed by the (application, id) pair of its entry's own
// strings, not a string joined from them: at a million instances the
// joined keys were a million more heap objects on the leader for the
// collector to mark.
type deadlines struct {
	h     deadlineHeap
	sched map[renewKey]int64 // instance -> deadline of its live item
}

type deadlineItem struct {
	at  int64 // epoch ms; the lease is expired once now > at
	key renewKey
}

type deadlineHeap []deadlineItem

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadlineItem)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func newDeadlines() *deadlines { return &deadlines{sched: map[renewKey]int64{}} }

// schedule makes sure key comes due no later than at. A later deadline for
// an instance already scheduled is ignored: the earlier item will find it
// renewed and schedule again.
func (d *deadlines) schedule(key renewKey, at int64) {
	if cur, ok := d.sched[key]; ok && cur <= at {
		return
	}
	d.sched[key] = at
	heap.Push(&d.h, deadlineItem{at: at, key: key})
}

// next returns the earliest live deadline.
func (d *deadlines) next() (int64, bool) {
	for d.h.Len() > 0 {
		it := d.h[0]
		if d.sched[it.key] == it.at {
			return it.at, true
		}
		heap.Pop(&d.h) // superseded by an earlier item
	}
	return 0, false
}

// popDue removes and returns the keys whose deadline is before now.
func (d *deadlines) popDue(now int64) []renewKey {
	var keys []renewKey
	for d.h.Len() > 0 && d.h[0].at < now {
		it := heap.Pop(&d.h).(deadlineItem)
		if d.sched[it.key] != it.at {
			continue // superseded
		}
		delete(d.sched, it.key)
		keys = append(keys, it.key)
	}
	return keys
}

// len is how many instances are scheduled.
func (d *deadlines) len() int { return len(d.sched) }
