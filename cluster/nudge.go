package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// commitNudger tells followers about a commit as soon as it happens.
//
// A follower applies an entry only when it learns that the entry is
// committed, and it learns that from the leader's next AppendEntries. Raft
// sends one when new entries are appended, or after the commit timeout
// (jittered up to twice it) when the leader is quiet. So after a lone
// registration on a quiet cluster, followers apply it, and their cached
// reads and blocking queries show it, 10 to 20 ms late with the default
// timeout. Lowering the timeout makes every idle cluster send more
// heartbeats; the nudger instead appends a barrier after a write that
// changes what reads show, which makes the leader replicate at once with the
// new commit index. The barrier is a Raft entry the FSM never sees.
//
// Nudges coalesce: while maxBarriersInFlight barriers are in flight, any
// number of further writes ask for one more. Renewal batches do not nudge
// (they change no document), and neither does a single-node cluster (no
// follower to tell).
type commitNudger struct {
	ch chan struct{}
}

func newCommitNudger() *commitNudger {
	return &commitNudger{ch: make(chan struct{}, 1)}
}

// nudge asks for a barrier after the write that just committed; it never
// blocks.
func (c *commitNudger) nudge() {
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// maxBarriersInFlight bounds the barriers in flight at once. A barrier
// tells followers the commit index as of when it is sent, so a write that
// commits while one is in flight needs another. With one at a time, that
// one left only when the one in flight came back (a log write on the
// leader and on a follower, a millisecond or more here), and the write's
// followers applied it that much later. With two, it leaves at once unless
// two are out already, and a burst of writes still adds at most two
// barriers per round trip, not one per write.
const maxBarriersInFlight = 2

// run appends the barriers until stop closes.
func (c *commitNudger) run(r *raft.Raft, stop <-chan struct{}) {
	slots := make(chan struct{}, maxBarriersInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-stop:
			return
		case <-c.ch:
		}
		if r.State() != raft.Leader || !hasOtherServers(r) {
			continue
		}
		select {
		case <-stop:
			return
		case slots <- struct{}{}:
		}
		f := r.Barrier(0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The error needs no handling: a lost leadership or a shutdown
			// leaves followers to learn the commit from the next leader.
			_ = waitFuture(f, stop)
			<-slots
		}()
	}
}

// hasOtherServers reports whether r's configuration holds a server besides
// r itself (voter or not: every one of them serves reads).
func hasOtherServers(r *raft.Raft) bool {
	f := r.GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) > 1
}
