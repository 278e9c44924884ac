package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
	"github.com/heureka-registry/heureka/store"
)

// ErrNoQuorum means this node has lost touch with a quorum and, in CP mode,
// refuses what it cannot serve consistently.
var ErrNoQuorum = errors.New("no quorum")

// ErrJournalFull means this node lost quorum in AP mode and its fallback
// journal reached its limits: the write is refused (503) until quorum
// returns and the journal is replayed.
var ErrJournalFull = errors.New("no quorum and the AP fallback journal is full")

// fallback is AP mode's answer to quorum loss (docs/design.md, "AP and CP"):
// writes go to a journal on disk and into a local overlay of the registry
// that this node's reads show at once; when quorum returns, the journal is
// replayed through Raft in order and the overlay dropped.
type fallback struct {
	n       *Node
	journal *store.Journal

	// mu guards the overlay and orders the journal's appends and trims
	// with it. The invariant (checkOverlay): the overlay exists exactly
	// while the journal holds entries, and it is always the registry this
	// node holds plus the journal's writes, rebuilt when that registry
	// moves on. A refused write leaves neither.
	mu      sync.RWMutex
	overlay *fsm.Registry // nil unless journal writes are pending
	// baseIndex is the FSM index the overlay was built on; onDurable says
	// it was built on the durable state instead (before the read gate
	// first opened).
	baseIndex uint64
	onDurable bool
	// replayed counts the journal's first records the cluster applied but
	// the journal could not trim yet (a full disk): they are neither shown
	// again nor sent again, and the next replay trims them first.
	replayed int
	seq      uint64 // local index for overlay changes

	// replaying is held by the one replay running: a channel rather than a
	// mutex, so that a write waiting behind a replay gives up at its own
	// deadline.
	replaying chan struct{}
	// refused counts writes refused because the journal was full.
	refused atomic.Uint64
	// lastQuorum is when this node last had quorum (unix ns).
	// Its clock starts when Raft runs (startRaft).
	lastQuorum atomic.Int64
}

func newFallback(n *Node, j *store.Journal) *fallback {
	return &fallback{n: n, journal: j, replaying: make(chan struct{}, 1)}
}

// quorumWait is how long a node rides out a missing leader (an election)
// before it declares quorum lost.
func (n *Node) quorumWait() time.Duration {
	return max(2*n.cfg.ElectionTimeout, time.Second)
}

// QuorumLost reports whether this node has been without quorum for longer
// than an election takes.
func (n *Node) QuorumLost() bool {
	if n.HasQuorum() {
		n.fb.lastQuorum.Store(time.Now().UnixNano())
		return false
	}
	return time.Since(time.Unix(0, n.fb.lastQuorum.Load())) > n.quorumWait()
}

// InFallback reports whether this node serves AP fallback: quorum lost in
// AP mode, or journal writes still waiting to be replayed.
func (n *Node) InFallback() bool {
	return (n.QuorumLost() && n.Mode() == ModeAP) || n.fb.journal.Len() > 0
}

// Read runs fn on the registry this node's reads show: the FSM's, or in AP
// fallback the overlay with the journal's writes applied.
func (n *Node) Read(fn func(r *fsm.Registry)) {
	if !n.readOverlay(fn) {
		n.fsm.Read(fn)
	}
}

// readOverlay runs fn on the AP fallback overlay, holding it for the call,
// and reports whether there was one.
func (n *Node) readOverlay(fn func(r *fsm.Registry)) bool {
	fb := n.fb
	fb.mu.RLock()
	if fb.overlay != nil && fb.overlayBehind() {
		// The FSM moved on under the overlay (a catch-up before the
		// replay): rebuild it, so reads never show a copy that drifted.
		fb.mu.RUnlock()
		fb.mu.Lock()
		if fb.overlay != nil && fb.overlayBehind() {
			fb.overlay = fb.buildOverlay()
		}
		fb.mu.Unlock()
		fb.mu.RLock()
	}
	defer fb.mu.RUnlock()
	if ov := fb.overlay; ov != nil {
		fn(ov)
		return true
	}
	return false
}

// Observe registers fn for every change reads may see: FSM applies and
// overlay writes.
func (n *Node) Observe(fn func(fsm.Change)) {
	n.obsMu.Lock()
	n.observers = append(n.observers, fn)
	n.obsMu.Unlock()
}

func (n *Node) publish(c fsm.Change) {
	n.obsMu.RLock()
	defer n.obsMu.RUnlock()
	for _, fn := range n.observers {
		fn(c)
	}
}

