package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/httpapi"
	"github.com/heureka-registry/heureka/internal/runtime/memlimit"
	"github.com/heureka-registry/heureka/store"
)

// serveConfig is everything `heureka serve` is told.
type serveConfig struct {
	nodeID         string
	httpAddr       string
	httpAdvertise  string
	raftAddr       string
	raftAdvertise  string
	dataDir        string
	initialCluster string
	join           string
	logLevel       string
	logJSON        bool
	memoryLimit    string

	deltaRetention time.Duration

	// The flags that set a cluster or HTTP API setting write it in place:
	// cluster (Raft timings, snapshots, renewal batches, the AP journal's
	// limits, leases, the bootstrap mode; its node and address fields are
	// derived by clusterConfig) and api (the response cache, body limit,
	// profiler, input checks, trends; its security fields are derived by
	// check).
	cluster cluster.Config
	api     httpapi.Config

	authFile          string
	clusterSecret     string
	clusterSecretFile string
	tlsCert           string
	tlsKey            string
	tlsClientCA       string
	tlsCA             string
	raftTLS           bool
	eurekaPeers       string
	eurekaSyncTimeout time.Duration
	regions           regionFlags

	// Derived by check.
	memory memlimit.Policy
	users  *httpapi.Users
	secret string
	tls    *tlsSetup
}

