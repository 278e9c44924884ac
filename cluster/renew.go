package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
	"github.com/heureka-registry/heureka/nodeapi"
)

type renewRequest struct {
	App                string `json:"app"`
	ID                 string `json:"id"`
	LastDirtyTimestamp int64  `json:"last_dirty_timestamp,omitempty"`
	// Replicated marks a heartbeat an Eureka peer replicated to this
	// cluster: it renews the lease (and counts for self-preservation) but is
	// never replicated out again.
	Replicated bool `json:"replicated,omitempty"`
}

// RenewReplicated records a heartbeat an Eureka peer replicated to this
// cluster. It answers as Renew does; the caller compares the
// lastDirtyTimestamps for the 409 a peer expects.
func (n *Node) RenewReplicated(ctx context.Context, app, id string, lastDirty int64) error {
	return n.renewFrom(ctx, renewRequest{App: app, ID: id, LastDirtyTimestamp: lastDirty, Replicated: true})
}

// OnLocalRenew sets fn to be called on the leader for every heartbeat it
// accepts from heureka's own clients (not from Eureka peers), so that
// outbound replication can pass them on. fn must be quick.
func (n *Node) OnLocalRenew(fn func(app, id string)) {
	n.localRenew.Store(&fn)
}

// Renew records a heartbeat for (app, id). It answers fsm.ErrInstanceNotFound
// (HTTP 404, the client re-registers) when the registry holds no such
// instance, when its effective status is UNKNOWN, or when the client's
// lastDirtyTimestamp is newer than the stored one (docs/eureka-api.md, "Renew").
//
// The leader renews the lease in its memory at once; the log gets it with
// the next renewal batch. A follower judges the heartbeat against its own
// applied state (docs/leases.md, "Renewals": a fresh FSM view is enough: an eviction reaches every
// follower within a replication round trip) and passes it to the leader in
// a batch within 100 ms, so a heartbeat costs no round trip to the leader.
func (n *Node) Renew(ctx context.Context, app, id string, lastDirty int64) error {
	return n.renewFrom(ctx, renewRequest{App: app, ID: id, LastDirtyTimestamp: lastDirty})
}

func (n *Node) renewFrom(ctx context.Context, req renewRequest) error {
	if n.IsLeader() { // the common case on the leader: no context, no timer
		if err := n.renewLocal(req); !errors.Is(err, ErrNotLeader) {
			return err
		}
	}
	if err := n.checkMember(); err != nil {
		return fmt.Errorf("renew %s/%s: %w", req.App, req.ID, err)
	}
	if n.QuorumLost() {
		return n.renewWithoutQuorum(req)
	}
	return n.renewFollower(req)
}

// renewWithoutQuorum answers a heartbeat on a node that lost quorum: CP
// refuses; AP accepts it for an instance this node knows. Nothing is
// recorded: no leader evicts while quorum is lost, and the leader that
// comes next grants every lease a full duration of grace.
func (n *Node) renewWithoutQuorum(req renewRequest) error {
	if n.Mode() == ModeCP {
		return fmt.Errorf("renew %s/%s: %w", req.App, req.ID, ErrNoQuorum)
	}
	// Judged by what this node's reads show: after a start, before the
	// gate opened, that is the durable state, not the bare snapshot the
	// FSM holds (an instance cancelled since would be renewed, 200, and
	// its client would never register again).
	var e *fsm.Entry
	n.ReadDurable(func(r *fsm.Registry) { e = r.Get(req.App, req.ID) })
	if e == nil {
		return fmt.Errorf("renew %s/%s: %w", req.App, req.ID, fsm.ErrInstanceNotFound)
	}
	return nil
}

