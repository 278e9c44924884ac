package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
	"github.com/heureka-registry/heureka/store"
)

// Sentinel errors; httpapi maps them to status codes.
var (
	// ErrNotLeader means this node is not the leader (internal: callers forward).
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader means the cluster has no reachable leader right now.
	ErrNoLeader = errors.New("no leader")
	// ErrNotReady means this node has not caught up since it started or
	// since it last lost touch with the leader, so it refuses registry
	// reads (see Node.Ready).
	ErrNotReady = errors.New("not caught up with the leader")
	// ErrUnknownMember is returned when removing a member that does not exist.
	ErrUnknownMember = errors.New("unknown member")
	// ErrRemoved means this node's Raft has stopped: it was removed from
	// the cluster (or is shutting down), so it takes no writes.
	ErrRemoved = errors.New("this node is not a member of the cluster (removed, or shutting down)")
	// ErrMemberConflict refuses a membership change that would take out a
	// working node by mistake: a join whose id or Raft address is held by
	// the leader or by a live member, or the removal of the only member.
	ErrMemberConflict = errors.New("conflicts with the leader")
)

// Node is one heureka Raft node: it owns *raft.Raft and everything that
// depends on being leader or not.
type Node struct {
	cfg    Config
	raft   *raft.Raft
	deps   raftDeps
	fsm    *fsm.FSM
	log    hclog.Logger
	client *http.Client

	// mode caches the FSM's mode: every response header carries it.
	mode atomic.Pointer[string]
	// clusterID is the cluster's identity once known (identity.go).
	clusterID atomic.Pointer[string]
	// started is raft once it runs, for the transport's goroutines
	// (configured), which may ask before New has set n.raft.
	started atomic.Pointer[raft.Raft]
	// logCP is the index of the last set-mode cp command the log held past
	// the FSM at start, 0 when none (see Mode and scanLogMode in mode.go).
	logCP atomic.Uint64
	// rd is the readiness gate (ready.go).
	rd readiness

	applied   appliedWaiter
	renew     *renewBatcher
	forwarder *renewForwarder
	fwd       *writeForwarder
	leases    *leaseKeeper
	fb        *fallback

	obsMu     sync.RWMutex
	observers []func(fsm.Change)

	// localRenew is called for heartbeats of heureka's own clients (OnLocalRenew).
	localRenew atomic.Pointer[func(app, id string)]
	// lw runs the work registered with AddLeaderWork.
	lw leaderWorkers
	// nudger hurries commits of document changes to followers.
	nudger *commitNudger
	// line packs the client writes that reach the leader together
	// (packline.go).
	line writeLine
	// health is which servers fail this leader's heartbeats (joins).
	health *peerHealth
	// removed is set while the leader says this node is out of the
	// configuration (setMembership).
	removed atomic.Bool
	// mcheck is what the peers last said of this node's membership while
	// it was cut off (membercheck.go).
	mcheck memberCheck
	// diskRefused counts registry writes refused because the disk was
	// full (diskfull.go).
	diskRefused atomic.Uint64

	// selfRecorded is closed once registerSelf found this node's record
	// in its FSM (tests wait for it before they count internal calls).
	selfRecorded chan struct{}

	stopCh chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

// New starts a Raft node on its transport and stores (Deps). It bootstraps
// a new cluster from cfg.InitialCluster (or a single node) when the stores
// hold no state, and asks cfg.Join for admission when that is set instead.
func New(cfg Config, deps Deps, f *fsm.FSM, log hclog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cluster config: %w", err)
	}
	d, err := deps.resolve(&cfg)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	n := newNode(cfg, d, f, log)
	journal, err := store.OpenJournal(d.journalDir)
	if err != nil {
		return nil, err
	}
	journal.SetLimits(cfg.JournalMaxEntries, cfg.JournalMaxBytes)
	journal.SetDiskWatch(d.disk)
	n.fb = newFallback(n, journal)
	hasState, err := n.startRaft(log)
	if err != nil {
		// Raft is not running, so there is no node to shut down: the
		// journal file would stay open (and the data directory busy).
		_ = journal.Close()
		return nil, err
	}
	if err := n.takePlace(hasState); err != nil {
		return nil, err
	}
	n.startBackground()
	return n, nil
}

