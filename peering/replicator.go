package peering

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// Cluster is what peering needs from the heureka node it runs on.
type Cluster interface {
	// Get returns the current record of an instance, or nil.
	Get(app, id string) *fsm.Entry
	// Recent returns the recently-changed queue (fsm.Registry.Delta).
	Recent() []fsm.DeltaView
	// RegisterReplicated writes a registration a peer holds (its record
	// after a 409, or an initial copy) through Raft, marked replicated; one
	// the cluster's input limits refuse is an fsm.ErrBadCommand.
	RegisterReplicated(ctx context.Context, in *fsm.Instance) error
}

// Config tunes outbound replication.
type Config struct {
	// Peers are the ring's service URLs (http://host:8761/eureka/).
	Peers []string
	// BatchSize bounds the items of one batch (eureka-server: 250).
	BatchSize int
	// QueueSize bounds each peer's queue; on overflow heartbeats are
	// dropped first (see queue.push).
	QueueSize int
	// BatchDelay is how long a sender waits for a batch to fill.
	BatchDelay time.Duration
	// RetryDelay is the first delay after a failed send; it doubles up to
	// MaxRetryDelay while the peer keeps failing.
	RetryDelay, MaxRetryDelay time.Duration
	// Timeout bounds one batch request.
	Timeout time.Duration
	// Client sends the batches (nil: a client with Timeout).
	Client *http.Client
}

// DefaultConfig returns eureka-server's batch size and a queue of 10,000
// tasks per peer.
func DefaultConfig() Config {
	return Config{BatchSize: 250, QueueSize: 10_000, BatchDelay: 50 * time.Millisecond,
		RetryDelay: 100 * time.Millisecond, MaxRetryDelay: 5 * time.Second, Timeout: 10 * time.Second}
}

func (c *Config) fill() {
	d := DefaultConfig()
	positiveOr(&c.BatchSize, d.BatchSize)
	positiveOr(&c.QueueSize, d.QueueSize)
	positiveOr(&c.BatchDelay, d.BatchDelay)
	positiveOr(&c.RetryDelay, d.RetryDelay)
	positiveOr(&c.MaxRetryDelay, d.MaxRetryDelay)
	positiveOr(&c.Timeout, d.Timeout)
	if c.Client == nil {
		c.Client = &http.Client{Timeout: c.Timeout}
	}
}