// judgeRenewal applies docs/eureka-api.md, "Renew" to a heartbeat against this node's state:
// whether it renews the lease, whether the node holds the instance at all
// (a 404 for one it holds, with status UNKNOWN, is already the answer), and
// the answer the client gets. e is the instance's entry in the state it
// judges by (leaseIn), nil when that holds none.
func judgeRenewal(req renewRequest, e *fsm.Entry) (renew, held bool, err error) {
	switch {
	case e == nil:
		return false, false, fmt.Errorf("renew %s/%s: %w", req.App, req.ID, fsm.ErrInstanceNotFound)
	case fsm.RenewStatus(e) == fsm.StatusUnknown:
		return false, true, fmt.Errorf("renew %s/%s: status UNKNOWN, register again: %w", req.App, req.ID, fsm.ErrInstanceNotFound)
	case req.LastDirtyTimestamp > e.Instance.LastDirtyTimestamp:
		// The client changed since it last registered; renewing is not
		// enough, it must register again (docs/eureka-api.md, "Renew").
		return true, true, fmt.Errorf("renew %s/%s: client lastDirtyTimestamp is newer: %w", req.App, req.ID, fsm.ErrInstanceNotFound)
	}
	return true, true, nil
}

// leaseIn is the entry of app/id that a heartbeat is judged by, in the
// FSM or (durable) in ReadDurable's view. Both are direct calls, so that
// the closure and the entry it sets stay on the stack: a look through a
// function value allocated both for every heartbeat.
func (n *Node) leaseIn(app, id string, durable bool) (e *fsm.Entry) {
	look := func(r *fsm.Registry) { e = r.Lease(app, id) }
	if durable {
		n.ReadDurable(look)
	} else {
		n.fsm.Read(look)
	}
	return e
}

func (n *Node) renewFollower(req renewRequest) error {
	durable := false
	if !n.CaughtUpOnce() {
		// The FSM is still catching up after a start: judged by it, a
		// heartbeat of an instance cancelled since the snapshot would be
		// answered 200 and then skipped when applied. The durable view
		// (the snapshot and the log) holds the cancel; an instance it
		// does not hold is asked of the leader, below. Asking the leader
		// for every heartbeat instead would send it a call for each of
		// this node's clients' heartbeats while it catches up.
		durable = true
	}
	renew, held, err := judgeRenewal(req, n.leaseIn(req.App, req.ID, durable))
	if renew {
		n.forwarder.add(req)
		return err
	}
	if !held {
		// This node may simply not have applied the registration yet (it
		// is catching up after a start, or the register went through
		// another node a moment ago): the leader decides.
		return n.renewAtLeader(req)
	}
	return err
}

// renewAtLeader passes one heartbeat to the leader and waits for its answer.
func (n *Node) renewAtLeader(req renewRequest) error {
	addr := n.leaderHTTP()
	if addr == "" || addr == n.cfg.HTTPAdvertise {
		return fmt.Errorf("renew %s/%s: %w", req.App, req.ID, ErrNoLeader)
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	kind := nodeapi.RenewJudge
	if req.Replicated {
		kind = nodeapi.RenewReplicated
	}
	res, err := n.peers().RenewBatch(ctx, addr, kind, encodeRenewBatch([]renewRequest{req}))
	if err != nil {
		// A leader that does not answer (just died, or cut off) is no
		// leader to the client, who retries elsewhere: 503, not 500.
		return fmt.Errorf("renew %s/%s: %w", req.App, req.ID, noLeader(err))
	}
	if len(res) != 1 {
		return fmt.Errorf("renew %s/%s: leader answered %d results: %w", req.App, req.ID, len(res), ErrNoLeader)
	}
	switch res[0] {
	case renewOK:
		return nil
	case renewNotFound:
		return fmt.Errorf("renew %s/%s: %w", req.App, req.ID, fsm.ErrInstanceNotFound)
	}
	return fmt.Errorf("renew %s/%s: leader could not renew: %w", req.App, req.ID, ErrNoLeader)
}

func (n *Node) renewLocal(req renewRequest) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	// A 404 from a new leader that has not applied a registration
	// acknowledged before would send the client to register again for
	// nothing.
	var renew bool
	var err error
	if _, werr := n.holdsOnceCaughtUp(func() (held bool) {
		renew, held, err = judgeRenewal(req, n.leaseIn(req.App, req.ID, false))
		return held
	}); werr != nil {
		return werr
	}
	if !renew {
		return err
	}
	if rerr := n.recordRenewal(req, time.Now()); rerr != nil {
		return rerr
	}
	return err
}