// newNode is a node on its resolved stores and transport, before Raft
// runs: its read gate, its client for the node-to-node calls, its view of
// the registry's mode and cluster id (kept current by an observer of
// every applied change), and its leader-side workers, not yet running.
func newNode(cfg Config, d raftDeps, f *fsm.FSM, log hclog.Logger) *Node {
	n := &Node{cfg: cfg, deps: d, fsm: f, log: log.Named("cluster"), selfRecorded: make(chan struct{}), stopCh: make(chan struct{})}
	n.rd.started, n.rd.readyCh = time.Now(), make(chan struct{})
	n.rd.gap = max(cfg.LeaderLeaseTimeout, minTouchGap)
	if cfg.ReadHold != nil {
		n.rd.holds = append(n.rd.holds, cfg.ReadHold)
	}
	n.client = newNodeClient(&cfg)
	n.applied.ch = make(chan struct{})
	n.applied.idx = f.AppliedIndex()
	n.refreshMode()
	n.loadClusterID()
	n.refreshClusterID()
	f.Observe(func(c fsm.Change) {
		if c.All || c.Type&^fsm.CmdIgnoreUnknown == fsm.CmdSetMode {
			n.refreshMode()
		}
		if c.All || c.Type&^fsm.CmdIgnoreUnknown == fsm.CmdSetClusterID {
			n.refreshClusterID()
		}
		n.applied.advance(c.Index)
		n.publish(c)
	})
	n.renew = newRenewBatcher(n)
	n.forwarder = newRenewForwarder(n)
	n.fwd = newWriteForwarder(n.cfg.ApplyTimeout,
		func(ctx context.Context, addr string, entry []byte) (uint64, error) {
			return n.peers().Apply(ctx, addr, entry)
		},
		func(ctx context.Context, addr string, entries [][]byte) ([]error, uint64, error) {
			return n.peers().ForwardBatch(ctx, addr, entries)
		})
	n.leases = newLeaseKeeper(n)
	n.nudger = newCommitNudger(&n.deps, raft.ServerID(cfg.NodeID), cfg.raftConfig().ProtocolVersion, n.log.Named("nudge"))
	n.health = newPeerHealth()
	return n
}

// newNodeClient is the HTTP client of the node-to-node calls: TLS as
// configured, the cluster secret on every call.
func newNodeClient(cfg *Config) *http.Client {
	var rt http.RoundTripper = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     cfg.clientTLS(),
	}
	if cfg.ClusterSecret != "" {
		rt = nodeapi.WithSecret(rt, cfg.ClusterSecret)
	}
	if cfg.hooks != nil && cfg.hooks.transport != nil {
		rt = cfg.hooks.transport(rt)
	}
	return &http.Client{Timeout: cfg.ApplyTimeout + time.Second, Transport: rt}
}

