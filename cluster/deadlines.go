package cluster

import "container/heap"

// deadlines is the leader's schedule of lease deadlines, kept per
// application: a min-heap of (deadline, application) with at most one live
// item per application, no later than the earliest deadline of its
// instances. Renewals do not touch it: when an application comes due the
// leader looks at its instances' leases again and schedules the earliest
// deadline among them (lazy rescheduling), so the heap costs nothing per
// heartbeat. Not safe for concurrent use: only the lease keeper's goroutine
// uses it.
//
// Per application, not per instance: at a million instances a schedule of
// instances held 127 MB on the leader (a map entry and a heap item each),
// more than any follower holds for anything but the registry itself. An
// application comes due about once per lease duration less a renewal
// interval whatever its size (by then every live instance renewed), and
// looking at its instances then costs what rescheduling each of them did.
type deadlines struct {
	h     deadlineHeap
	sched map[string]int64 // application -> deadline of its live item
}

type deadlineItem struct {
	at  int64 // epoch ms; the application has a lease to look at once now > at
	app string
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

func newDeadlines() *deadlines { return &deadlines{sched: map[string]int64{}} }

// schedule makes sure app comes due no later than at. A later deadline for
// an application already scheduled is ignored: the earlier item will find
// its instances renewed and schedule again.
func (d *deadlines) schedule(app string, at int64) {
	if cur, ok := d.sched[app]; ok && cur <= at {
		return
	}
	d.sched[app] = at
	heap.Push(&d.h, deadlineItem{at: at, app: app})
}

// next returns the earliest live deadline.
func (d *deadlines) next() (int64, bool) {
	for d.h.Len() > 0 {
		it := d.h[0]
		if d.sched[it.app] == it.at {
			return it.at, true
		}
		heap.Pop(&d.h) // superseded by an earlier item
	}
	return 0, false
}

// popDue removes and returns the applications whose deadline is before now.
func (d *deadlines) popDue(now int64) []string {
	var apps []string
	for d.h.Len() > 0 && d.h[0].at < now {
		it := heap.Pop(&d.h).(deadlineItem)
		if d.sched[it.app] != it.at {
			continue // superseded
		}
		delete(d.sched, it.app)
		apps = append(apps, it.app)
	}
	return apps
}

// at returns the deadline app is scheduled at.
func (d *deadlines) at(app string) (int64, bool) {
	at, ok := d.sched[app]
	return at, ok
}

// len is how many applications are scheduled.
func (d *deadlines) len() int { return len(d.sched) }
