package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/store"
)

// ErrNoQuorum means this node has lost touch with a quorum and, in CP mode,
// refuses what it cannot serve consistently.
var ErrNoQuorum = errors.New("no quorum")

// fallback is AP mode's answer to quorum loss (docs/design.md, "AP and CP"):
// writes go to a journal on disk and into a local overlay of the registry
// that this node's reads show at once; when quorum returns, the journal is
// replayed through Raft in order and the overlay dropped.
type fallback struct {
	n       *Node
	journal *store.Journal

	mu      sync.RWMutex
	overlay *fsm.Registry // nil unless journal writes are pending
	seq     uint64        // local index for overlay changes

	replayMu sync.Mutex
	// lastQuorum is when this node last had quorum (unix ns).
	lastQuorum atomic.Int64
}

func newFallback(n *Node, j *store.Journal) *fallback {
	fb := &fallback{n: n, journal: j}
	fb.lastQuorum.Store(time.Now().UnixNano())
	return fb
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
	n.fb.mu.RLock()
	if ov := n.fb.overlay; ov != nil {
		defer n.fb.mu.RUnlock()
		fn(ov)
		return
	}
	n.fb.mu.RUnlock()
	n.fsm.Read(fn)
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

// overlayLocked returns the overlay, building it from the FSM and the
// journal when absent. fb.mu must be held for writing.
func (fb *fallback) overlayLocked() *fsm.Registry {
	if fb.overlay != nil {
		return fb.overlay
	}
	ov := fb.n.readBase() // the durable state while the node catches up
	fb.seq = max(fb.seq, ov.Version())
	for _, rec := range fb.journal.Records() {
		if cmd, err := fsm.Decode(rec); err == nil {
			fb.seq++
			_ = ov.Apply(fb.seq, cmd, &fsm.Change{})
		}
	}
	fb.overlay = ov
	return ov
}

// loadOverlay shows journal writes left from before a restart.
func (fb *fallback) loadOverlay() {
	if fb.journal.Len() == 0 {
		return
	}
	fb.mu.Lock()
	fb.overlayLocked()
	fb.mu.Unlock()
	fb.n.log.Warn("journal holds writes from AP fallback; they will be replayed when quorum returns",
		"entries", fb.journal.Len())
	fb.n.publish(fsm.Change{All: true})
}

// record accepts a write without quorum: journal first (durable), then the
// overlay, then the change notice for the caches.
func (fb *fallback) record(entry []byte) (uint64, error) {
	fb.mu.Lock()
	ov := fb.overlayLocked()
	if app, id, ok := fsm.InstanceKey(entry); ok && ov.Get(app, id) == nil {
		fb.mu.Unlock()
		return 0, fmt.Errorf("%s %s/%s: %w", fsm.TypeOf(entry), app, id, fsm.ErrInstanceNotFound)
	}
	buf := append([]byte(nil), entry...)
	if err := fsm.Stamp(buf, time.Now().UnixMilli()); err != nil {
		fb.mu.Unlock()
		return 0, err
	}
	cmd, err := fsm.Decode(buf)
	if err != nil {
		fb.mu.Unlock()
		return 0, err
	}
	if err := fb.journal.Append(buf); err != nil {
		fb.mu.Unlock()
		return 0, err
	}
	fb.seq++
	ch := fsm.Change{Index: fb.seq, Type: cmd.Type}
	err = ov.Apply(fb.seq, cmd, &ch)
	fb.mu.Unlock()
	fb.n.publish(ch)
	fb.n.log.Info("accepted write in AP fallback", "type", cmd.Type.String(), "journal_entries", fb.journal.Len())
	return 0, err
}

// replay pushes the journal through Raft in order. A cancel loses to a
// newer registration of the same instance made elsewhere meanwhile; a
// register loses to a stored record with a newer lastDirtyTimestamp (the
// FSM's register rule). Writes whose instance is gone are dropped.
func (fb *fallback) replay(ctx context.Context) error {
	fb.replayMu.Lock()
	defer fb.replayMu.Unlock()
	recs := fb.journal.Records()
	if len(recs) == 0 {
		return nil
	}
	done, skipped := 0, 0
	for _, rec := range recs {
		cmd, err := fsm.Decode(rec)
		if err != nil {
			done++ // unreadable: it could never apply
			continue
		}
		if kb, ok := cmd.Body.(*fsm.KeyBody); ok && cmd.Type == fsm.CmdCancel {
			var e *fsm.Entry
			fb.n.fsm.Read(func(r *fsm.Registry) { e = r.Get(kb.App, kb.ID) })
			if e != nil && e.Instance.LastDirtyTimestamp > cmd.Ts {
				done++
				skipped++
				continue
			}
		}
		if _, err := fb.n.applyThrough(ctx, rec); err != nil {
			if errors.Is(err, fsm.ErrInstanceNotFound) {
				done++
				skipped++
				continue
			}
			if dropErr := fb.journal.DropFirst(done); dropErr != nil {
				fb.n.log.Error("trimming replayed journal entries failed", "error", dropErr)
			}
			return fmt.Errorf("replay journal: %w", err)
		}
		done++
	}
	if err := fb.journal.DropFirst(done); err != nil {
		return fmt.Errorf("replay journal: %w", err)
	}
	fb.mu.Lock()
	fb.overlay = nil
	fb.mu.Unlock()
	fb.n.log.Info("replayed AP fallback journal", "entries", done, "skipped", skipped)
	fb.n.publish(fsm.Change{All: true})
	return nil
}

// monitor watches quorum and replays the journal once quorum is back.
func (fb *fallback) monitor(stop <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	wasLost := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		lost := fb.n.QuorumLost()
		if lost != wasLost {
			wasLost = lost
			fb.n.log.Warn("quorum changed", "lost", lost, "mode", fb.n.Mode())
		}
		if !lost && fb.n.HasQuorum() && fb.journal.Len() > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := fb.replay(ctx); err != nil {
				fb.n.log.Warn("journal replay incomplete; will retry", "error", err)
			}
			cancel()
		}
	}
}