// recordRenewal records on the leader a heartbeat judged to renew: it goes
// in the next renewal batch and counts for self-preservation.
func (n *Node) recordRenewal(req renewRequest, now time.Time) error {
	pending, err := n.renew.add(fsm.Renewal{App: req.App, ID: req.ID, Ts: now.UnixMilli()})
	if err != nil {
		return err
	}
	// An Eureka ring replicates each heartbeat to every heureka node it
	// lists, so one heartbeat arrives here several times within
	// milliseconds: it counts for self-preservation once per batch.
	if !req.Replicated || !pending {
		n.leases.rate.add(now, 1)
	}
	if fn := n.localRenew.Load(); fn != nil && !req.Replicated {
		(*fn)(req.App, req.ID)
	}
	return nil
}

// renewBatcher gathers renewals on the leader and writes them once per
// interval, as CmdRenewBatch entries of at most about renewEntryBytes.
type renewBatcher struct {
	n       *Node
	mu      sync.Mutex
	pending map[renewKey]fsm.Renewal
	// writing is the batch take handed out, until its write returned (and
	// the leader's registry holds it) or it was put back: in between its
	// renewals are neither pending nor applied, and the lease keeper, which
	// counts pending renewals, would take a lease renewed in it for one
	// that expired. That is the window in which instances renewing again
	// after self-preservation were evicted.
	writing []fsm.Renewal
}

// renewKey is an instance's key in the maps of renewals waiting to be
// passed on and in the leader's deadline schedule: a pair, not one string
// joined, which would be allocated for every heartbeat.
type renewKey struct{ app, id string }

func newRenewBatcher(n *Node) *renewBatcher {
	return &renewBatcher{n: n, pending: map[renewKey]fsm.Renewal{}}
}

// add queues a renewal for the next batch; pending reports whether the
// instance already had one queued.
func (b *renewBatcher) add(rn fsm.Renewal) (pending bool, err error) {
	if b.n.cfg.RenewBatchInterval == 0 {
		_, err := b.write([]fsm.Renewal{rn})
		return false, err
	}
	k := renewKey{rn.App, rn.ID}
	b.mu.Lock()
	_, pending = b.pending[k]
	b.pending[k] = rn
	b.mu.Unlock()
	return pending, nil
}

// pendingTimes returns the renewal time of every instance renewed since the
// last flush, so eviction sees renewals the log does not hold yet.
func (b *renewBatcher) pendingTimes() map[renewKey]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[renewKey]int64, len(b.pending)+len(b.writing))
	for _, rn := range b.writing {
		out[renewKey{rn.App, rn.ID}] = rn.Ts
	}
	for k, rn := range b.pending {
		out[k] = max(out[k], rn.Ts)
	}
	return out
}

// pendingAmong returns which of leases have a renewal waiting: in the
// next batch or in the batch being written.
func (b *renewBatcher) pendingAmong(leases []fsm.ExpiredLease) map[renewKey]bool {
	want := make(map[renewKey]bool, len(leases))
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range leases {
		k := renewKey{l.App, l.ID}
		_, want[k] = b.pending[k]
	}
	for _, rn := range b.writing {
		k := renewKey{rn.App, rn.ID}
		if _, named := want[k]; named {
			want[k] = true
		}
	}
	return want
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
	b.writing = out
	return out
}

// written ends what take began: the batch is in the registry, put back,
// or dropped.
func (b *renewBatcher) written() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writing = nil
}

// requeue puts back the renewals of a batch that was not written, except
// where a newer renewal of the same instance came in meanwhile.
func (b *renewBatcher) requeue(batch []fsm.Renewal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, rn := range batch {
		k := renewKey{rn.App, rn.ID}
		if _, newer := b.pending[k]; !newer {
			b.pending[k] = rn
		}
	}
}

// renewEntryBytes bounds the log entries a batch is written as: a second
// of a million instances' heartbeats (20,000-30,000, a MiB or more) goes
// in entries of about 48 KiB. As one entry it was copied whole at every
// step: bolt rewrote the log's last leaf, which held it, at the next
// append, Raft's transport and cache held it whole, and the codec's
// encoder grew a buffer for it from small. The entries of a batch are
// handed to Raft together, so they still share one log write and one
// replication round.
const renewEntryBytes = 48 << 10

