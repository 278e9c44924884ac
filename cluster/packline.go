package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// The leader's write line. A client write that reaches the leader (its
// own client's, or in a follower's forwarded batch) finds either nothing
// in raft from the line, and goes at once, or a packed entry in raft, and
// waits for it with the others that arrive meanwhile; when it commits they
// all go as one fsm.CmdBatch entry. Under a registration burst raft then
// appends, replicates and applies one entry where it did one per write,
// and each of those costs a msgpack encoding, a bolt key and a transport
// frame on every node: W1 (19,500 registrations by 64 writers over three
// nodes) took 23 % less CPU of the nodes a registration and ran 22 %
// faster (docs/benchmarks/2026-12-06-c-one-entry-for-a-burst.md). A lone
// write waits for nothing.
//
// A follower forwards its clients' writes in calls, one out at a time
// (writeForwarder), and its clients send their next writes once the
// call's are answered: so when an entry that carried followers' calls
// commits, their next calls are on their way, and if the line sent the
// next entry at once they would wait in the line for a whole commit. The
// line therefore waits, after such an entry, until as many calls have
// joined it as the entry carried, but no longer than half the time the
// entry took in raft, nor than maxCallWait (awaitCalls). Measured with W1
// alone (10,000 registrations by 64 writers over three nodes), entries
// held ~30 writes instead of ~21 and the burst ran 10 % faster over six
// runs of each build
// (docs/benchmarks/2026-12-07-b-w1-where-a-forwarded-write-waits.md).
// An entry of the leader's own clients' writes only is followed by no
// wait, and a wait holds back only the writes that reach the line while
// it lasts: with one follower writing, its next call ends the wait the
// moment it joins.
//
// The line runs only while every server reads packed entries
// (packingAllowed); otherwise writes go to raft one entry each, as before.

// Bounds of one packed entry: raft sends it whole in one AppendEntries, and
// every follower holds it whole in memory to apply it.
const (
	maxLineEntries = 512
	maxLineBytes   = 1 << 20
)

// maxCallWait bounds the wait for followers' calls after an entry however
// slow the commit was: a call comes back in the time of the follower's
// answers, its clients' next requests and one more hop (3.3 ms on average
// on a loaded 2-core machine), not in the disk's.
const maxCallWait = 10 * time.Millisecond

// writeLine holds the writes waiting for the packed entry in raft.
type writeLine struct {
	mu   sync.Mutex
	busy bool // a goroutine is sending the line's entries (runLine)
	wait []*lineWrite
	// calls counts the calls (addLocked) that joined the line, and joined
	// tells a waiting runLine that one did (awaitCalls).
	calls  uint64
	joined chan struct{}
	// entries and writes count what the line sent: packed entries, and the
	// writes in them; waits and waitsFull the waits for followers' calls
	// after an entry, and those that ran to their bound (status:
	// packed_entries, packed_writes, line_waits, line_waits_full).
	entries, writes, waits, waitsFull atomic.Uint64
}

// lineWrite is one write in the line and, once done is closed, its answer.
type lineWrite struct {
	entry []byte
	// deadline is when its caller stops waiting (the apply timeout from
	// when it joined): a write still waiting then is answered without
	// being sent.
	deadline time.Time
	done     chan struct{}
	idx      uint64
	err      error
	// opensCall marks the first write of a call (addLocked).
	opensCall bool
}

// packingAllowed reports whether every server in the configuration reads
// packed entries.
func (n *Node) packingAllowed() bool { return n.everyServerReads(fsm.LogFormatPacked) }

// everyServerReads reports whether every server in the configuration
// reads log format format: each records the newest its release reads in
// its member record, as it joins or starts (registerSelf).
func (n *Node) everyServerReads(format int) bool {
	servers, err := n.servers()
	if err != nil || len(servers) == 0 {
		return false
	}
	for _, s := range servers {
		if m, ok := n.memberRecord(string(s.ID)); !ok || m.LogFormat < format {
			return false
		}
	}
	return true
}

// applyInLine appends entries (client writes, each checked and owned by
// the caller; call says they came as one call, see addLocked) through the
// line and answers each, with the highest index of those applied.
func (n *Node) applyInLine(entries [][]byte, call bool) ([]error, uint64) {
	l := &n.line
	deadline := time.Now().Add(n.cfg.ApplyTimeout)
	ws := make([]*lineWrite, len(entries))
	for i, e := range entries {
		ws[i] = &lineWrite{entry: e, deadline: deadline, done: make(chan struct{})}
	}
	l.mu.Lock()
	l.addLocked(ws, call)
	if !l.busy {
		// It ends once the line is empty; raft answers its last entry,
		// with an error at the latest when it shuts down.
		l.busy = true
		go n.runLine()
	}
	l.mu.Unlock()
	results := make([]error, len(ws))
	var last uint64
	for i, w := range ws {
		<-w.done
		results[i] = w.err
		if w.err == nil {
			last = max(last, w.idx)
		}
	}
	return results, last
}