// newServeFlags declares the flags; every flag also reads HEUREKA_<NAME>
// (upper case, dashes as underscores) when not given on the command line.
func newServeFlags(c *serveConfig) *flag.FlagSet {
	fs := newFlagSet("serve")
	host, _ := os.Hostname()
	if host == "" {
		host = "heureka"
	}
	c.cluster, c.api = cluster.DefaultConfig(), httpapi.DefaultConfig()
	// Each flag writes the setting it names, its default being the config's.
	node, cache, lease := &c.cluster, &c.api.Cache, &c.cluster.Lease
	fs.StringVar(&c.nodeID, "node-id", host, "this node's Raft id")
	fs.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:8761", "HTTP listen address")
	fs.StringVar(&c.httpAdvertise, "http-advertise", "", "HTTP address peers use to reach this node (default: from --initial-cluster, else --http-addr; a --http-addr on all interfaces, such as 0.0.0.0:8761, advertises the Raft advertise address's host with its port)")
	fs.StringVar(&c.raftAddr, "raft-addr", "127.0.0.1:8762", "Raft listen address")
	fs.StringVar(&c.raftAdvertise, "raft-advertise", "", "Raft address peers dial (default: from --initial-cluster, else --raft-addr)")
	fs.StringVar(&c.dataDir, "data-dir", "heureka-data", "directory for the log, stable store and snapshots")
	fs.StringVar(&c.initialCluster, "initial-cluster", "", "id=raftaddr@httpaddr,... for every node of a new cluster")
	fs.StringVar(&c.join, "join", "", "HTTP address of a member to join as a voter")
	fs.StringVar(&c.cluster.Mode, "mode", node.Mode, "consistency mode at bootstrap: ap or cp")
	fs.StringVar(&c.logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.BoolVar(&c.logJSON, "log-json", false, "log as JSON lines")
	fs.BoolVar(&c.api.Pprof, "pprof", c.api.Pprof, "serve Go's profiler under /debug/pprof")
	fs.StringVar(&c.memoryLimit, "memory-limit", memlimit.Auto, "the Go runtime's soft memory limit: auto (the live heap + 1/2, at least 64 MiB, + the runtime's own memory, followed as the registry grows, at most 90% of the cgroup memory limit, with GOGC off unless set; GOMEMLIMIT, if set, wins), off (Go's defaults), or a size such as 512MiB")
	fs.DurationVar(&cache.UpdateInterval, "response-cache-update-interval", cache.UpdateInterval, "full readOnly cache refresh interval, at least 10ms: the upper bound on how stale a cached read can be (changes are pushed within --response-cache-push-window)")
	fs.DurationVar(&cache.PushWindow, "response-cache-push-window", cache.PushWindow, "how often, at most, the registry-wide readOnly documents changes touch (full registry, delta) are rebuilt (a change after a quiet window is pushed at once, later ones wait for its end and share one rebuild; an application's document follows every change); 0 = no push: refresh only every --response-cache-update-interval, as eureka-server does")
	fs.DurationVar(&cache.AutoExpiration, "response-cache-auto-expiration", cache.AutoExpiration, "readWrite cache expiry")
	fs.BoolVar(&cache.UseReadOnly, "use-read-only-response-cache", cache.UseReadOnly, "serve reads from the readOnly level first")
	fs.DurationVar(&lease.EvictionInterval, "eviction-interval", lease.EvictionInterval, "upper bound on when the leader evicts an expired lease (it evicts at each lease's deadline; a full pass also runs this often; the eviction cap holds per this or --renewal-rate-window, whichever is longer)")
	fs.Float64Var(&lease.RenewalPercentThreshold, "renewal-percent-threshold", lease.RenewalPercentThreshold, "self-preservation threshold (0..1)")
	fs.BoolVar(&lease.SelfPreservation, "enable-self-preservation", lease.SelfPreservation, "stop evicting when renewals drop below the threshold")
	fs.DurationVar(&c.deltaRetention, "delta-retention", 3*time.Minute, "how long changes stay in the delta queue")
	fs.DurationVar(&c.api.TrendInterval, "dashboard-trend-interval", 10*time.Second, "how often the dashboard's trends are sampled, at least 100ms (they keep 360 samples: an hour by default)")
	fs.DurationVar(&node.RenewBatchInterval, "renew-batch-interval", node.RenewBatchInterval, "how often the leader writes the renewals it gathered to the log, 0 or at least 1ms; 0 = one entry per renewal")
	fs.IntVar(&node.JournalMaxEntries, "journal-max-entries", node.JournalMaxEntries, "most writes the AP fallback journal holds while quorum is lost; then writes get 503 (0 = unbounded)")
	fs.Int64Var(&node.JournalMaxBytes, "journal-max-bytes", node.JournalMaxBytes, "largest size of the AP fallback journal on disk; then writes get 503 (0 = unbounded)")
	fs.DurationVar(&lease.RenewalRateWindow, "renewal-rate-window", lease.RenewalRateWindow, "window renewals are counted over for self-preservation (scaled to per minute); the eviction cap holds over it too")
	fs.Int64Var(&c.api.MaxBodyBytes, "max-body-bytes", c.api.MaxBodyBytes, "largest request body accepted")
	fs.DurationVar(&node.HeartbeatTimeout, "raft-heartbeat-timeout", node.HeartbeatTimeout, "Raft heartbeat timeout")
	fs.DurationVar(&node.ElectionTimeout, "raft-election-timeout", node.ElectionTimeout, "Raft election timeout")
	fs.DurationVar(&node.LeaderLeaseTimeout, "raft-leader-lease-timeout", node.LeaderLeaseTimeout, "Raft leader lease timeout")
	fs.DurationVar(&node.CommitTimeout, "raft-commit-timeout", node.CommitTimeout, "longest a quiet leader waits before telling followers the commit index")
	fs.Uint64Var(&node.SnapshotThreshold, "snapshot-threshold", node.SnapshotThreshold, "log entries between snapshots (a registry of more than four times as many instances: a quarter of its instance count)")
	fs.DurationVar(&node.SnapshotInterval, "snapshot-interval", node.SnapshotInterval, "how often to check whether to snapshot")
	fs.Uint64Var(&node.TrailingLogs, "trailing-logs", node.TrailingLogs, "log entries kept after a snapshot")
	fs.StringVar(&c.authFile, "auth-file", "", "file of user:role:bcrypt-hash lines; turns on HTTP basic auth (roles read, write, admin)")
	fs.StringVar(&c.clusterSecret, "cluster-secret", "", "credential every node-to-node call and Raft connection proves; internal endpoints, the Raft port and control calls (join, remove, mode, restore) require it")
	fs.StringVar(&c.clusterSecretFile, "cluster-secret-file", "", "file holding the cluster secret (instead of --cluster-secret)")
	fs.BoolVar(&c.api.InsecureCluster, "insecure-cluster", false, "without a cluster secret, let any host call the internal endpoints and control calls (otherwise only this host may), and start a multi-node cluster listening beyond loopback")
	fs.BoolVar(&c.api.StrictInput, "strict-input", true, "refuse bad app names, instance ids and oversized metadata with 400 (--strict-input=false accepts anything Eureka would)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM certificate: serve HTTPS (and talk HTTPS to peers)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key for --tls-cert")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "PEM CA bundle: require client certificates signed by it (mTLS)")
	fs.BoolVar(&c.raftTLS, "raft-tls", false, "run Raft over mutual TLS with --tls-cert/--tls-key; peers must present a certificate from --tls-ca (else --tls-client-ca)")
	fs.StringVar(&c.eurekaPeers, "eureka-peers", "", "service URLs of an eureka-server ring to join as a peer (http://host:8761/eureka/,...): copy its registry before serving reads, replicate this cluster's own changes to it (docs/migrate-from-eureka.md)")
	fs.DurationVar(&c.eurekaSyncTimeout, "eureka-sync-timeout", time.Minute, "how long a start with --eureka-peers tries to copy the ring's registry before serving reads without it")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM CA bundle peers' certificates are checked against (default: --tls-client-ca, else the system roots)")
	addRegionFlags(fs, &c.regions)
	return fs
}

