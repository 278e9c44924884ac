package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
)

// Consistency modes.
const (
	ModeAP = "ap"
	ModeCP = "cp"
)

// Config is everything the Raft node needs.
type Config struct {
	// NodeID is this node's Raft server id.
	NodeID string
	// RaftBind is the address the Raft transport listens on.
	RaftBind string
	// RaftAdvertise is the address peers dial (defaults to RaftBind).
	RaftAdvertise string
	// HTTPAdvertise is the HTTP address peers use to forward writes here.
	HTTPAdvertise string
	// InitialCluster lists every member of a new cluster; empty means a
	// single-node cluster of this node (unless Join is set).
	InitialCluster []fsm.Member
	// Join is the HTTP address of a member to ask for admission.
	Join string
	// Mode is the consistency mode written at bootstrap.
	Mode string

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is how long the leader waits without new entries before
	// it tells followers the commit index anyway; it bounds how late a
	// follower applies (and so serves) a write.
	CommitTimeout time.Duration
	// SnapshotThreshold is the number of log entries between snapshots for
	// a small registry; a large one snapshots after one entry per
	// snapshotShare instances held (snapshotThreshold), so that the cost of
	// snapshots per write does not grow with the registry.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// ApplyTimeout bounds one write through Raft, forwarding included.
	ApplyTimeout time.Duration
	// RenewBatchInterval is how long the leader gathers renewals before it
	// writes them to the log (in entries of about 48 KiB at most); 0 writes
	// one entry per renewal.
	RenewBatchInterval time.Duration
	// Lease holds eviction and self-preservation settings.
	Lease LeaseConfig
	// JournalMaxEntries and JournalMaxBytes bound the AP fallback journal
	// (0: unbounded); once full, writes without quorum are refused with
	// ErrJournalFull instead of filling the disk during a long partition.
	JournalMaxEntries int
	JournalMaxBytes   int64
	// ReadHold, when set, keeps the read gate closed until it closes (an
	// initial copy of an Eureka ring's registry, see HoldReads).
	ReadHold <-chan struct{}
	// ClusterSecret, when set, is sent with every node-to-node HTTP call
	// (nodeapi.SecretHeader), and InternalHandler refuses calls without it;
	// the TCP Raft transport accepts only peers that prove they hold it
	// (raftauth.go).
	ClusterSecret string
	// StrictInput makes the leader apply the input limits (package
	// limits) to every client command a peer hands it, as the HTTP API
	// does to what clients send (--strict-input).
	StrictInput bool
	// HTTPClientTLS, when set, makes node-to-node HTTP calls use HTTPS with
	// this configuration (CA pool, client certificate for mTLS).
	HTTPClientTLS *tls.Config
	// RaftTLS, when set, runs the Raft transport over mutual TLS: it is used
	// both to dial and to accept, and must verify peers in both directions.
	RaftTLS *tls.Config

	// hooks lets this package's tests interpose on a node; nil otherwise.
	hooks *testHooks
}

// testHooks are seams for tests: a fault injected where a real one is
// hard to provoke on demand.
type testHooks struct {
	// beforeReplayBatch runs before each journal replay batch is applied;
	// an error fails the batch as if the leader had not taken it.
	beforeReplayBatch func(entries [][]byte) error
	// transport wraps the node-to-node HTTP transport.
	transport func(http.RoundTripper) http.RoundTripper
	// logFormat, when set, is the log format the node records as the
	// newest it reads (a release before packed entries: 0).
	logFormat *int
	// beforeEvict, when set, runs between the leader's look at the leases
	// it evicts and its eviction entry (the writes that may come in
	// between).
	beforeEvict func(expired []fsm.ExpiredLease)
	// registerRetry, when set, replaces registerRetry: how often a node
	// tries again to record itself without news of a leader.
	registerRetry time.Duration
}

// DefaultConfig returns production defaults (hashicorp/raft's timings).
func DefaultConfig() Config {
	return Config{
		RaftBind:           "127.0.0.1:8762",
		Mode:               ModeAP,
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		// hashicorp/raft's default is 50 ms (up to 2x with jitter): a write
		// would reach followers' reads up to 100 ms late on a quiet cluster.
		CommitTimeout:      10 * time.Millisecond,
		SnapshotThreshold:  8192,
		SnapshotInterval:   30 * time.Second,
		TrailingLogs:       10240,
		ApplyTimeout:       10 * time.Second,
		RenewBatchInterval: time.Second,
		Lease:              DefaultLeaseConfig(),
		JournalMaxEntries:  100_000,
		JournalMaxBytes:    64 << 20,
	}
}