// runLine sends the waiting writes, a packed entry at a time, until none
// is left.
func (n *Node) runLine() {
	l := &n.line
	for {
		l.mu.Lock()
		ws := l.takeLocked()
		if len(ws) == 0 {
			l.busy = false
			l.mu.Unlock()
			return
		}
		calls := 0
		for _, w := range ws {
			if w.opensCall {
				calls++
			}
		}
		l.mu.Unlock()
		seen, took, ok := n.sendLine(ws)
		if ok && calls > 0 {
			l.awaitCalls(seen+uint64(calls), min(took/2, maxCallWait))
		}
	}
}

// addLocked puts ws in the line; call says they came in one call (a
// follower's forwarded write or batch, or a journal's replay batch),
// which a waiting runLine is told of.
func (l *writeLine) addLocked(ws []*lineWrite, call bool) {
	if call && len(ws) > 0 {
		ws[0].opensCall = true
		l.calls++
		select {
		case l.joinedLocked() <- struct{}{}:
		default: // the waiter has yet to take the last signal
		}
	}
	l.wait = append(l.wait, ws...)
}

// joinedLocked returns the line's joined signal, made on first use.
func (l *writeLine) joinedLocked() chan struct{} {
	if l.joined == nil {
		l.joined = make(chan struct{}, 1)
	}
	return l.joined
}

// awaitCalls waits until the count of calls that joined the line reaches
// want, or bound passes.
func (l *writeLine) awaitCalls(want uint64, bound time.Duration) {
	l.waits.Add(1)
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		l.mu.Lock()
		joined, signal := l.calls, l.joinedLocked()
		l.mu.Unlock()
		if joined >= want {
			return
		}
		select {
		case <-signal:
		case <-timer.C:
			l.waitsFull.Add(1)
			return
		}
	}
}

// takeLocked removes the next entry's writes from the line, oldest first,
// within the entry's bounds (at least one), answering those whose caller
// stopped waiting.
func (l *writeLine) takeLocked() []*lineWrite {
	now := time.Now()
	var ws []*lineWrite
	size, taken := 0, 0
	for _, w := range l.wait {
		if len(ws) == maxLineEntries || (len(ws) > 0 && size+len(w.entry) > maxLineBytes) {
			break
		}
		taken++
		if now.After(w.deadline) {
			w.err = fmt.Errorf("apply %s: waited past the apply timeout for the leader's line, not sent: %w", fsm.TypeOf(w.entry), ErrNoLeader)
			close(w.done)
			continue
		}
		ws = append(ws, w)
		size += len(w.entry)
	}
	clear(l.wait[:taken])
	l.wait = l.wait[taken:]
	if len(l.wait) == 0 {
		l.wait = nil
	}
	return ws
}

// sendLine appends ws as one entry (packed when more than one), waits for
// it and answers each write. It returns how many calls had joined the
// line when it answered, how long the entry took in raft, and whether
// raft applied it.
func (n *Node) sendLine(ws []*lineWrite) (seen uint64, took time.Duration, ok bool) {
	now := time.Now().UnixMilli()
	entries := make([][]byte, len(ws))
	for i, w := range ws {
		entries[i] = w.entry
		_ = fsm.Stamp(w.entry, now) // a whole entry: at least a header
	}
	entry := entries[0]
	if len(entries) > 1 {
		packed, err := fsm.EncodeBatch(entries)
		if err != nil {
			answerLine(ws, 0, nil, err)
			return 0, 0, false
		}
		_ = fsm.Stamp(packed, now)
		entry = packed
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	start := time.Now()
	f := n.raft.Apply(entry, n.cfg.ApplyTimeout)
	idx, err := n.applyResult(entry, f, ctx.Done())
	took = time.Since(start)
	var results fsm.BatchResults
	if len(ws) == 1 {
		results = fsm.BatchResults{err} // the FSM's own answer, or raft's refusal
		err = nil
	} else if err == nil {
		results, _ = f.Response().(fsm.BatchResults)
		n.line.entries.Add(1)
		n.line.writes.Add(uint64(len(ws)))
	}
	if idx > 0 {
		n.nudger.nudge(idx)
	}
	// Read before the answers go: a call answered now cannot have joined
	// again yet, so each one that joins from here is a new one.
	n.line.mu.Lock()
	seen = n.line.calls
	n.line.mu.Unlock()
	answerLine(ws, idx, results, err)
	return seen, took, idx > 0
}

// answerLine answers the writes of one entry: err for all of them when
// the entry failed, else each its result.
func answerLine(ws []*lineWrite, idx uint64, results fsm.BatchResults, err error) {
	for i, w := range ws {
		switch {
		case err != nil:
			w.err = err
		case i < len(results):
			w.err, w.idx = results[i], idx
		default:
			w.err = fmt.Errorf("apply %s: the batch's answer is missing: %w", fsm.TypeOf(w.entry), ErrNoLeader)
		}
		close(w.done)
	}
}

// applyBatchInLine is applyBatchLocal through the line: a leader that
// lost office before any of them went to raft answers ErrNotLeader for the
// call, as applyEntries does, so that the caller finds the new leader.
func (n *Node) applyBatchInLine(entries [][]byte) ([]error, uint64, error) {
	if err := n.canAppend("journal batch"); err != nil {
		return nil, 0, err
	}
	results, last := n.applyInLine(entries, true)
	if last == 0 && !slices.ContainsFunc(results, func(err error) bool { return !errors.Is(err, ErrNotLeader) }) {
		return nil, 0, ErrNotLeader
	}
	return results, last, nil
}