// startRaft listens on the Raft transport and starts Raft on the node's
// stores; hasState says whether they held a cluster's state already. On
// an error Raft is not running and the transport is closed.
func (n *Node) startRaft(log hclog.Logger) (hasState bool, err error) {
	d := &n.deps
	rc := n.cfg.raftConfig()
	rc.Logger = raftLogger{log.Named("raft")}
	if err := d.listen(&n.cfg, log, n.ClusterID, n.configured); err != nil {
		return false, err
	}
	hasState, err = raft.HasExistingState(d.logs, d.stable, d.snaps)
	if err != nil {
		d.closeTransport()
		return false, fmt.Errorf("check existing state: %w", err)
	}
	lastCP := n.startLogModeScan() // while Raft restores the snapshot
	r, err := raft.NewRaft(rc, n.fsm, d.logs, d.stable, d.snaps, d.trans)
	if err != nil {
		lastCP()
		d.closeTransport()
		return false, fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	// The quorum's clock starts when Raft runs, not when the node was
	// made: NewRaft first restores the latest snapshot (seconds at a
	// million instances), and a node that counted those seconds as time
	// without a leader would declare its quorum lost the moment it
	// started. Its first reads would then build the durable view (a copy
	// of the whole registry, and the log replayed onto it) while a leader
	// was a heartbeat away, holding back its own catch-up meanwhile.
	n.fb.lastQuorum.Store(time.Now().UnixNano())
	n.started.Store(n.raft)
	n.refreshClusterID() // from the snapshot Raft restored
	n.rd.bootIndex = n.raft.LastIndex()
	n.scanLogMode(lastCP())
	n.fb.loadOverlay()
	return hasState, nil
}

// takePlace makes the running node a member: one of the cluster its
// stores hold, a joiner asking cfg.Join for admission, or the bootstrap
// of a new cluster (the node is shut down if that fails).
func (n *Node) takePlace(hasState bool) error {
	switch {
	case hasState:
		n.log.Info("found existing state; bootstrap and join settings ignored")
		n.checkInitialCluster()
	case n.cfg.Join != "":
		n.wg.Add(1)
		go n.joinLoop()
	default:
		if err := n.bootstrap(); err != nil {
			n.Shutdown()
			return err
		}
	}
	return nil
}

// startBackground starts the node's background work; each goroutine calls
// n.wg.Done when it ends.
func (n *Node) startBackground() {
	background := []func(){
		n.leaderLoop, n.watchReady, n.registerSelf, n.watchDisk,
		func() { defer n.wg.Done(); n.nudger.run(n.raft, n.stopCh) },
		func() { defer n.wg.Done(); n.health.run(n.raft, n.stopCh) },
		func() { defer n.wg.Done(); n.fb.monitor(n.stopCh) },
		func() { defer n.wg.Done(); n.forwarder.run(n.stopCh) },
		func() { defer n.wg.Done(); n.followSnapshotThreshold(n.stopCh) },
		func() { defer n.wg.Done(); n.snapshotByCommands(n.stopCh) },
	}
	n.wg.Add(len(background))
	for _, run := range background {
		go run()
	}
}

func (n *Node) bootstrap() error {
	members := n.cfg.InitialCluster
	if len(members) == 0 {
		members = []fsm.Member{n.selfMember()}
	}
	var conf raft.Configuration
	for _, m := range members {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr)})
	}
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap cluster: %w", err)
	}
	n.log.Info("bootstrapped new cluster", "members", len(members))
	return nil
}

func (n *Node) selfMember() fsm.Member {
	m := fsm.Member{ID: n.cfg.NodeID, RaftAddr: n.cfg.advertiseRaft(), HTTPAddr: n.cfg.HTTPAdvertise, LogFormat: fsm.LogFormat}
	if h := n.cfg.hooks; h != nil && h.logFormat != nil {
		m.LogFormat = *h.logFormat
	}
	return m
}

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// FSM is the node's state machine.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// IsLeader reports whether this node is the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// LeaderID returns the current leader's id ("" when unknown).
func (n *Node) LeaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// Mode is the cluster-wide consistency mode (the bootstrap setting until
// the log says otherwise). Until the node has caught up since its start it
// is cp also when its log holds a set-mode cp not applied yet (see
// scanLogMode).
func (n *Node) Mode() string {
	mode := *n.mode.Load()
	if mode == ModeAP && n.unappliedCP() {
		return ModeCP
	}
	return mode
}

func (n *Node) refreshMode() {
	mode := n.storedMode()
	if mode == "" {
		mode = n.cfg.Mode
	}
	n.mode.Store(&mode)
}