// overlayBehind reports whether the overlay's base is no longer the
// registry this node holds: the FSM applied more since it was built, or the
// read gate opened since it was built on the durable state. fb.mu must be
// held.
func (fb *fallback) overlayBehind() bool {
	if fb.onDurable {
		return fb.n.CaughtUpOnce()
	}
	return fb.n.fsm.AppliedIndex() != fb.baseIndex
}

// buildOverlay builds the registry reads show in AP fallback: a private copy
// of the durable state (the FSM once it caught up, else snapshot plus log)
// with the journal's writes applied. It sets baseIndex; fb.mu must be held
// for writing, and the caller decides whether to keep the result.
func (fb *fallback) buildOverlay() *fsm.Registry {
	ov, base, durable := fb.n.readBase()
	fb.baseIndex, fb.onDurable = base, durable
	fb.seq = max(fb.seq, ov.Version())
	for _, rec := range fb.journal.Records()[fb.replayed:] {
		if cmd, err := fsm.Decode(rec); err == nil {
			fb.seq++
			_ = ov.Apply(fb.seq, cmd, &fsm.Change{})
		}
	}
	return ov
}

// rebuildOverlay sets the overlay from the FSM and the journal records
// still to replay, or drops it when there are none. fb.mu must be held.
func (fb *fallback) rebuildOverlay() {
	fb.overlay = nil
	if fb.pending() > 0 {
		fb.overlay = fb.buildOverlay()
	}
}

// pending is how many journal records wait for their replay. fb.mu must be
// held.
func (fb *fallback) pending() int { return fb.journal.Len() - fb.replayed }

// checkOverlay reports a broken overlay invariant: an overlay without
// journal entries to replay (reads frozen on an old copy), or such entries
// without an overlay (reads missing acknowledged writes). fb.mu must be
// held.
func (fb *fallback) checkOverlay() error {
	switch n := fb.pending(); {
	case fb.overlay != nil && n == 0:
		return errors.New("AP overlay present with an empty journal")
	case fb.overlay == nil && n > 0:
		return fmt.Errorf("no AP overlay while the journal holds %d entries", n)
	}
	return nil
}

// repairOverlay restores the overlay invariant if something broke it, and
// says so: the invariant is kept by record and replay, so this is a bug's
// last line of defence, not a path the node is meant to take.
func (fb *fallback) repairOverlay() {
	// The common case, every tick of the monitor, takes only the read lock
	// that every registry read takes too.
	fb.mu.RLock()
	err := fb.checkOverlay()
	fb.mu.RUnlock()
	if err == nil {
		return
	}
	fb.mu.Lock()
	err = fb.checkOverlay()
	if err != nil {
		fb.rebuildOverlay()
	}
	fb.mu.Unlock()
	if err != nil {
		fb.n.log.Error("repaired the AP overlay", "error", err)
		fb.n.publish(fsm.Change{All: true})
	}
}

// loadOverlay shows journal writes left from before a restart.
func (fb *fallback) loadOverlay() {
	if fb.journal.Len() == 0 {
		return
	}
	fb.mu.Lock()
	fb.overlay = fb.buildOverlay()
	fb.mu.Unlock()
	fb.n.log.Warn("journal holds writes from AP fallback; they will be replayed when quorum returns",
		"entries", fb.journal.Len())
	fb.n.publish(fsm.Change{All: true})
}

// record accepts a write without quorum: judged on a candidate overlay,
// which applies it first (the FSM's own verdict: a write it refuses, such
// as a metadata map past its bound, leaves the content as it was), then
// journaled (durable), then the candidate becomes the overlay and the
// caches hear of it. A refused write (unknown instance, bad input, refused
// by the FSM, journal or disk full) is not journaled and leaves no trace.
func (fb *fallback) record(entry []byte) (uint64, error) {
	fb.mu.Lock()
	ov := fb.overlay
	if ov == nil || fb.overlayBehind() {
		ov = fb.buildOverlay()
		if fb.pending() > 0 {
			fb.overlay = ov // rebuilt on the FSM as it is now: it stands whatever the write's fate
		}
	}
	cmd, buf, err := fb.judge(entry, ov)
	if err == nil {
		err = fb.journalErr(entry, fb.journal.Room(len(buf)))
	}
	if err != nil {
		fb.mu.Unlock()
		return 0, err
	}
	ch := fsm.Change{Index: fb.seq + 1, Type: cmd.Type}
	if err := ov.Apply(fb.seq+1, cmd, &ch); err != nil {
		fb.mu.Unlock()
		return 0, err
	}
	if err := fb.journal.Append(buf); err != nil {
		// The candidate holds a write the journal does not (the disk
		// failed it): when it is the overlay, build that again from the
		// FSM and the journal.
		if ov == fb.overlay {
			fb.rebuildOverlay()
		}
		fb.mu.Unlock()
		return 0, fb.journalErr(entry, err)
	}
	fb.overlay = ov
	fb.seq++
	fb.mu.Unlock()
	fb.n.publish(ch)
	fb.n.log.Info("accepted write in AP fallback", "type", cmd.Type.String(), "journal_entries", fb.journal.Len())
	return 0, nil
}