// renewalBytes estimates a renewal's encoded size: its strings and the
// field names, headers and timestamp around them.
func renewalBytes(rn fsm.Renewal) int { return len(rn.App) + len(rn.ID) + 20 }

// write puts batch in the log, in entries of at most about renewEntryBytes.
// It returns the renewals of the entries that were not written, and why.
func (b *renewBatcher) write(batch []fsm.Renewal) ([]fsm.Renewal, error) {
	var chunks [][]fsm.Renewal
	var entries [][]byte
	for rest := batch; len(rest) > 0; {
		n, size := 1, renewalBytes(rest[0])
		for n < len(rest) && size+renewalBytes(rest[n]) <= renewEntryBytes {
			size += renewalBytes(rest[n])
			n++
		}
		chunks, entries = append(chunks, rest[:n]), append(entries, fsm.EncodeRenewBatch(rest[:n]))
		rest = rest[n:]
	}
	results, _, err := b.n.applyEntries(context.Background(), "renewal batch", entries)
	if err != nil {
		return batch, err
	}
	var failed []fsm.Renewal
	var errs []error
	for i, err := range results {
		if err != nil {
			failed = append(failed, chunks[i]...)
			errs = append(errs, err)
		}
	}
	return failed, errors.Join(errs...)
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
			b.written()
			return
		case <-t.C:
			if batch := b.take(); batch != nil {
				failed, err := b.write(batch)
				switch {
				case errors.Is(err, ErrDiskFull):
					// The leader still holds these leases: keep the
					// renewals for the batch that gets through once there
					// is room, so that eviction does not count them
					// missed. The node says once that the disk is full.
					b.requeue(failed)
				case err != nil:
					b.n.log.Warn("writing renewal batch failed", "renewals", len(failed), "of", len(batch), "error", err)
				}
				b.written()
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

// renewForwarder carries a follower's accepted heartbeats to the leader:
// it keeps the latest per instance and sends them as one binary batch
// every forwardInterval. What the leader cannot take yet (no leader, a
// leader change) is kept for the next batch, up to maxPendingRenewals.
type renewForwarder struct {
	n       *Node
	mu      sync.Mutex
	pending map[renewKey]renewRequest
}

const (
	forwardInterval    = 50 * time.Millisecond
	maxPendingRenewals = 200_000
	maxRenewBatchSend  = 20_000
	// maxRenewBatchBytes bounds a batch's encoding (renewSize each) well
	// below the body a leader reads (nodeapi, 8 MiB): 20,000 renewals of
	// names near their 256-byte bound would be over 10 MB.
	maxRenewBatchBytes = 4 << 20
)

// renewSize bounds a renewal's share of encodeRenewBatch's output.
func renewSize(r renewRequest) int { return len(r.App) + len(r.ID) + 3*binary.MaxVarintLen64 }

func newRenewForwarder(n *Node) *renewForwarder {
	return &renewForwarder{n: n, pending: map[renewKey]renewRequest{}}
}

func (f *renewForwarder) add(req renewRequest) {
	f.mu.Lock()
	if len(f.pending) < maxPendingRenewals {
		k := renewKey{req.App, req.ID}
		if old, ok := f.pending[k]; ok && !old.Replicated {
			req.Replicated = false // one local heartbeat in the interval is enough to pass it on
		}
		f.pending[k] = req
	}
	f.mu.Unlock()
}

func (f *renewForwarder) take(limit, maxBytes int) []renewRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]renewRequest, 0, min(len(f.pending), limit))
	size := 0
	for k, r := range f.pending {
		if len(out) == limit || (len(out) > 0 && size+renewSize(r) > maxBytes) {
			break
		}
		out = append(out, r)
		size += renewSize(r)
		delete(f.pending, k)
	}
	return out
}

