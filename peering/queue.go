package peering

import "time"

// kind is what a queued task does; tasks of one kind for one instance
// coalesce (the newest wins), as eureka-server's task dispatcher does.
type kind uint8

const (
	kindRegister kind = iota // register with the current record
	kindCancel
	kindStatus         // StatusUpdate with the current override
	kindDeleteOverride // DeleteStatusOverride, leaving the current status
	kindHeartbeat
)

func (k kind) String() string {
	return [...]string{"register", "cancel", "status", "delete_override", "heartbeat"}[k]
}

// slot is the coalescing key of a task: a register and a cancel of the same
// instance replace each other (the latest decides whether it exists), so do
// the two status changes.
func (k kind) slot() uint8 {
	switch k {
	case kindRegister, kindCancel:
		return 0
	case kindStatus, kindDeleteOverride:
		return 1
	}
	return 2
}

type taskKey struct {
	app, id string
	slot    uint8
}

type task struct {
	key    taskKey
	kind   kind
	queued time.Time
	dead   bool // superseded or dropped; skipped when taken
}

// queue is one peer's bounded, coalescing task queue. It is not safe for
// concurrent use; peer guards it.
type queue struct {
	limit int
	live  map[taskKey]*task
	order []*task
	// heartbeats counts live heartbeat tasks, so overflow knows whether it
	// can make room by dropping one.
	heartbeats int
}

func newQueue(limit int) *queue {
	return &queue{limit: limit, live: map[taskKey]*task{}}
}

func (q *queue) len() int { return len(q.live) }

// push adds a task, replacing a queued one with the same key. When the
// queue is full, a heartbeat is dropped (the new one, or the oldest queued
// one to make room for another kind); dropped names what was lost, and
// lost reports a non-heartbeat that found no room.
func (q *queue) push(t *task) (dropped kind, didDrop, lost bool) {
	if old := q.live[t.key]; old != nil {
		q.remove(old)
	} else if len(q.live) >= q.limit {
		if t.kind == kindHeartbeat {
			return kindHeartbeat, true, false
		}
		if !q.dropOldestHeartbeat() {
			return t.kind, true, true
		}
		dropped, didDrop = kindHeartbeat, true
	}
	q.live[t.key] = t
	q.order = append(q.order, t)
	if t.kind == kindHeartbeat {
		q.heartbeats++
	}
	q.compact()
	return dropped, didDrop, false
}

// compact drops replaced tasks from order once they outnumber the live
// ones. take clears them only up to the batch it takes: while a peer is
// down and the tasks at the front are never replaced (a deploy's
// registrations), each heartbeat replacing its predecessor behind them
// would otherwise add one for good, and putBack copies them all.
func (q *queue) compact() {
	if len(q.order) <= 2*len(q.live)+64 {
		return
	}
	kept := q.order[:0]
	for _, t := range q.order {
		if !t.dead {
			kept = append(kept, t)
		}
	}
	clear(q.order[len(kept):])
	q.order = kept
}

func (q *queue) remove(t *task) {
	t.dead = true
	delete(q.live, t.key)
	if t.kind == kindHeartbeat {
		q.heartbeats--
	}
}

func (q *queue) dropOldestHeartbeat() bool {
	if q.heartbeats == 0 {
		return false
	}
	for _, t := range q.order {
		if !t.dead && t.kind == kindHeartbeat {
			q.remove(t)
			return true
		}
	}
	return false
}

// take removes and returns up to n tasks, oldest first.
func (q *queue) take(n int) []*task {
	var out []*task
	i := 0
	for ; i < len(q.order) && len(out) < n; i++ {
		t := q.order[i]
		if t.dead {
			continue
		}
		q.remove(t)
		t.dead = false
		out = append(out, t)
	}
	q.order = q.order[i:]
	if len(q.order) == 0 {
		q.order = nil
	}
	return out
}

// putBack returns tasks a send could not deliver to the front of the
// queue, unless a newer task with the same key arrived meanwhile. They may
// exceed the limit briefly: they were admitted once already.
func (q *queue) putBack(ts []*task) {
	var back []*task
	for _, t := range ts {
		if q.live[t.key] != nil {
			continue
		}
		t.dead = false
		q.live[t.key] = t
		if t.kind == kindHeartbeat {
			q.heartbeats++
		}
		back = append(back, t)
	}
	q.order = append(back, q.order...)
	q.compact()
}
