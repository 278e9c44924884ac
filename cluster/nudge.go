package cluster

import (
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// commitNudger tells followers about a commit as soon as it happens.
//
// A follower applies an entry only when it learns that the entry is
// committed, and it learns that from the leader's next AppendEntries. Raft
// sends one when new entries are appended, or after the commit timeout
// (jittered up to twice it) when the leader is quiet; its heartbeats carry
// no commit index. So after a lone registration on a quiet cluster,
// followers would apply it, and their cached reads and blocking queries
// show it, 10 to 20 ms late with the default timeout. Lowering the timeout
// makes every idle cluster send more messages.
//
// The nudger instead sends each follower, over Raft's own transport, an
// AppendEntries of its own once one of the leader's writes has committed:
// no entries, that write's index as both the previous entry and the commit
// index, the write's term as the previous entry's term and as the
// request's term (the leader appended it in that term, so it was that
// term's leader). A follower takes it as Raft takes any AppendEntries: it
// refuses it if its log lacks that entry or holds another term there, and
// otherwise its log matches the leader's up to the entry, which is
// committed, so it may apply everything up to it. Nothing is written to
// any log, which is what makes it quicker than the barrier entry the
// leader used to append for this: that one a follower had to write to its
// log, and sync, before it learned the commit.
//
// A follower has at most one notice in flight; writes that commit
// meanwhile are told by the next, sent when it comes back. A follower that
// lacks the entry only because it is still on its way (the leader needed
// just a quorum) is told again a moment later, a few times, and then left
// to Raft for about a commit timeout, longer each time in a row; one that
// refused for any other reason, or could not be reached, gets none for
// noticePause (it is far behind or away, and Raft's own replication
// brings it the commit).
// Renewal batches do not nudge (they change no document), and neither does
// a single-node cluster (no follower to tell).
type commitNudger struct {
	// deps are the node's; its transport exists only once Raft runs.
	deps    *raftDeps
	self    raft.ServerID
	version raft.ProtocolVersion
	log     hclog.Logger

	ch chan struct{}

	mu sync.Mutex
	// committed is the highest index of an entry this node appended as
	// leader that it saw commit.
	committed uint64
	followers map[raft.ServerID]*noticeState
}

// noticeState is what the nudger knows of one follower.
type noticeState struct {
	busy    bool      // a notice is in flight
	told    uint64    // the highest index the follower took
	paused  time.Time // no notice before this (after a refusal or a failure)
	retries int       // refusals in a row from a follower still receiving
	lags    int       // rounds of retries spent in a row (noticeLagPause)
}

// noticePause is how long a follower that refused a notice, or could not
// be reached, goes without them.
const noticePause = time.Second

// A follower that refused a notice because its log ends at most
// noticeCatchUp entries before the committed one is sent it again after
// noticeRetry: those entries are on their way to it. After noticeRetries
// such refusals in a row it gets no notice for noticeLagPause, about
// Raft's commit timeout, by when Raft's own AppendEntries has told it;
// doubled for each such round in a row, up to noticePause, so that a
// follower that stays behind under a burst of writes (and learns commits
// from the burst itself) is not sent a stream of notices it refuses. It
// was noticePause at once: a follower one entry behind for a few
// milliseconds then went a second without notices, in which a change a
// blocking read on it waited for could reach it up to two commit
// timeouts late (seen three times in one bench run; a fit for, not a
// proven cause of, a W6B p99 of 15 ms in one run of six:
// docs/benchmarks/2026-12-07-b-w1-where-a-forwarded-write-waits.md).
const (
	noticeCatchUp  = 1024
	noticeRetry    = time.Millisecond
	noticeRetries  = 3
	noticeLagPause = 10 * time.Millisecond
)

func newCommitNudger(deps *raftDeps, self raft.ServerID, version raft.ProtocolVersion, log hclog.Logger) *commitNudger {
	return &commitNudger{deps: deps, self: self, version: version, log: log,
		ch: make(chan struct{}, 1), followers: map[raft.ServerID]*noticeState{}}
}

// nudge tells the nudger that idx, an entry this node appended as leader,
// has committed; it never blocks.
func (c *commitNudger) nudge(idx uint64) {
	c.mu.Lock()
	c.committed = max(c.committed, idx)
	c.mu.Unlock()
	c.wake()
}

func (c *commitNudger) wake() {
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// run sends the notices until stop closes, and returns once none is in
// flight.
func (c *commitNudger) run(r *raft.Raft, stop <-chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	hdr := c.header()
	for {
		select {
		case <-stop:
			return
		case <-c.ch:
		}
		if r.State() != raft.Leader {
			continue
		}
		c.mu.Lock()
		idx := c.committed
		c.mu.Unlock()
		f := r.GetConfiguration()
		if f.Error() != nil {
			continue
		}
		to := c.claim(f.Configuration().Servers, idx, time.Now())
		if len(to) == 0 {
			continue
		}
		var entry raft.Log
		if err := c.deps.logs.GetLog(idx, &entry); err != nil {
			c.log.Debug("no commit notice: committed entry not in the log", "index", idx, "error", err)
			c.release(to)
			continue
		}
		for _, s := range to {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.tell(s, hdr, entry.Term, idx)
			}()
		}
	}
}

// claim returns the servers to tell of idx now, marking each busy, and
// forgets the servers no longer in the configuration.
func (c *commitNudger) claim(servers []raft.Server, idx uint64, now time.Time) []raft.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []raft.Server
	for _, s := range servers {
		if s.ID == c.self {
			continue
		}
		st := c.followers[s.ID]
		if st == nil {
			st = &noticeState{}
			c.followers[s.ID] = st
		}
		if st.busy || st.told >= idx || now.Before(st.paused) {
			continue
		}
		st.busy = true
		out = append(out, s)
	}
	for id, st := range c.followers {
		if !st.busy && !slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == id }) {
			delete(c.followers, id)
		}
	}
	return out
}