// leaderHTTP returns the leader's HTTP address, or "" when there is no leader.
func (n *Node) leaderHTTP() string {
	id := n.LeaderID()
	if id == "" {
		return ""
	}
	if id == n.cfg.NodeID {
		return n.cfg.HTTPAdvertise
	}
	return n.peerHTTP(id)
}

// Apply writes an encoded command through Raft and returns the FSM's
// answer once the entry is committed and applied. On a follower the entry
// is forwarded to the leader, and Apply also waits (briefly) until this node
// has applied it, so the caller reads its own write here. Without quorum
// (after riding out an election) a CP node refuses with ErrNoQuorum and an
// AP node journals the write (see fallback). With quorum a write is never
// journaled: journal writes left from a partition are replayed first, so
// this one cannot overtake them, and when that replay fails the write fails
// too (503, the client retries) rather than going around the journal.
func (n *Node) Apply(ctx context.Context, entry []byte) (uint64, error) {
	idx, err := n.apply(ctx, entry)
	if errors.Is(err, ErrDiskFull) {
		n.diskRefused.Add(1)
	}
	return idx, err
}

// apply is Apply without the count of writes refused for a full disk.
func (n *Node) apply(ctx context.Context, entry []byte) (uint64, error) {
	if err := n.checkMember(); err != nil {
		return 0, fmt.Errorf("apply %s: %w", fsm.TypeOf(entry), err)
	}
	if !n.QuorumLost() {
		for try := 0; n.fb.journal.Len() > 0; try++ {
			err := n.fb.replay(ctx)
			if n.QuorumLost() {
				break // quorum went away again: the fallback takes the write
			}
			if err == nil && (try < 3 || n.fb.journal.Len() == 0) {
				continue // more journal writes came in meanwhile, or none is left
			}
			if err == nil {
				err = errors.New("journal keeps growing")
			}
			return 0, fmt.Errorf("apply %s: AP fallback journal not replayed yet: %v: %w", fsm.TypeOf(entry), err, ErrNoLeader)
		}
		if !n.QuorumLost() {
			idx, err := n.applyThrough(ctx, entry)
			if !errors.Is(err, errQuorumLost) {
				return idx, err
			}
		}
	}
	if n.Mode() == ModeCP {
		return 0, fmt.Errorf("apply %s: %w", fsm.TypeOf(entry), ErrNoQuorum)
	}
	if err := n.diskFull("apply " + fsm.TypeOf(entry).String()); err != nil {
		return 0, err // the journal is on the same disk
	}
	if err := n.confirmMember(ctx); err != nil {
		return 0, fmt.Errorf("apply %s: %w", fsm.TypeOf(entry), err)
	}
	return n.fb.record(entry)
}

// checkMember refuses writes on a node that is no longer a member: the
// leader said it removed it (setMembership), or its Raft has stopped
// (shutting down, or it applied a configuration without itself). Without
// this, a removed node in AP mode would count its quorum as lost and
// acknowledge writes into its fallback journal that no cluster ever
// replays.
//
// A node the leader re-admitted while it was out of reach never heard so
// (the leader tells it once): once it is in touch with a leader again it
// asks its peers (at most once per memberCheckTTL), and takes writes again
// when they say it is a member.
func (n *Node) checkMember() error {
	if n.removed.Load() && n.raft.State() != raft.Shutdown && n.HasQuorum() {
		n.refreshMembership(context.Background())
	}
	return n.memberState()
}

// memberState is ErrRemoved when this node is out, as far as it knows.
func (n *Node) memberState() error {
	if n.removed.Load() || n.raft.State() == raft.Shutdown {
		return ErrRemoved
	}
	return nil
}