// positiveOr sets *v to d unless *v is positive (a zero Config field means
// the default).
func positiveOr[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Replicator replays heureka's own clients' changes to the ring's peers.
// Feed it with Changed (an FSM observer) and Renewed (the leader's local
// heartbeats); Run does the sending while this node leads.
type Replicator struct {
	cfg   Config
	c     Cluster
	log   hclog.Logger
	peers []*peer
	// active is set while Run runs (this node leads): only then are
	// changes queued.
	active atomic.Bool
	stats  counters
}

// New returns a Replicator for cfg.Peers.
func New(cfg Config, c Cluster, log hclog.Logger) *Replicator {
	cfg.fill()
	if log == nil {
		log = hclog.NewNullLogger()
	}
	r := &Replicator{cfg: cfg, c: c, log: log.Named("peering")}
	r.stats.lags = newLagRing(8192)
	for _, u := range cfg.Peers {
		r.peers = append(r.peers, &peer{r: r, url: batchURL(u), q: newQueue(cfg.QueueSize), wake: make(chan struct{}, 1)})
	}
	return r
}

// batchURL is a service URL's batch endpoint.
func batchURL(serviceURL string) string {
	return strings.TrimSuffix(serviceURL, "/") + "/peerreplication/batch"
}

// Changed queues what an applied command changed, unless a peer
// replicated it (or this node does not lead). It is quick: the record is
// read when the batch is built.
func (r *Replicator) Changed(c fsm.Change) {
	if !r.active.Load() || c.Replicated {
		return
	}
	var k kind
	switch c.Type &^ fsm.CmdIgnoreUnknown {
	case fsm.CmdRegister, fsm.CmdMetadata:
		k = kindRegister // eureka-server replicates a metadata change as a register
	case fsm.CmdCancel:
		k = kindCancel
	case fsm.CmdSetOverride:
		k = kindStatus
	case fsm.CmdDeleteOverride:
		k = kindDeleteOverride
	default:
		return // evictions are each server's own; renewals come through Renewed
	}
	for _, key := range c.Keys {
		r.enqueue(k, key.App, key.ID)
	}
}

// Renewed queues a heartbeat of one of heureka's own clients.
func (r *Replicator) Renewed(app, id string) {
	if r.active.Load() {
		r.enqueue(kindHeartbeat, app, id)
	}
}

func (r *Replicator) enqueue(k kind, app, id string) {
	now := time.Now()
	for _, p := range r.peers {
		p.push(&task{key: taskKey{app: app, id: id, slot: k.slot()}, kind: k, queued: now})
	}
}

// Run replicates until stop closes. It is the leader's work: a new
// leader first queues every change of the recently-changed queue that
// heureka's clients made, which covers what the previous leader may not
// have sent (the peers answer duplicates idempotently).
func (r *Replicator) Run(stop <-chan struct{}) {
	if len(r.peers) == 0 {
		<-stop
		return
	}
	r.active.Store(true)
	defer r.active.Store(false)
	replayed := r.replayRecent()
	r.log.Info("replicating to eureka peers", "peers", len(r.peers), "replayed", replayed)
	var wg sync.WaitGroup
	for _, p := range r.peers {
		wg.Add(1)
		go func(p *peer) { defer wg.Done(); p.run(stop) }(p)
	}
	wg.Wait()
	for _, p := range r.peers {
		p.clear() // the next leader replays what matters
	}
}

// replayRecent queues the recently-changed queue's local changes.
func (r *Replicator) replayRecent() int {
	n := 0
	for _, d := range r.c.Recent() {
		if d.Replicated {
			continue
		}
		k := kindRegister
		if d.Action == fsm.ActionDeleted {
			k = kindCancel
		}
		r.enqueue(k, d.Entry.App, d.Entry.ID)
		n++
	}
	return n
}

// Stats are the replicator's counters, for /metrics and the benchmark.
type Stats struct {
	Active bool
	// Queued is the tasks waiting, over all peers.
	Queued int
	// Batches, Items count batches and items a peer accepted (200).
	Batches, Items uint64
	// ItemFailures counts items a peer answered with another code than
	// 2xx, 404 to a heartbeat (answered with a register) or 409.
	ItemFailures uint64
	// Retries counts sends that failed and were retried.
	Retries uint64
	// Dropped counts tasks dropped on overflow, by kind.
	Dropped map[string]uint64
	// Reregisters counts registers sent after a peer answered a heartbeat
	// with 404; Conflicts counts 409s whose record was taken.
	Reregisters, Conflicts uint64
	// LagP50Ms and LagP99Ms: from queueing a change to the peer's answer,
	// over the last few thousand items.
	LagP50Ms, LagP99Ms float64
}

type counters struct {
	batches, items, itemFailures, retries, reregisters, conflicts atomic.Uint64
	mu                                                            sync.Mutex
	dropped                                                       map[string]uint64
	lags                                                          *lagRing
}

// Stats returns the counters.
func (r *Replicator) Stats() Stats {
	st := Stats{Active: r.active.Load(), Batches: r.stats.batches.Load(), Items: r.stats.items.Load(),
		ItemFailures: r.stats.itemFailures.Load(), Retries: r.stats.retries.Load(),
		Reregisters: r.stats.reregisters.Load(), Conflicts: r.stats.conflicts.Load(), Dropped: map[string]uint64{}}
	for _, p := range r.peers {
		p.mu.Lock()
		st.Queued += p.q.len()
		p.mu.Unlock()
	}
	r.stats.mu.Lock()
	for k, v := range r.stats.dropped {
		st.Dropped[k] = v
	}
	st.LagP50Ms, st.LagP99Ms = r.stats.lags.quantiles(0.5, 0.99)
	r.stats.mu.Unlock()
	return st
}

func (r *Replicator) countDrop(k kind) {
	r.stats.mu.Lock()
	if r.stats.dropped == nil {
		r.stats.dropped = map[string]uint64{}
	}
	r.stats.dropped[k.String()]++
	r.stats.mu.Unlock()
}

// peer is one ring member's queue and sender.
type peer struct {
	r    *Replicator
	url  string
	mu   sync.Mutex
	q    *queue
	wake chan struct{}
}

func (p *peer) push(t *task) {
	p.mu.Lock()
	dropped, didDrop, lost := p.q.push(t)
	p.mu.Unlock()
	if didDrop {
		p.r.countDrop(dropped)
		if lost {
			// Never silent: a lost register or cancel is logged and
			// counted; the instance's next heartbeat (404 at the peer)
			// or eviction there repairs it.
			p.r.log.Error("replication queue full: change dropped", "peer", p.url, "kind", dropped, "app", t.key.app, "id", t.key.id)
		}
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *peer) clear() {
	p.mu.Lock()
	p.q = newQueue(p.q.limit)
	p.mu.Unlock()
}

func (p *peer) run(stop <-chan struct{}) {
	delay := p.r.cfg.RetryDelay
	for {
		p.mu.Lock()
		n := p.q.len()
		p.mu.Unlock()
		if n == 0 {
			select {
			case <-stop:
				return
			case <-p.wake:
			}
		}
		if n < p.r.cfg.BatchSize {
			select { // let the batch fill
			case <-stop:
				return
			case <-time.After(p.r.cfg.BatchDelay):
			}
		}
		p.mu.Lock()
		batch := p.q.take(p.r.cfg.BatchSize)
		p.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		err := p.send(batch)
		if errors.Is(err, errPermanent) {
			// eureka-server discards such a batch too: resending the same
			// items would get the same answer.
			p.r.stats.itemFailures.Add(uint64(len(batch)))
			p.r.log.Error("peer refused a replication batch; dropped", "peer", p.url, "items", len(batch), "error", err)
			continue
		}
		if err != nil {
			p.r.stats.retries.Add(1)
			p.r.log.Warn("replication batch failed; will retry", "peer", p.url, "items", len(batch), "error", err, "retry_in", delay)
			p.mu.Lock()
			p.q.putBack(batch)
			p.mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, p.r.cfg.MaxRetryDelay)
			continue
		}
		delay = p.r.cfg.RetryDelay
	}
}

// errRetry marks a failure worth retrying (the peer is down or busy);
// errPermanent one that is not (the peer refused the batch itself).
var (
	errRetry     = errors.New("peer unavailable")
	errPermanent = errors.New("batch refused")
)

// send posts one batch and handles the peer's answers. An error means
// nothing was applied for sure (or the peer is busy): the batch is retried.
func (p *peer) send(batch []*task) error {
	items := make([]eureka.ReplicationInstance, 0, len(batch))
	sent := make([]*task, 0, len(batch))
	for _, t := range batch {
		if it, ok := p.r.item(t); ok {
			items = append(items, it)
			sent = append(sent, t)
		}
	}
	if len(items) == 0 {
		return nil
	}
	body, err := json.Marshal(eureka.ReplicationList{ReplicationList: items})
	if err != nil {
		return fmt.Errorf("encode batch: %w", err)
	}
	resp, err := postBatch(context.Background(), p.r.cfg.Client, p.url, body)
	if err != nil {
		return err
	}
	p.r.stats.batches.Add(1)
	if len(resp.ResponseList) != len(sent) {
		p.r.log.Error("peer answered a batch with a different number of items", "peer", p.url, "sent", len(sent), "answers", len(resp.ResponseList))
		return nil
	}
	now := time.Now()
	p.r.stats.mu.Lock()
	for _, t := range sent {
		p.r.stats.lags.add(float64(now.Sub(t.queued).Microseconds()) / 1000)
	}
	p.r.stats.mu.Unlock()
	p.r.stats.items.Add(uint64(len(sent)))
	for i, ans := range resp.ResponseList {
		p.handle(sent[i], ans)
	}
	return nil
}

// handle reacts to one item's answer as an eureka-server peer does: a
// heartbeat the peer does not know is followed by a register; a 409 to a
// heartbeat carries the peer's newer record, which this cluster takes.
func (p *peer) handle(t *task, ans eureka.ReplicationInstanceResponse) {
	code := ans.StatusCode
	switch {
	case code >= 200 && code < 300:
	case t.kind == kindHeartbeat && code == http.StatusNotFound:
		p.r.stats.reregisters.Add(1)
		p.push(&task{key: taskKey{app: t.key.app, id: t.key.id, slot: kindRegister.slot()}, kind: kindRegister, queued: time.Now()})
	case t.kind == kindHeartbeat && code == http.StatusConflict && len(ans.ResponseEntity) > 0:
		in, err := eureka.DecodeInstance(ans.ResponseEntity, eureka.JSON, time.Now().UnixMilli())
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), p.r.cfg.Timeout)
			err = p.r.c.RegisterReplicated(ctx, in)
			cancel()
		}
		if err != nil {
			p.r.log.Warn("taking a peer's newer record failed", "peer", p.url, "app", t.key.app, "id", t.key.id, "error", err)
			return
		}
		p.r.stats.conflicts.Add(1)
	case t.kind == kindCancel && code == http.StatusNotFound:
		// already gone there (evicted, or never replicated)
	default:
		p.r.stats.itemFailures.Add(1)
		// Not retried: the peer goes without the change until the
		// instance's next heartbeat (a 404 there brings a register), and
		// one that never heartbeats again stays missing there.
		p.r.log.Warn("peer refused a replicated change", "peer", p.url, "kind", t.kind, "app", t.key.app, "id", t.key.id, "code", code)
	}
}