// parseServe parses args and the environment into a config.
func parseServe(args []string, env func(string) string) (*serveConfig, *flag.FlagSet, error) {
	c := &serveConfig{}
	fs := newServeFlags(c)
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if fs.NArg() > 0 {
		return nil, fs, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	// The secret given one way on the command line wins over the other
	// way's variable, as in the operator CLI: a shell that exported
	// HEUREKA_CLUSTER_SECRET for the CLI can still start a node with
	// --cluster-secret-file.
	if given["cluster-secret"] || given["cluster-secret-file"] {
		given["cluster-secret"], given["cluster-secret-file"] = true, true
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "HEUREKA_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := env(name); v != "" && !given[f.Name] && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %v", name, v, err)
			}
		}
	})
	if envErr != nil {
		return nil, fs, envErr
	}
	c.regions.envRegions(given, env)
	return c, fs, c.check()
}

// maxWriteBody bounds --max-body-bytes: half of what a leader reads of a
// forwarded call (nodeapi), room for the entry's framing.
const maxWriteBody = 4 << 20

func (c *serveConfig) check() error {
	if _, err := hclogLevel(c.logLevel); err != nil {
		return err
	}
	memory, err := memlimit.Parse(c.memoryLimit)
	if err != nil {
		return err
	}
	c.memory = memory
	if t := c.cluster.Lease.RenewalPercentThreshold; t <= 0 || t > 1 {
		return fmt.Errorf("--renewal-percent-threshold %v: must be in (0, 1]", t)
	}
	for name, d := range map[string]time.Duration{
		"--response-cache-update-interval": c.api.Cache.UpdateInterval, "--response-cache-auto-expiration": c.api.Cache.AutoExpiration,
		"--eviction-interval": c.cluster.Lease.EvictionInterval, "--delta-retention": c.deltaRetention,
	} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive", name)
		}
	}
	if c.api.Cache.PushWindow < 0 {
		return errors.New("--response-cache-push-window must not be negative")
	}
	if c.api.MaxBodyBytes < 1024 {
		return errors.New("--max-body-bytes must be at least 1024")
	}
	if c.api.MaxBodyBytes > maxWriteBody {
		// A follower forwards a write to the leader in a call the leader
		// reads up to 8 MiB of: a larger registration accepted here could
		// never be applied through a follower.
		return fmt.Errorf("--max-body-bytes must be at most %d (%d MiB)", maxWriteBody, maxWriteBody>>20)
	}
	for _, peer := range splitList(c.eurekaPeers) {
		if err := checkOpsAddr(peer); err != nil {
			return fmt.Errorf("--eureka-peers %q: %v", redactedAddr(peer), err)
		}
	}
	if c.eurekaPeers != "" && c.eurekaSyncTimeout <= 0 {
		return errors.New("--eureka-sync-timeout must be positive")
	}
	// Loops that run this often would spin (a ticker of a nanosecond).
	for _, m := range []struct {
		name     string
		d, least time.Duration
	}{
		{"--response-cache-update-interval", c.api.Cache.UpdateInterval, 10 * time.Millisecond},
		{"--dashboard-trend-interval", c.api.TrendInterval, 100 * time.Millisecond},
	} {
		if m.d < m.least {
			return fmt.Errorf("%s %v: must be at least %v", m.name, m.d, m.least)
		}
	}
	if d := c.cluster.RenewBatchInterval; d > 0 && d < time.Millisecond {
		return fmt.Errorf("--renew-batch-interval %v: must be 0 (one entry per renewal) or at least 1ms", d)
	}
	if strings.TrimSpace(c.dataDir) == "" {
		return errors.New("--data-dir must not be empty")
	}
	if err := c.regions.check(); err != nil {
		return err
	}
	// Addresses are checked here, not when listening, so that a typo is a
	// usage error before the data directory is opened.
	for _, a := range []struct{ name, addr string }{
		{"--http-addr", c.httpAddr}, {"--http-advertise", c.httpAdvertise},
		{"--raft-addr", c.raftAddr}, {"--raft-advertise", c.raftAdvertise}, {"--join", c.join},
	} {
		if a.addr == "" && a.name != "--http-addr" && a.name != "--raft-addr" {
			continue // not given
		}
		if err := checkHostPort(a.addr); err != nil {
			return fmt.Errorf("%s %q: %v", a.name, a.addr, err)
		}
	}
	if err := c.checkSecurity(); err != nil {
		return err
	}
	_, err = c.clusterConfig()
	return err
}