// setMembership records what the leader says of this node after changing
// its membership: out (it refuses writes and renewals from then on), or
// admitted again.
func (n *Node) setMembership(m nodeapi.Membership) error {
	if m.ID != n.cfg.NodeID {
		return fmt.Errorf("membership of %q: this node is %s: %w", m.ID, n.cfg.NodeID, ErrUnknownMember)
	}
	if n.removed.Swap(!m.Member) != !m.Member {
		if m.Member {
			n.log.Info("the leader admitted this node to the cluster again")
		} else {
			n.log.Warn("the leader removed this node from the cluster: writes and renewals are refused until it is admitted again")
		}
	}
	return nil
}

// errQuorumLost ends a wait for a leader that will not come soon.
var errQuorumLost = fmt.Errorf("quorum lost while waiting for a leader: %w", ErrNoLeader)

// applyThrough applies through Raft: locally on the leader, else forwarded.
func (n *Node) applyThrough(ctx context.Context, entry []byte) (uint64, error) {
	return n.throughLeader(ctx, fsm.TypeOf(entry).String(),
		func() (uint64, error) { return n.applyLocal(entry, false) },
		func(ctx context.Context, addr string) (uint64, error) { return n.forwardApply(ctx, addr, entry) })
}

// throughLeader runs a write on the leader: local on this node when it
// leads, else remote to the leader's HTTP address, waiting through an
// election (but not a lost quorum). After a forwarded write it waits briefly
// until this node applied the index the leader answered, so the caller reads
// its own write here.
func (n *Node) throughLeader(ctx context.Context, what string, local func() (uint64, error),
	remote func(ctx context.Context, addr string) (uint64, error)) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	for {
		if n.IsLeader() {
			idx, err := local()
			if !errors.Is(err, ErrNotLeader) {
				return idx, err
			}
		}
		if addr := n.leaderHTTP(); addr != "" && addr != n.cfg.HTTPAdvertise {
			idx, err := remote(ctx, addr)
			if err == nil {
				waitCtx, cancelWait := context.WithTimeout(ctx, time.Second)
				_ = n.applied.wait(waitCtx, idx)
				cancelWait()
				return idx, nil
			}
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, errUnreachable) {
				return 0, err
			}
		}
		// Without a leader elsewhere, a node whose own disk is full would
		// wait in vain: it cannot lead while it cannot write its log.
		if err := n.diskFull(what); err != nil {
			return 0, err
		}
		if n.QuorumLost() {
			return 0, errQuorumLost
		}
		// No leader, or it just changed: wait a little and look again.
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("apply %s: %w", what, ErrNoLeader)
		case <-n.stopCh:
			return 0, fmt.Errorf("apply %s: shutting down: %w", what, ErrNoLeader)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// applyLocal appends an entry on this node, which must be the leader, and
// stamps it with the leader's clock; forwarded says a follower sent it,
// alone in its call (see addLocked).
func (n *Node) applyLocal(entry []byte, forwarded bool) (uint64, error) {
	if n.raft.State() != raft.Leader {
		return 0, ErrNotLeader
	}
	if err := n.checkHeld(entry); err != nil {
		return 0, err
	}
	if err := n.diskFull(fsm.TypeOf(entry).String()); err != nil {
		return 0, err
	}
	buf := append([]byte(nil), entry...)
	if fsm.Packable(fsm.TypeOf(buf)) && n.packingAllowed() {
		results, idx := n.applyInLine([][]byte{buf}, forwarded)
		return idx, results[0]
	}
	if err := fsm.Stamp(buf, time.Now().UnixMilli()); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	idx, err := n.applyResult(entry, n.raft.Apply(buf, n.cfg.ApplyTimeout), ctx.Done())
	if err == nil && fsm.TypeOf(entry) != fsm.CmdRenewBatch {
		n.nudger.nudge(idx)
	}
	return idx, err
}