// item builds the batch item of a task from the current record; a task
// whose instance is gone (a register or status change overtaken by a
// cancel) builds nothing.
func (r *Replicator) item(t *task) (eureka.ReplicationInstance, bool) {
	it := eureka.ReplicationInstance{AppName: t.key.app, ID: t.key.id}
	action := ""
	if t.kind == kindCancel {
		action = eureka.ActionCancel
		it.Action = &action
		return it, true
	}
	e := r.c.Get(t.key.app, t.key.id)
	if e == nil {
		return it, false
	}
	ldt := eureka.Millis(e.Instance.LastDirtyTimestamp)
	it.LastDirtyTimestamp = &ldt
	status, overridden := e.Instance.Status, e.Instance.OverriddenStatus
	switch t.kind {
	case kindRegister:
		action = eureka.ActionRegister
		it.InstanceInfo = eureka.AppendInstance(nil, eureka.JSON, e)
	case kindHeartbeat:
		action = eureka.ActionHeartbeat
		it.Status, it.OverriddenStatus = &status, &overridden
	case kindStatus:
		if e.Override == "" {
			return it, false
		}
		action = eureka.ActionStatusUpdate
		it.Status = &e.Override
	case kindDeleteOverride:
		action = eureka.ActionDeleteStatusOverride
		it.Status = &status
	}
	it.Action = &action
	return it, true
}