// checkHostPort refuses an address that is not host:port with a port
// number from 0 to 65535.
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port: %v", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return nil
}

func hclogLevel(s string) (hclog.Level, error) {
	l := hclog.LevelFromString(s)
	if l == hclog.NoLevel {
		return l, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", s)
	}
	return l, nil
}

// clusterConfig derives the Raft node's config, taking this node's
// advertised addresses from the initial cluster list when it names them.
func (c *serveConfig) clusterConfig() (cluster.Config, error) {
	cc := c.cluster
	members, err := cluster.ParseInitialCluster(c.initialCluster)
	if err != nil {
		return cc, fmt.Errorf("--initial-cluster: %v", err)
	}
	cc.NodeID = c.nodeID
	cc.RaftBind = c.raftAddr
	cc.RaftAdvertise = c.raftAdvertise
	cc.HTTPAdvertise = c.httpAdvertise
	source := "--http-advertise" // which flag the HTTP advertise address comes from
	for _, m := range members {
		if m.ID == c.nodeID {
			if cc.RaftAdvertise == "" {
				cc.RaftAdvertise = m.RaftAddr
			}
			if cc.HTTPAdvertise == "" {
				cc.HTTPAdvertise, source = m.HTTPAddr, "--initial-cluster"
			}
		}
	}
	if cc.HTTPAdvertise == "" {
		cc.HTTPAdvertise, source = c.httpAddr, "--http-addr"
		// A listen address on all interfaces names no host peers can
		// dial: take the one they dial for Raft, which is this node too.
		host, port, err := net.SplitHostPort(c.httpAddr)
		if ip := net.ParseIP(host); err == nil && (host == "" || (ip != nil && ip.IsUnspecified())) {
			raftHost := c.raftAddr
			if cc.RaftAdvertise != "" {
				raftHost = cc.RaftAdvertise
			}
			if h, _, err := net.SplitHostPort(raftHost); err == nil {
				cc.HTTPAdvertise = net.JoinHostPort(h, port)
			}
		}
	}
	cc.InitialCluster = members
	cc.Join = c.join
	cc.ClusterSecret = c.secret
	cc.StrictInput = c.api.StrictInput
	if c.tls != nil {
		cc.HTTPClientTLS = c.tls.client
		cc.RaftTLS = c.tls.raft
	}
	if err := cc.Validate(); err != nil {
		return cc, err
	}
	// Peers forward writes to the leader's advertised HTTP address and
	// members lists show it, so it must be one they can dial.
	if err := cluster.CheckDialable(cc.HTTPAdvertise); err != nil {
		if source == "--http-advertise" {
			return cc, fmt.Errorf("--http-advertise %v", err)
		}
		return cc, fmt.Errorf("http advertise address from %s: %v (set --http-advertise)", source, err)
	}
	return cc, nil
}