// checkHeld refuses, without a log entry, a change to an instance the
// leader does not hold.
func (n *Node) checkHeld(entry []byte) error {
	app, id, ok := fsm.InstanceKey(entry)
	if !ok {
		return nil
	}
	// Answering "not found" is a read, with a linearizable read's rules:
	// not from a new leader's FSM before it caught up, nor from a deposed
	// leader's.
	held, err := n.holdsOnceCaughtUp(func() bool {
		var e *fsm.Entry
		n.fsm.Read(func(r *fsm.Registry) { e = r.Get(app, id) })
		return e != nil
	})
	if err != nil || held {
		return err
	}
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return ErrNotLeader
	}
	return fmt.Errorf("%s %s/%s: %w", fsm.TypeOf(entry), app, id, fsm.ErrInstanceNotFound)
}

// waitFuture waits for a raft future, or until the node shuts down: raft
// leaves a future unanswered when it shuts down right after the future was
// queued, and Shutdown would then wait forever for its caller.
func waitFuture(f raft.Future, stop <-chan struct{}) error {
	return waitFutureUntil(f, stop, nil)
}

// errNotCommitted is a write raft took but did not commit in time: a
// leader whose followers cannot store entries (full disks, the only
// reachable follower among them) keeps it queued with no answer. Its fate
// is unknown: it may still commit, so it is answered as a retryable 503,
// never as done.
var errNotCommitted = fmt.Errorf("not committed in time (it may still commit): %w", ErrNoLeader)

// waitFutureUntil is waitFuture that gives up with errNotCommitted once
// deadline is closed (nil: never).
func waitFutureUntil(f raft.Future, stop, deadline <-chan struct{}) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-stop:
		return raft.ErrRaftShutdown
	case <-deadline:
		return errNotCommitted
	}
}

// committed waits for a membership change to commit, at most the apply
// timeout (raft's own timeout bounds only its queueing).
func (n *Node) committed(f raft.Future) error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	return waitFutureUntil(f, n.stopCh, ctx.Done())
}

// applyResult waits for an apply future and maps raft's errors to ours: the
// FSM's own answer (such as ErrInstanceNotFound) comes back as is. While
// the disk is full every failure is put down to it: the log write's error
// reaches the future only as text (raft's LogCache flattens it), and the
// writes queued behind it fail as leadership lost, because raft steps the
// leader down when its log write fails.
func (n *Node) applyResult(entry []byte, f raft.ApplyFuture, deadline <-chan struct{}) (uint64, error) {
	if err := waitFutureUntil(f, n.stopCh, deadline); err != nil {
		if errors.Is(err, errNotCommitted) {
			return 0, fmt.Errorf("apply %s: %w", fsm.TypeOf(entry), err)
		}
		if derr := n.deps.disk.Err(); derr != nil {
			if store.IsDiskFull(err) { // the cause, again, as text
				return 0, fmt.Errorf("apply %s: %w", fsm.TypeOf(entry), derr)
			}
			return 0, fmt.Errorf("apply %s: %v: %w", fsm.TypeOf(entry), err, derr)
		}
		if store.IsDiskFull(err) { // a log store that reports to no watch
			return 0, fmt.Errorf("apply %s: %w", fsm.TypeOf(entry), n.deps.disk.Check(err))
		}
		switch {
		case errors.Is(err, raft.ErrNotLeader):
			return 0, ErrNotLeader
		case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrEnqueueTimeout),
			errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return 0, fmt.Errorf("apply %s: %v: %w", fsm.TypeOf(entry), err, ErrNoLeader)
		}
		return 0, fmt.Errorf("apply %s: %w", fsm.TypeOf(entry), err)
	}
	if err, ok := f.Response().(error); ok && err != nil {
		return f.Index(), err
	}
	return f.Index(), nil
}

// VerifyLeader confirms that this node is still the leader (for
// linearizable reads).
func (n *Node) VerifyLeader() error {
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return fmt.Errorf("verify leader: %v: %w", err, ErrNotLeader)
	}
	return nil
}

// Barrier waits until every committed entry is applied locally (leader only).
func (n *Node) Barrier(timeout time.Duration) error {
	if err := n.raft.Barrier(timeout).Error(); err != nil {
		return fmt.Errorf("barrier: %v: %w", err, ErrNotLeader)
	}
	return nil
}