// journalErr names a journal's refusal of entry (nil: none); a full
// journal is counted and answered as ErrJournalFull.
func (fb *fallback) journalErr(entry []byte, err error) error {
	if errors.Is(err, store.ErrJournalFull) {
		fb.refused.Add(1)
		return fmt.Errorf("%s without quorum: %w: %w", fsm.TypeOf(entry), ErrJournalFull, err)
	}
	return err
}

// judge checks a write against the overlay it would change and returns the
// command and the entry to journal (stamped with this node's clock, a
// cancel made conditional). It changes nothing.
func (fb *fallback) judge(entry []byte, ov *fsm.Registry) (fsm.Command, []byte, error) {
	if app, id, ok := fsm.InstanceKey(entry); ok && ov.Get(app, id) == nil {
		return fsm.Command{}, nil, fmt.Errorf("%s %s/%s: %w", fsm.TypeOf(entry), app, id, fsm.ErrInstanceNotFound)
	}
	buf := append([]byte(nil), entry...)
	if err := fsm.Stamp(buf, time.Now().UnixMilli()); err != nil {
		return fsm.Command{}, nil, err
	}
	cmd, err := fsm.Decode(buf)
	if err == nil {
		buf, err = fb.conditional(&cmd, ov, buf)
	}
	return cmd, buf, err
}

// Replay sends the journal to the leader in batches: each batch is one
// round trip (one internal call from a follower) whose entries the leader
// appends together, instead of one Raft round trip per record.
const (
	replayBatchEntries = 512
	replayBatchBytes   = 1 << 20
)

// replay pushes the journal through Raft in order. A cancel, status
// override or metadata change loses to a registration of the same instance
// made elsewhere after it was acknowledged (the FSM decides: conditional
// set the registration it applies to and when it was made); a
// register loses to a stored record with a newer lastDirtyTimestamp (the
// FSM's register rule). Writes the FSM refuses (their instance is gone) are
// dropped; a batch cut short by a leader change keeps its unapplied tail,
// from the first failure on, for the next attempt, so order is kept.
func (fb *fallback) replay(ctx context.Context) error {
	return fb.replayWith(ctx, fb.applyBatch)
}

// deliver hands the journal of a node that was removed while it was cut off
// to the leader of the cluster that removed it, which a peer named
// (membercheck.go): the writes were acknowledged, and this node will never
// have a leader of its own again.
func (fb *fallback) deliver(ctx context.Context) error {
	addr := fb.n.removedLeader()
	if addr == "" {
		return errRemovedNoLeader
	}
	err := fb.replayWith(ctx, func(ctx context.Context, entries [][]byte) ([]error, error) {
		if len(entries) == 0 {
			return nil, nil
		}
		results, _, err := fb.n.peers().ApplyBatch(ctx, addr, entries)
		return results, err
	})
	if err == nil {
		fb.n.log.Warn("handed the AP fallback journal to the cluster that removed this node", "leader_http", addr)
	}
	return err
}