// serve runs `heureka serve` as a straight line of steps: parse the
// flags, set up logging and the memory limit, open the data directory,
// start the Raft node (and the eureka-server peering, if asked), start the
// HTTP API, serve until a signal, shut down. Each step that can fail
// reports why and the exit code is returned at once.
func serve(args []string) int {
	c, code, ok := parseServeArgs(args)
	if !ok {
		return code
	}
	log := createLogger(c)
	stopMemory := startMemoryLimit(c, log)
	defer stopMemory()

	// The HTTP port first: a start that fails on a port in use must not
	// have claimed a new data directory for its node id (store.Open
	// records it), or the corrected command is refused.
	ln, err := net.Listen("tcp", c.httpAddr)
	if err != nil {
		log.Error("listen http", "addr", c.httpAddr, "error", err)
		return 1
	}
	st, code := openStore(c, log)
	if st == nil {
		ln.Close()
		return code
	}
	defer st.Close()
	if err := checkStoredCluster(c, st); err != nil {
		ln.Close()
		fmt.Fprintf(os.Stderr, "heureka serve: %v\n", err)
		return 2
	}

	cc, peers, synced := createClusterConfig(c)
	f := fsm.New(c.deltaRetention, log)
	node, err := cluster.New(cc, cluster.Deps{Store: st}, f, log)
	if err != nil {
		ln.Close()
		log.Error("start node", "error", err)
		return 1
	}
	if len(peers) > 0 {
		startPeering(node, c.api.StrictInput, peers, c.eurekaSyncTimeout, synced, log)
	}
	startRegions(node, &c.regions, log)
	api, err := httpapi.New(c.httpConfig(), node, log)
	if err != nil {
		ln.Close()
		node.Shutdown()
		log.Error("start http api", "error", err)
		return 1
	}
	defer api.Close()
	srv, ln := createHTTPServer(c, api, ln)
	serveErr := startHTTPServer(srv, ln)
	log.Info("serving", "http", ln.Addr().String(), "raft", cc.RaftBind, "data_dir", c.dataDir, "mode", cc.Mode,
		"auth", c.users != nil, "cluster_secret", c.secret != "", "tls", c.tls != nil, "raft_tls", c.raftTLS)

	code = waitForStop(serveErr, log)
	return shutdown(srv, node, code, log)
}

// parseServeArgs parses the command line; ok is false when serve is to
// exit at once with code (after --help, or on a bad flag).
func parseServeArgs(args []string) (c *serveConfig, code int, ok bool) {
	c, fs, err := parseServe(args, os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fmt.Fprintln(os.Stdout, "Usage: heureka serve [flags]   (each flag also reads HEUREKA_<FLAG_NAME>)")
		fs.PrintDefaults()
		return nil, 0, false
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "heureka serve: %v\n", err)
		return nil, 2, false
	}
	return c, 0, true
}

// createLogger is the node's logger, on stderr, naming the node.
func createLogger(c *serveConfig) hclog.Logger {
	level, _ := hclogLevel(c.logLevel)
	log := hclog.New(&hclog.LoggerOptions{Name: "heureka", Level: level, JSONFormat: c.logJSON, Output: os.Stderr})
	return log.With("node", c.nodeID)
}

// startMemoryLimit applies the memory policy (--memory-limit) until the
// returned function is called.
func startMemoryLimit(c *serveConfig, log hclog.Logger) (stop func()) {
	ctx, stop := context.WithCancel(context.Background())
	memlimit.Apply(ctx, c.memory, memlimit.Interval, log)
	return stop
}