// Validate checks the config for contradictions.
func (c *Config) Validate() error {
	if err := CheckMemberID(c.NodeID); err != nil {
		return fmt.Errorf("node id: %w", err)
	}
	if _, _, err := net.SplitHostPort(c.RaftBind); err != nil {
		return fmt.Errorf("raft address %q: %w", c.RaftBind, err)
	}
	if err := CheckDialable(c.advertiseRaft()); err != nil {
		return fmt.Errorf("raft advertise address %v (set --raft-advertise)", err)
	}
	if c.Mode != ModeAP && c.Mode != ModeCP {
		return fmt.Errorf("mode %q: must be ap or cp", c.Mode)
	}
	if c.Join != "" && len(c.InitialCluster) > 0 {
		return errors.New("--join and --initial-cluster exclude each other")
	}
	if len(c.InitialCluster) > 0 {
		found := false
		for _, m := range c.InitialCluster {
			if err := CheckMemberID(m.ID); err != nil {
				return fmt.Errorf("initial cluster: %w", err)
			}
			if m.ID == c.NodeID {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("initial cluster does not list this node %q", c.NodeID)
		}
	}
	// Raft's own checks, so that a setting it would refuse is a usage
	// error before anything is opened, said in heureka's words;
	// raft.ValidateConfig below backs them for any rule Raft adds.
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return errors.New("raft leader lease timeout must not exceed the heartbeat timeout")
	}
	if c.HeartbeatTimeout > c.ElectionTimeout {
		return errors.New("raft heartbeat timeout must not exceed the election timeout")
	}
	if c.CommitTimeout < time.Millisecond {
		return errors.New("raft commit timeout must be at least 1ms")
	}
	if c.HeartbeatTimeout < 5*time.Millisecond || c.ElectionTimeout < 5*time.Millisecond || c.LeaderLeaseTimeout < 5*time.Millisecond {
		return errors.New("raft heartbeat, election and leader lease timeouts must be at least 5ms")
	}
	if c.SnapshotThreshold == 0 || c.SnapshotInterval < 5*time.Millisecond {
		return errors.New("snapshot threshold must be positive and the snapshot interval at least 5ms")
	}
	if err := raft.ValidateConfig(c.raftConfig()); err != nil {
		return fmt.Errorf("raft settings: %w", err)
	}
	// A zero or nanosecond interval would run its loop flat out.
	if c.Lease.EvictionInterval < 10*time.Millisecond || c.Lease.RenewalRateWindow < time.Second {
		return errors.New("eviction interval must be at least 10ms and the renewal rate window at least 1s")
	}
	if p := c.Lease.RenewalPercentThreshold; !(p > 0 && p <= 1) {
		return fmt.Errorf("renewal percent threshold %v: must be in (0, 1]", p)
	}
	if c.JournalMaxEntries < 0 || c.JournalMaxBytes < 0 {
		return errors.New("journal limits must not be negative (0 = unbounded)")
	}
	if c.RenewBatchInterval < 0 {
		return errors.New("renew batch interval must not be negative")
	}
	return nil
}

// CheckMemberID refuses a member id that operators could not name in a
// URL path (DELETE /v1/members/{id}) or on a command line: an empty one, one
// over 256 bytes, or one with a character other than printable ASCII
// without white space, '/', '\', '?', '#' and '%'.
func CheckMemberID(id string) error {
	if id == "" || len(id) > 256 {
		return fmt.Errorf("member id %q: must be 1 to 256 bytes", id)
	}
	for _, r := range id {
		if r <= ' ' || r > '~' || strings.ContainsRune(`/\?#%`, r) {
			return fmt.Errorf("member id %q: %q is not allowed (printable ASCII without white space, '/', '\\', '?', '#' or '%%')", id, r)
		}
	}
	return nil
}

// raftConfig is the Raft configuration the node runs with (its logger
// aside).
func (c *Config) raftConfig() *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.NodeID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.SnapshotInterval = c.SnapshotInterval
	rc.TrailingLogs = c.TrailingLogs
	rc.BatchApplyCh = true
	return rc
}

// advertiseRaft is the Raft address peers dial.
func (c *Config) advertiseRaft() string {
	if c.RaftAdvertise != "" {
		return c.RaftAdvertise
	}
	return c.RaftBind
}

// CheckDialable refuses an address peers could not dial: not host:port, no
// host, a host meaning all interfaces (0.0.0.0, ::), or a port that is not
// a number from 1 to 65535.
func CheckDialable(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", addr, port)
	}
	if host == "" {
		return fmt.Errorf("%q: needs a host and a port", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%q: %s is not an address peers can dial", addr, host)
	}
	return nil
}

// ParseInitialCluster parses "id=raftaddr@httpaddr,..." into members.
func ParseInitialCluster(s string) ([]fsm.Member, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []fsm.Member
	ids, raftAddrs, httpAddrs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		id, rest, ok := strings.Cut(part, "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("initial cluster entry %q: want id=raftaddr@httpaddr", part)
		}
		raftAddr, httpAddr, ok := strings.Cut(rest, "@")
		if !ok {
			return nil, fmt.Errorf("initial cluster entry %q: want id=raftaddr@httpaddr", part)
		}
		if err := CheckDialable(raftAddr); err != nil {
			return nil, fmt.Errorf("initial cluster entry %q: raft address %w", part, err)
		}
		if err := CheckDialable(httpAddr); err != nil {
			return nil, fmt.Errorf("initial cluster entry %q: http address %w", part, err)
		}
		if ids[id] || raftAddrs[raftAddr] || httpAddrs[httpAddr] {
			return nil, fmt.Errorf("initial cluster entry %q repeats an id or address", part)
		}
		ids[id], raftAddrs[raftAddr], httpAddrs[httpAddr] = true, true, true
		out = append(out, fsm.Member{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr})
	}
	return out, nil
}