// putBack returns renewals a send could not deliver, unless newer ones for
// the same instances arrived meanwhile.
func (f *renewForwarder) putBack(reqs []renewRequest) {
	f.mu.Lock()
	for _, r := range reqs {
		k := renewKey{r.App, r.ID}
		if _, newer := f.pending[k]; !newer && len(f.pending) < maxPendingRenewals {
			f.pending[k] = r
		}
	}
	f.mu.Unlock()
}

func (f *renewForwarder) run(stop <-chan struct{}) {
	tick.Every(stop, forwardInterval, f.flush)
}

// flush sends the pending renewals in batches until none are left or a
// batch comes back to be retried.
func (f *renewForwarder) flush() {
	for {
		batch := f.take(maxRenewBatchSend, maxRenewBatchBytes)
		if len(batch) == 0 {
			return
		}
		retry, err := f.send(batch)
		if err != nil {
			f.n.log.Debug("forwarding renewals failed; will retry", "renewals", len(batch), "error", err)
		}
		if len(retry) > 0 {
			// Not taken by a leader (none now, or it stepped down
			// mid-batch): keep them for the next tick.
			f.putBack(retry)
			return
		}
	}
}

// send passes one batch to the leader and returns the renewals it did not
// take and should be sent again: all of them when the leader could not be
// reached, else those it answered "not leader" (it stepped down mid-batch)
// or failed. A "not found" is final: the client was already answered from
// this node's state, and its next heartbeat is judged again here.
func (f *renewForwarder) send(batch []renewRequest) ([]renewRequest, error) {
	if f.n.IsLeader() {
		// This node became leader since it accepted them.
		results := make([]byte, len(batch))
		for i, r := range batch {
			results[i] = renewResultByte(f.n.renewLocal(r))
		}
		return f.unaccepted(batch, results), nil
	}
	addr := f.n.leaderHTTP()
	if addr == "" || addr == f.n.cfg.HTTPAdvertise {
		return batch, fmt.Errorf("renew batch: %w", ErrNoLeader)
	}
	// This node judged and answered every one of them (renewFollower): the
	// leader records them as they are (nodeapi.RenewAnswered). Replicated
	// heartbeats (from an Eureka peer) travel in batches of their own,
	// which the leader judges again: a leader of an earlier release would
	// take a batch marked both ways for its own clients' and pass it on to
	// the Eureka peers it came from.
	local, replicated := splitReplicated(batch)
	var retry []renewRequest
	parts := [][]renewRequest{local, replicated}
	kinds := []nodeapi.RenewBatchKind{nodeapi.RenewAnswered, nodeapi.RenewReplicated}
	for i, part := range parts {
		if len(part) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), f.n.cfg.ApplyTimeout)
		results, err := f.n.peers().RenewBatch(ctx, addr, kinds[i], encodeRenewBatch(part))
		cancel()
		if err == nil && len(results) != len(part) {
			err = fmt.Errorf("renew batch: leader answered %d results for %d renewals: %w", len(results), len(part), ErrNoLeader)
		}
		if err != nil {
			// Neither this part nor the ones after it were taken.
			for _, rest := range parts[i:] {
				retry = append(retry, rest...)
			}
			return retry, err
		}
		retry = append(retry, f.unaccepted(part, results)...)
	}
	return retry, nil
}

// splitReplicated parts batch into this node's clients' renewals and the
// replicated ones. Replicated heartbeats come only from an Eureka ring
// beside heureka, so most batches hold none, and batch itself is then the
// first part, not a copy of it.
func splitReplicated(batch []renewRequest) (local, replicated []renewRequest) {
	if !slices.ContainsFunc(batch, func(r renewRequest) bool { return r.Replicated }) {
		return batch, nil
	}
	for _, r := range batch {
		if r.Replicated {
			replicated = append(replicated, r)
		} else {
			local = append(local, r)
		}
	}
	return local, replicated
}

// unaccepted picks the renewals whose result asks for another attempt.
func (f *renewForwarder) unaccepted(batch []renewRequest, results []byte) []renewRequest {
	var retry []renewRequest
	notFound := 0
	for i, res := range results {
		switch res {
		case renewOK:
		case renewNotFound:
			notFound++
		default:
			retry = append(retry, batch[i])
		}
	}
	if notFound > 0 {
		f.n.log.Debug("the leader does not hold the instances of some forwarded renewals", "renewals", notFound)
	}
	return retry
}