// replayWith replays the journal through apply, which applies a batch on
// the leader and returns the FSM's answer for each entry.
func (fb *fallback) replayWith(ctx context.Context, apply func(context.Context, [][]byte) ([]error, error)) error {
	select {
	case fb.replaying <- struct{}{}:
		defer func() { <-fb.replaying }()
	case <-ctx.Done():
		return fmt.Errorf("replay journal: waiting for the replay under way: %v: %w", ctx.Err(), ErrNoLeader)
	}
	if err := fb.trimReplayed(0); err != nil {
		return err
	}
	recs := fb.journal.Records()
	if len(recs) == 0 {
		return nil
	}
	done, skipped := 0, 0
	var failed error
	for done < len(recs) && failed == nil {
		end, size := done, 0
		for end < len(recs) && end-done < replayBatchEntries && (end == done || size+len(recs[end]) <= replayBatchBytes) {
			size += len(recs[end])
			end++
		}
		send, pos := make([][]byte, 0, end-done), make([]int, 0, end-done)
		for i := done; i < end; i++ {
			if _, err := fsm.Decode(recs[i]); err != nil {
				skipped++ // unreadable: it could never apply
				continue
			}
			send, pos = append(send, recs[i]), append(pos, i)
		}
		results, err := apply(ctx, send)
		if err != nil {
			if len(pos) > 0 {
				end = pos[0]
			}
			failed = err
		}
		for k, res := range results {
			if res == nil {
				continue
			}
			if errors.Is(res, fsm.ErrInstanceNotFound) || errors.Is(res, fsm.ErrBadCommand) {
				skipped++
				continue
			}
			end, failed = pos[k], res
			break
		}
		done = end
	}
	if err := fb.trimReplayed(done); err != nil {
		return err
	}
	if failed != nil {
		fb.n.log.Info("replayed part of the AP fallback journal", "entries", done, "skipped", skipped, "left", len(recs)-done)
		return fmt.Errorf("replay journal: %w", failed)
	}
	fb.n.log.Info("replayed AP fallback journal", "entries", done, "skipped", skipped)
	return nil
}

// trimReplayed counts applied more of the journal's first records as
// replayed (0: none, only those an earlier replay left counted) and drops
// every record counted. The FSM now holds them; writes journaled meanwhile (or not replayed yet)
// must stay visible, so the overlay is rebuilt from them rather than
// dropped, also when the trim fails (then the records stay in the file,
// counted in replayed, and the next replay trims them before it sends
// anything). Counting them and rebuilding the overlay happen under one
// hold of fb.mu: in between, with every record counted, the overlay
// would stand over an empty journal.
func (fb *fallback) trimReplayed(applied int) error {
	fb.mu.Lock()
	fb.replayed += applied
	n := fb.replayed
	if n == 0 {
		fb.mu.Unlock()
		return nil
	}
	err := fb.journal.DropFirst(n)
	if err == nil {
		fb.replayed = 0
		// Before the gate first opens, reads without the overlay come
		// from the durable view, built once from the FSM and the log as
		// they were then: without the replayed writes, which this node
		// acknowledged. Built again on the next read, it takes them from
		// the FSM or the log (throughLeader waited for this node to apply
		// them, a second at most; replicated, they are in its log).
		fb.n.dropDurableView()
	}
	fb.rebuildOverlay()
	fb.mu.Unlock()
	fb.n.publish(fsm.Change{All: true})
	if err != nil {
		return fmt.Errorf("replay journal: trim %d replayed entries: %w", n, err)
	}
	return nil
}

// conditional makes a cancel, status override or metadata change this node
// journals apply, when the journal is replayed, only to the registration
// it saw (RegisteredAt) or to one made before the change was acknowledged
// (JournaledAt): one of the instance made elsewhere after it then stands,
// whenever the journal reaches the cluster; one made before it, which this
// node could not see, takes the change, as real-time order has it. The
// FSM decides on the leader, in log order; this node's own FSM may not have
// caught up with that registration when it replays. A record the journal
// itself registered (the overlay's, not the FSM's) is replayed before the
// change, so that change stays as it is.
//
// It returns the entry to journal, and sets cmd's body to match it.
func (fb *fallback) conditional(cmd *fsm.Command, ov *fsm.Registry, entry []byte) ([]byte, error) {
	var app, id string
	var at, journaledAt *int64
	var cond any
	switch b := cmd.Body.(type) {
	case *fsm.KeyBody:
		if cmd.Type != fsm.CmdCancel {
			return entry, nil
		}
		c := *b
		app, id, at, journaledAt, cond = c.App, c.ID, &c.RegisteredAt, &c.JournaledAt, &c
	case *fsm.OverrideBody:
		c := *b
		app, id, at, journaledAt, cond = c.App, c.ID, &c.RegisteredAt, &c.JournaledAt, &c
	case *fsm.MetadataBody:
		c := *b
		app, id, at, journaledAt, cond = c.App, c.ID, &c.RegisteredAt, &c.JournaledAt, &c
	default:
		return entry, nil
	}
	if *at != 0 {
		return entry, nil
	}
	var committed *fsm.Entry
	fb.n.fsm.Read(func(r *fsm.Registry) { committed = r.Get(app, id) })
	if held := ov.Get(app, id); committed == nil || held == nil || !held.SameRecord(committed) {
		return entry, nil
	}
	*at, *journaledAt = committed.RegistrationTs, cmd.Ts
	out, err := fsm.Encode(cmd.Type, cond)
	if err != nil {
		return nil, err
	}
	if err := fsm.Stamp(out, cmd.Ts); err != nil {
		return nil, err
	}
	cmd.Body = cond
	return out, nil
}