// leaderLoop starts and stops the leader-only work as leadership changes.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	var stop chan struct{}
	var leaderWG sync.WaitGroup
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var term uint64 // the term the running leader work began in
	check := func() {
		leader := n.IsLeader()
		cur := n.raft.CurrentTerm()
		if leader && stop != nil && cur != term {
			// Lost and won again between two checks: the new term needs
			// its own barrier, so the work starts over.
			n.log.Info("leading again in a new term", "term", cur)
			close(stop)
			leaderWG.Wait()
			stop = nil
		}
		switch {
		case leader && stop == nil:
			stop, term = make(chan struct{}), cur
			n.log.Info("became leader", "term", cur)
			leaderWG.Add(1)
			go func(stop chan struct{}) { defer leaderWG.Done(); n.leaderWork(stop) }(stop)
		case !leader && stop != nil:
			n.log.Info("lost leadership")
			close(stop)
			leaderWG.Wait()
			stop = nil
		}
	}
	for {
		select {
		case <-n.stopCh:
			if stop != nil {
				close(stop)
				leaderWG.Wait()
			}
			return
		case <-n.raft.LeaderCh():
			check()
		case <-tick.C:
			check()
		}
	}
}

// leaderWork runs while this node leads: it writes the bootstrap mode once,
// flushes renewal batches and evicts expired leases.
func (n *Node) leaderWork(stop <-chan struct{}) {
	// The barrier applies every entry of earlier terms: until it completes
	// this leader's FSM may lack committed entries, so it neither serves
	// read indexes nor counts as caught up.
	var term uint64
	for {
		term = n.raft.CurrentTerm()
		err := waitFuture(n.raft.Barrier(n.cfg.ApplyTimeout), n.stopCh)
		if err == nil {
			break
		}
		n.log.Warn("barrier after election failed; retrying", "error", err)
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	n.rd.leaderTerm.Store(term)
	defer n.rd.leaderTerm.Store(0)
	if n.storedMode() == "" {
		// Only if still unset when applied: `heureka mode` may get there first.
		if err := n.applyLocalCmd(fsm.CmdSetMode, &fsm.ModeBody{Mode: n.cfg.Mode, IfUnset: true}); err != nil {
			n.log.Warn("writing initial mode failed", "error", err)
		}
	}
	n.nameCluster()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); n.leases.run(stop) }()
	n.lw.start(stop)
	n.renew.run(stop)
	n.lw.stop()
	wg.Wait()
}

// leaderWorkers is the leader-only work other packages register (outbound
// Eureka replication): it runs while this node leads, after the
// post-election barrier, and stops when leadership ends.
type leaderWorkers struct {
	mu  sync.Mutex
	fns []func(stop <-chan struct{})
	cur <-chan struct{} // the running leadership's stop channel, nil when not leading
	wg  sync.WaitGroup
}

// AddLeaderWork registers fn to run while this node leads; fn returns once
// stop closes. Registered while leading, it starts at once.
func (n *Node) AddLeaderWork(fn func(stop <-chan struct{})) {
	n.lw.mu.Lock()
	defer n.lw.mu.Unlock()
	n.lw.fns = append(n.lw.fns, fn)
	if n.lw.cur != nil {
		n.lw.run(fn, n.lw.cur)
	}
}

func (w *leaderWorkers) run(fn func(stop <-chan struct{}), stop <-chan struct{}) {
	w.wg.Add(1)
	go func() { defer w.wg.Done(); fn(stop) }()
}

func (w *leaderWorkers) start(stop <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cur = stop
	for _, fn := range w.fns {
		w.run(fn, stop)
	}
}

// stop waits for the work of a leadership whose stop channel closed.
func (w *leaderWorkers) stop() {
	w.mu.Lock()
	w.cur = nil
	w.mu.Unlock()
	w.wg.Wait()
}