// release undoes claim for servers that were not told after all.
func (c *commitNudger) release(servers []raft.Server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range servers {
		c.followers[s.ID].busy = false
	}
}

// header is the RPC header of this node's notices, the same for all: its
// transport exists once Raft runs.
func (c *commitNudger) header() raft.RPCHeader {
	trans := c.deps.trans
	return raft.RPCHeader{ProtocolVersion: c.version, ID: []byte(c.self), Addr: trans.EncodePeer(c.self, trans.LocalAddr())}
}

// tell sends s the notice, under hdr, that idx, of term, committed, and
// wakes the nudger again if more committed meanwhile.
func (c *commitNudger) tell(s raft.Server, hdr raft.RPCHeader, term, idx uint64) {
	req := &raft.AppendEntriesRequest{
		RPCHeader:         hdr,
		Term:              term,
		PrevLogEntry:      idx,
		PrevLogTerm:       term,
		LeaderCommitIndex: idx,
	}
	var resp raft.AppendEntriesResponse
	err := c.deps.trans.AppendEntries(s.ID, s.Address, req, &resp)
	took := err == nil && resp.Success
	receiving := err == nil && resp.Term <= term && resp.LastLog < idx && idx-resp.LastLog <= noticeCatchUp
	c.mu.Lock()
	st := c.followers[s.ID]
	st.busy = false
	var pause time.Duration
	switch {
	case took:
		st.told, st.retries, st.lags, st.paused = max(st.told, idx), 0, 0, time.Time{}
	case receiving && st.retries < noticeRetries:
		// The entry is on its way to the follower (the leader needed only
		// a quorum to commit it): try again in a moment.
		st.retries++
		pause = noticeRetry
	case receiving:
		st.retries = 0
		pause = min(noticeLagPause<<min(st.lags, 8), noticePause)
		st.lags++
	default:
		st.retries, st.lags = 0, 0
		pause = noticePause
	}
	if pause > 0 {
		st.paused = time.Now().Add(pause)
	}
	more := c.committed > st.told
	c.mu.Unlock()
	if pause >= noticeLagPause {
		c.log.Debug("commit notice not taken; raft's replication will tell the follower",
			"follower", s.ID, "index", idx, "follower_term", resp.Term, "follower_last_index", resp.LastLog, "error", err)
	}
	switch {
	case took && more:
		c.wake()
	case pause == noticeRetry:
		time.AfterFunc(pause, c.wake)
	}
}

// raftLogger is the logger Raft runs with: the node's, with one message
// demoted to debug. A follower warns "failed to get previous log" whenever
// an AppendEntries names an entry its log does not reach yet: the new
// leader's first probe of a follower behind it, and a commit notice that
// overtook the entry it names during a burst of writes. Raft recovers from
// both by itself, and when the leader has to send older entries it says so
// at warn on its side ("appendEntries rejected, sending older logs").
type raftLogger struct{ hclog.Logger }

// notYetInLog is the message raftLogger demotes.
const notYetInLog = "failed to get previous log"

// Warn logs msg at warn, or at debug when it is notYetInLog.
func (l raftLogger) Warn(msg string, args ...any) {
	if msg == notYetInLog {
		l.Logger.Debug(msg, args...)
		return
	}
	l.Logger.Warn(msg, args...)
}