// applyBatch applies entries through the leader in one round trip and
// returns the FSM's answer for each. An error means none is known applied.
func (fb *fallback) applyBatch(ctx context.Context, entries [][]byte) ([]error, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	n := fb.n
	if h := n.cfg.hooks; h != nil && h.beforeReplayBatch != nil {
		if err := h.beforeReplayBatch(entries); err != nil {
			return nil, err
		}
	}
	var results []error
	_, err := n.throughLeader(ctx, "journal batch",
		func() (uint64, error) {
			var idx uint64
			var err error
			results, idx, err = n.applyBatchLocal(ctx, entries)
			return idx, err
		},
		func(ctx context.Context, addr string) (uint64, error) {
			var idx uint64
			var err error
			results, idx, err = n.peers().ApplyBatch(ctx, addr, entries)
			return idx, err
		})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// applyBatchLocal appends entries on this node, which must be the leader,
// all at once (raft pipelines them into few log writes and replication
// rounds), and waits for each. It returns each entry's answer and the last
// index applied; the followers are told of the commit at once (nudge).
// The entries are copied first: the journal keeps its own until they are
// answered, and a forwarded batch's are views of the request's body.
func (n *Node) applyBatchLocal(ctx context.Context, entries [][]byte) ([]error, uint64, error) {
	copies := make([][]byte, len(entries))
	packable := true
	for i, e := range entries {
		copies[i] = append([]byte(nil), e...)
		packable = packable && fsm.Packable(fsm.TypeOf(e))
	}
	if packable && n.packingAllowed() {
		return n.applyBatchInLine(copies)
	}
	results, last, err := n.applyEntries(ctx, "journal batch", copies)
	if last > 0 {
		n.nudger.nudge(last)
	}
	return results, last, err
}

// applyEntries is applyBatchLocal without the nudge and the copies; what
// names the entries for the error of a full disk. Each entry is stamped
// with the leader's time in place and handed to Raft, so the entries are
// the caller's to give away: the renewal batcher encodes its entries, a
// second of heartbeats each, for this call alone.
func (n *Node) applyEntries(ctx context.Context, what string, entries [][]byte) ([]error, uint64, error) {
	if err := n.canAppend(what); err != nil {
		return nil, 0, err
	}
	now := time.Now().UnixMilli()
	futures := make([]raft.ApplyFuture, len(entries))
	results := make([]error, len(entries))
	for i, entry := range entries {
		if err := fsm.Stamp(entry, now); err != nil {
			results[i] = err
			continue
		}
		futures[i] = n.raft.Apply(entry, n.cfg.ApplyTimeout)
	}
	// One deadline for the batch: an entry not committed by then is
	// answered as not committed (the replay keeps it, and what follows,
	// for its next attempt).
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	var last uint64
	for i, f := range futures {
		if f == nil {
			continue
		}
		idx, err := n.applyResult(entries[i], f, ctx.Done())
		last = max(last, idx)
		results[i] = err
	}
	return results, last, nil
}

// canAppend refuses a batch of entries (named what) on a node that does
// not lead (ErrNotLeader: the caller finds the leader) or whose disk is
// full.
func (n *Node) canAppend(what string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	return n.diskFull(what)
}

// monitor watches quorum and replays the journal once quorum is back.
func (fb *fallback) monitor(stop <-chan struct{}) {
	wasLost := false
	tick.Every(stop, 100*time.Millisecond, func() {
		fb.repairOverlay()
		lost := fb.n.QuorumLost()
		if lost != wasLost {
			wasLost = lost
			fb.n.log.Warn("quorum changed", "lost", lost, "mode", fb.n.Mode())
		}
		if fb.journal.Len() == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		switch {
		case !lost && fb.n.HasQuorum():
			if err := fb.replay(ctx); err != nil {
				fb.n.log.Warn("journal replay incomplete; will retry", "error", err)
			}
		case lost:
			// Cut off with writes to replay: find out whether this node
			// was removed meanwhile, and if so hand the writes over.
			if fb.n.confirmMember(ctx) != nil {
				if err := fb.deliver(ctx); err != nil {
					fb.n.log.Warn("handing the journal of a removed node over incomplete; will retry", "error", err)
				}
			}
		}
	})
}