func (n *Node) storedMode() string {
	mode := ""
	n.fsm.Read(func(r *fsm.Registry) { mode = r.Mode() })
	return mode
}

// registerSelf makes sure the FSM knows this node's addresses, so that
// others can forward writes here when it leads. It tries again whenever
// Raft sees a leader, and every registerRetry: until every server's
// record is in, the leader packs no writes (packingAllowed): with a fixed
// half-second retry, a burst of 10,000 registrations on a cluster just
// started (the bench's W1) sent its first 800-1,600 an entry each; now
// 3-100 of them.
func (n *Node) registerSelf() {
	defer n.wg.Done()
	self := n.selfMember()
	leaderSeen := make(chan raft.Observation, 1)
	obs := raft.NewObserver(leaderSeen, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	retry := registerRetry
	if h := n.cfg.hooks; h != nil && h.registerRetry > 0 {
		retry = h.registerRetry
	}
	for {
		if cur, ok := n.memberRecord(self.ID); ok && cur == self {
			close(n.selfRecorded)
			return
		}
		if n.LeaderID() != "" && n.isVoter(self.ID) {
			entry, err := fsm.Encode(fsm.CmdSetMember, &self)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
				_, err = n.Apply(ctx, entry)
				cancel()
			}
			if err != nil {
				n.log.Debug("recording own address failed; will retry", "error", err)
			}
		}
		select {
		case <-n.stopCh:
			return
		case <-leaderSeen:
		case <-time.After(retry):
		}
	}
}

// registerRetry is how often registerSelf tries again without news of a
// leader: a failed attempt, or a joining node not yet a voter.
const registerRetry = 500 * time.Millisecond

func (n *Node) isVoter(id string) bool {
	servers, err := n.servers()
	return err == nil && hasServer(servers, id)
}

// Shutdown stops the node: leader work, Raft, the transport and the store.
func (n *Node) Shutdown() error {
	var err error
	n.once.Do(func() {
		close(n.stopCh)
		if n.raft != nil {
			if e := n.raft.Shutdown().Error(); e != nil {
				err = fmt.Errorf("shutdown raft: %w", e)
			}
		}
		n.wg.Wait()
		n.deps.closeTransport()
		if n.fb != nil {
			_ = n.fb.journal.Close()
		}
		n.client.CloseIdleConnections()
	})
	return err
}

// appliedWaiter lets callers wait until the FSM reached an index.
type appliedWaiter struct {
	mu  sync.Mutex
	idx uint64
	ch  chan struct{}
}

func (w *appliedWaiter) advance(idx uint64) {
	w.mu.Lock()
	if idx > w.idx {
		w.idx = idx
		close(w.ch)
		w.ch = make(chan struct{})
	}
	w.mu.Unlock()
}

func (w *appliedWaiter) wait(ctx context.Context, idx uint64) error {
	for {
		w.mu.Lock()
		if w.idx >= idx {
			w.mu.Unlock()
			return nil
		}
		ch := w.ch
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ApplyCommitted writes an encoded command through the Raft log only:
// without quorum it fails (ErrNoQuorum) in either mode instead of
// journaling it. It is for writes that only the committed log may carry,
// such as a remote region's copy, which a replay after a partition could
// only set back.
func (n *Node) ApplyCommitted(ctx context.Context, entry []byte) (uint64, error) {
	if err := n.checkMember(); err != nil {
		return 0, fmt.Errorf("apply %s: %w", fsm.TypeOf(entry), err)
	}
	if n.QuorumLost() {
		return 0, fmt.Errorf("apply %s: %w", fsm.TypeOf(entry), ErrNoQuorum)
	}
	idx, err := n.applyThrough(ctx, entry)
	if errors.Is(err, errQuorumLost) {
		return 0, fmt.Errorf("apply %s: %v: %w", fsm.TypeOf(entry), err, ErrNoQuorum)
	}
	return idx, err
}
