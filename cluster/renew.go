package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

type renewRequest struct {
	App                string `json:"app"`
	ID                 string `json:"id"`
	LastDirtyTimestamp int64  `json:"last_dirty_timestamp,omitempty"`
}

// Renew records a heartbeat for (app, id). It answers fsm.ErrInstanceNotFound
// (HTTP 404, the client re-registers) when the leader holds no such
// instance, when its effective status is UNKNOWN, or when the client's
// lastDirtyTimestamp is newer than the stored one (spec §4.4). The lease is
// renewed in the leader's memory at once and reaches the log with the next
// renewal batch.
func (n *Node) Renew(ctx context.Context, app, id string, lastDirty int64) error {
	req := renewRequest{App: app, ID: id, LastDirtyTimestamp: lastDirty}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	for {
		if n.IsLeader() {
			err := n.renewLocal(req)
			if !errors.Is(err, ErrNotLeader) {
				return err
			}
		}
		err := n.forwardJSON(ctx, pathRenew, req)
		if !errors.Is(err, ErrNotLeader) {
			return err
		}
	}
}

func (n *Node) renewLocal(req renewRequest) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	var e *fsm.Entry
	n.fsm.Read(func(r *fsm.Registry) { e = r.Get(req.App, req.ID) })
	if e == nil {
		return fmt.Errorf("renew %s/%s: %w", req.App, req.ID, fsm.ErrInstanceNotFound)
	}
	if fsm.RenewStatus(e) == fsm.StatusUnknown {
		return fmt.Errorf("renew %s/%s: status UNKNOWN, register again: %w", req.App, req.ID, fsm.ErrInstanceNotFound)
	}
	if err := n.renew.add(fsm.Renewal{App: req.App, ID: req.ID, Ts: time.Now().UnixMilli()}); err != nil {
		return err
	}
	if req.LastDirtyTimestamp > e.Instance.LastDirtyTimestamp {
		// The client changed since it last registered; renewing is not
		// enough, it must register again (spec §4.4 step 5).
		return fmt.Errorf("renew %s/%s: client lastDirtyTimestamp is newer: %w", req.App, req.ID, fsm.ErrInstanceNotFound)
	}
	return nil
}

// renewBatcher gathers renewals on the leader and writes them as one
// CmdRenewBatch entry per interval.
type renewBatcher struct {
	n       *Node
	mu      sync.Mutex
	pending map[string]fsm.Renewal
}

func newRenewBatcher(n *Node) *renewBatcher {
	return &renewBatcher{n: n, pending: map[string]fsm.Renewal{}}
}

func (b *renewBatcher) add(rn fsm.Renewal) error {
	if b.n.cfg.RenewBatchInterval == 0 {
		return b.write([]fsm.Renewal{rn})
	}
	b.mu.Lock()
	b.pending[rn.App+"\x00"+rn.ID] = rn
	b.mu.Unlock()
	return nil
}

func (b *renewBatcher) take() []fsm.Renewal {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return nil
	}
	out := make([]fsm.Renewal, 0, len(b.pending))
	for _, rn := range b.pending {
		out = append(out, rn)
	}
	clear(b.pending)
	return out
}

func (b *renewBatcher) write(batch []fsm.Renewal) error {
	entry, err := fsm.Encode(fsm.CmdRenewBatch, &fsm.RenewBatchBody{Renewals: batch})
	if err != nil {
		return err
	}
	_, err = b.n.applyLocal(entry)
	return err
}

// run flushes batches until stop closes (leadership lost or shutdown). What
// is pending then is dropped: a new leader grants every lease a full
// duration of grace, which covers renewals that never reached the log.
func (b *renewBatcher) run(stop <-chan struct{}) {
	if b.n.cfg.RenewBatchInterval == 0 {
		<-stop
		return
	}
	t := time.NewTicker(b.n.cfg.RenewBatchInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			b.take()
			return
		case <-t.C:
			if batch := b.take(); batch != nil {
				if err := b.write(batch); err != nil {
					b.n.log.Warn("writing renewal batch failed", "renewals", len(batch), "error", err)
				}
			}
		}
	}
}

func sleepCtx(ctx context.Context, stop <-chan struct{}) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errors.New("shutting down")
	case <-time.After(25 * time.Millisecond):
		return nil
	}
}