// openStore opens the data directory; on failure it says why and returns
// the exit code (2 when another process or node holds the directory).
func openStore(c *serveConfig, log hclog.Logger) (*store.Store, int) {
	storeCfg := store.DefaultConfig(c.dataDir)
	storeCfg.NodeID = c.nodeID
	st, err := store.Open(storeCfg, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "heureka serve: %v\n", err)
		if errors.Is(err, store.ErrLocked) || errors.Is(err, store.ErrOtherNode) {
			return nil, 2
		}
		return nil, 1
	}
	return st, 0
}

// checkStoredCluster: a node restarted from its data directory has no
// cluster flags; its stored configuration says whether it is one of
// several, and such a node may listen beyond loopback only as
// checkOpenCluster allows, and serve basic auth only with the cluster
// secret, as the flags' check (checkSecurity) asks of a new one.
func checkStoredCluster(c *serveConfig, st *store.Store) error {
	if n, err := st.ConfiguredServers(); err == nil && n > 1 {
		if c.users != nil && c.secret == "" {
			return fmt.Errorf("a node of the %d-member cluster in %s: %w", n, c.dataDir, errAuthNeedsSecret)
		}
		return c.checkOpenCluster(fmt.Sprintf("a node of the %d-member cluster in %s", n, c.dataDir))
	}
	return nil
}

// createClusterConfig is the node's cluster configuration, and the
// eureka-server peers to sync from: with peers, reads wait for the first
// sync (synced closes then).
func createClusterConfig(c *serveConfig) (cc cluster.Config, peers []string, synced chan struct{}) {
	cc, _ = c.clusterConfig()
	peers = splitList(c.eurekaPeers)
	if len(peers) > 0 {
		synced = make(chan struct{})
		cc.ReadHold = synced
	}
	return cc, peers, synced
}

// httpConfig is the HTTP API's configuration: the flags' settings and the
// derived security ones.
func (c *serveConfig) httpConfig() httpapi.Config {
	hcfg := c.api
	hcfg.Regions = c.regions.read
	hcfg.Users = c.users
	hcfg.ClusterSecret = c.secret
	if c.tls != nil {
		hcfg.PeerTLS = c.tls.client
	}
	return hcfg
}

// createHTTPServer is the HTTP server of api and the listener it serves
// (writev for gzip documents, TLS when configured).
func createHTTPServer(c *serveConfig, api *httpapi.Server, ln net.Listener) (*http.Server, net.Listener) {
	srv := &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// With Listener's connections: a document goes out in one
		// writev, header and all.
		ConnContext: httpapi.ConnContext,
	}
	ln = httpapi.Listener(ln) // gzip documents go out with writev
	if c.tls != nil {
		srv.TLSConfig = c.tls.server
		ln = tls.NewListener(ln, c.tls.server)
	}
	return srv, ln
}

// startHTTPServer serves ln; the channel gets the error Serve ends with.
func startHTTPServer(srv *http.Server, ln net.Listener) <-chan error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	return serveErr
}

// waitForStop waits for SIGTERM or SIGINT (exit code 0) or the HTTP
// server's failure (1).
func waitForStop(serveErr <-chan error, log hclog.Logger) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sigs:
		// A second signal takes its default course (the process ends):
		// a shutdown that hangs can still be interrupted. Every write
		// acknowledged is already synced to the log.
		signal.Stop(sigs)
		log.Info("shutting down (a second signal ends the process at once)", "signal", s.String())
		return 0
	case err := <-serveErr:
		log.Error("http server failed", "error", err)
		return 1
	}
}

// shutdown stops the HTTP server (giving requests 5s) and the Raft node,
// and returns the exit code: code, or 1 when the node did not stop
// cleanly.
func shutdown(srv *http.Server, node *cluster.Node, code int, log hclog.Logger) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("http shutdown", "error", err)
	}
	if err := node.Shutdown(); err != nil {
		log.Warn("raft shutdown", "error", err)
		code = 1
	}
	log.Info("stopped", "exit_code", strconv.Itoa(code))
	return code
}