// Renew batches travel between nodes in a compact binary form, since
// heartbeats are most of a registry's traffic: each renewal is a uvarint
// length and the app name, the same for the id, and a varint
// lastDirtyTimestamp; the answer is one result byte per renewal.
const (
	renewOK byte = iota
	renewNotFound
	renewNotLeader
	renewFailed
)

func encodeRenewBatch(reqs []renewRequest) []byte {
	n := 0
	for _, r := range reqs {
		n += renewSize(r)
	}
	buf := make([]byte, 0, n)
	for _, r := range reqs {
		buf = binary.AppendUvarint(buf, uint64(len(r.App)))
		buf = append(buf, r.App...)
		buf = binary.AppendUvarint(buf, uint64(len(r.ID)))
		buf = append(buf, r.ID...)
		buf = binary.AppendVarint(buf, r.LastDirtyTimestamp)
	}
	return buf
}

// decodeRenewBatch reads a batch of encodeRenewBatch. Its strings share
// one copy of buf: they are keys the leader looks up and holds until its
// next renewal batch is written, a second at most.
func decodeRenewBatch(buf []byte) ([]renewRequest, error) {
	all := string(buf)
	out := make([]renewRequest, 0, len(buf)/40) // about a renewal's size, for a start
	str := func() (string, bool) {
		l, k := binary.Uvarint(buf)
		if k <= 0 || uint64(len(buf)-k) < l {
			return "", false
		}
		at := len(all) - len(buf) + k
		buf = buf[k+int(l):]
		return all[at : at+int(l)], true
	}
	for len(buf) > 0 {
		var r renewRequest
		var ok bool
		if r.App, ok = str(); !ok {
			return nil, fmt.Errorf("renew batch: bad app: %w", fsm.ErrBadCommand)
		}
		if r.ID, ok = str(); !ok {
			return nil, fmt.Errorf("renew batch: bad id: %w", fsm.ErrBadCommand)
		}
		ldt, k := binary.Varint(buf)
		if k <= 0 {
			return nil, fmt.Errorf("renew batch: bad timestamp: %w", fsm.ErrBadCommand)
		}
		r.LastDirtyTimestamp, buf = ldt, buf[k:]
		out = append(out, r)
	}
	return out, nil
}

func renewResultByte(err error) byte {
	switch {
	case err == nil:
		return renewOK
	case errors.Is(err, fsm.ErrInstanceNotFound):
		return renewNotFound
	case errors.Is(err, ErrNotLeader):
		return renewNotLeader
	}
	return renewFailed
}

// recordAnswered records on the leader a follower's batch of heartbeats it
// judged against its own state and answered (nodeapi.RenewAnswered). The
// leader does not judge them again: the clients have their answers, and
// at a fleet's rate judging each again was a tenth of the leader's CPU.
// What the follower's state may have missed does no harm: the log's
// renewal of an instance no longer held is skipped when applied, and
// one of an instance whose status went UNKNOWN meanwhile renews its lease
// once more, while its next heartbeat gets the 404 that makes the client
// register again.
func (n *Node) recordAnswered(reqs []renewRequest) ([]byte, error) {
	if !n.IsLeader() {
		return nil, fmt.Errorf("renew batch: %w", ErrNotLeader)
	}
	now := time.Now()
	out := make([]byte, len(reqs))
	for i, r := range reqs {
		out[i] = renewResultByte(n.recordRenewal(r, now))
	}
	return out, nil
}

// renewBatchLocal answers a follower's batch on the leader.
func (n *Node) renewBatchLocal(reqs []renewRequest) ([]byte, error) {
	// renewLocal waits for this leader's post-election barrier before it
	// answers "not found"; wait once for the batch, not once for each
	// renewal.
	if err := n.waitLeaderCaughtUp(); err != nil {
		return nil, err
	}
	out := make([]byte, len(reqs))
	for i, r := range reqs {
		out[i] = renewResultByte(n.renewLocal(r))
	}
	return out, nil
}