// postBatch posts a batch body and decodes the answer. Transport errors and
// 5xx are errRetry (eureka-server retries on 503 and network errors;
// heureka also on the other 5xx a restarting peer or a proxy answers);
// another status or an answer that cannot be read is errPermanent.
func postBatch(ctx context.Context, client *http.Client, url string, body []byte) (eureka.ReplicationListResponse, error) {
	var out eureka.ReplicationListResponse
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return out, fmt.Errorf("batch request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(eureka.ReplicationHeader, "true")
	resp, err := client.Do(req)
	if err != nil {
		return out, fmt.Errorf("post batch to %s: %v: %w", url, err, errRetry)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return out, fmt.Errorf("read batch answer from %s: %v: %w", url, err, errRetry)
	}
	switch {
	case resp.StatusCode >= 500:
		return out, fmt.Errorf("batch to %s: %s: %w", url, resp.Status, errRetry)
	case resp.StatusCode != http.StatusOK:
		return out, fmt.Errorf("batch to %s: %s %s: %w", url, resp.Status, bytes.TrimSpace(b), errPermanent)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("decode batch answer from %s: %v: %w", url, err, errPermanent)
	}
	return out, nil
}

// lagRing keeps the last n lag samples (milliseconds).
type lagRing struct {
	buf  []float64
	next int
	full bool
}

func newLagRing(n int) *lagRing { return &lagRing{buf: make([]float64, n)} }

func (l *lagRing) add(v float64) {
	l.buf[l.next] = v
	l.next++
	if l.next == len(l.buf) {
		l.next, l.full = 0, true
	}
}

func (l *lagRing) quantiles(qs ...float64) (float64, float64) {
	n := l.next
	if l.full {
		n = len(l.buf)
	}
	if n == 0 {
		return 0, 0
	}
	s := append([]float64(nil), l.buf[:n]...)
	sort.Float64s(s)
	at := func(q float64) float64 { return s[min(n-1, int(q*float64(n)))] }
	return at(qs[0]), at(qs[1])
}
