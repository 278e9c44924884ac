package peering

import (
	"fmt"
	"testing"
	"time"
)

// While a peer is down, the sender takes a batch, fails, puts it back and
// waits. When the batch at the front is of changes nothing replaces (a
// deploy's registers), the heartbeats queued behind them keep replacing one
// another: the queue holds one task per instance, but its order keeps every
// task ever replaced behind the front batch, so the queue, bounded by
// QueueSize, grows without bound (and each retry's putBack copies all of
// it) for as long as the outage lasts.
func TestQueue_ReplacedTasksDoNotPileUpWhilePeerIsDown(t *testing.T) {
	const instances, batch = 1000, 250
	q := newQueue(10_000)
	for i := range batch { // a deploy: registers queued as the peer went down
		q.push(&task{key: taskKey{app: "NEW", id: fmt.Sprint(i), slot: kindRegister.slot()}, kind: kindRegister, queued: time.Now()})
	}
	for range 100 { // 100 heartbeat intervals of a peer outage
		for i := range instances {
			q.push(&task{key: taskKey{app: "A", id: fmt.Sprint(i), slot: kindHeartbeat.slot()}, kind: kindHeartbeat, queued: time.Now()})
		}
		q.putBack(q.take(batch)) // a retry that fails again
	}
	if want := batch + instances; q.len() != want {
		t.Fatalf("live tasks: %d, want %d", q.len(), want)
	}
	if len(q.order) > 2*q.limit {
		t.Fatalf("queue of %d live tasks (limit %d) holds %d tasks in its order", q.len(), q.limit, len(q.order))
	}
}
