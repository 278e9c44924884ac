package httpapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	_ "net/http/pprof" // registers on http.DefaultServeMux, served only with Config.Pprof
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/httpapi/dashboard"
	"github.com/heureka-registry/heureka/nodeapi"
)

// Cluster is what the HTTP layer needs from the Raft node. *cluster.Node
// implements it; tests substitute fakes.
type Cluster interface {
	ID() string
	LeaderID() string
	Mode() string
	HasQuorum() bool
	Apply(ctx context.Context, entry []byte) (uint64, error)
	Renew(ctx context.Context, app, id string, lastDirty int64) error
	RenewReplicated(ctx context.Context, app, id string, lastDirty int64) error
	QuorumLost() bool
	Ready() bool
	CaughtUpOnce() bool
	OnCatchUp(fn func())
	WaitReady(ctx context.Context, d time.Duration) bool
	SetMode(ctx context.Context, mode string) error
	ReadBarrier(ctx context.Context) error
	Read(fn func(r *fsm.Registry))
	ReadDurable(fn func(r *fsm.Registry))
	Observe(fn func(fsm.Change))
	Status() cluster.Status
	LeaseStatus(ctx context.Context) (cluster.LeaseStatus, error)
	Members() ([]cluster.MemberInfo, error)
	Join(ctx context.Context, m fsm.Member) error
	Remove(ctx context.Context, id string) error
	InternalHandler(status func(error) int) http.Handler
}

// Config tunes the HTTP layer.
type Config struct {
	// MaxBodyBytes bounds request bodies; larger ones get 413.
	MaxBodyBytes int64
	// Now is the clock used for defaults such as a missing lastDirtyTimestamp
	// and the delta queue's read-time retention (the retention itself is the
	// registry's, fsm.Registry.DeltaRetention); nil means time.Now.
	Now func() time.Time
	// Cache configures the response cache.
	Cache cache.Config
	// Pprof serves Go's profiler under /debug/pprof (off by default).
	Pprof bool
	// Users turns on HTTP basic auth with roles (nil: no auth).
	Users *Users
	// ClusterSecret is the credential of node-to-node calls; with it set,
	// control calls (joins, removals, mode changes, restores) are accepted
	// with the secret alone, and only with it (or an admin user) at all.
	ClusterSecret string
	// InsecureCluster opens the internal endpoints and the control calls to
	// any host on a node without a cluster secret or users; without it they
	// answer only loopback clients (--insecure-cluster).
	InsecureCluster bool
	// StrictInput turns on the name, id and metadata limits (limits.go).
	StrictInput bool
	// TrendInterval is how often the dashboard's trends are sampled (see
	// dashboard.Config).
	TrendInterval time.Duration
	// PeerTLS is the client TLS configuration of node-to-node calls (nil:
	// plain HTTP); the dashboard probes other members with it.
	PeerTLS *tls.Config
	// Regions are the remote regions served (regions.go).
	Regions RegionConfig
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{MaxBodyBytes: 1 << 20, Cache: cache.DefaultConfig()}
}

// Server holds the gin engine and what its handlers use.
type Server struct {
	cfg     Config
	cluster Cluster
	views   *views
	// durableViews builds documents from the durable state while the
	// node catches up (its fragments never mix with the FSM's).
	durableViews *views
	cache        *cache.Cache
	log          hclog.Logger
	engine       *gin.Engine
	// refusals rate-limits the log lines of control calls refused for
	// want of the cluster secret.
	refusals *nodeapi.RefusalLog
	// waiting counts blocking reads waiting (parked or in awaitNewer).
	waiting atomic.Int64
	lot     *parkingLot
	// started is when the node's HTTP layer came up (the status document's uptime).
	started time.Time
	// dash is the page at / and its trend sampler.
	dash *dashboard.Dashboard
	// peerItems counts the replicated changes received in batches.
	peerItems atomic.Uint64
	// nodeValue, modeValue and leaderValue are the node headers' values.
	nodeValue, modeValue, leaderValue sharedValue

	// contentChanged wakes ?after= delta reads (regions.go).
	contentChanged changeSignal
}

// New builds the HTTP handler for a node and starts its response cache;
// Close stops the cache.
func New(cfg Config, c Cluster, log hclog.Logger) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultConfig().MaxBodyBytes
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	gin.SetMode(gin.ReleaseMode)
	// Cached documents come in every format, compact variants included.
	cfg.Cache.Formats = max(cfg.Cache.Formats, eureka.NumFormats)
	s := &Server{cfg: cfg, cluster: c, log: log.Named("http"), started: time.Now(),
		refusals: nodeapi.NewRefusalLog(nodeapi.RefusalLogEvery)}
	s.views = newViews(c.Read, cfg)
	s.durableViews = newViews(c.ReadDurable, cfg)
	var err error
	if s.cache, err = cache.New(cfg.Cache, s.views.build, log); err != nil {
		return nil, fmt.Errorf("response cache: %w", err)
	}
	s.lot = newParkingLot(s)
	// Documents built while the node was behind must not be served
	// unmarked once it caught up (cluster/ready.go).
	c.OnCatchUp(s.cache.Reset)
	s.dash = dashboard.New(dashboard.Config{TrendInterval: cfg.TrendInterval, PeerTLS: cfg.PeerTLS,
		ClusterSecret: cfg.ClusterSecret, CacheStats: s.cache.Stats, CommitTime: raftCommitSummary, Fail: s.fail}, c)
	c.Observe(func(ch fsm.Change) {
		s.views.forget(ch)
		s.cache.Invalidate(ch)
		s.dash.Observe(ch)
		if ch.Region == "" && !ch.Empty() {
			s.contentChanged.changed()
		}
	})
	e := gin.New()
	// Eureka clients send writes to paths with and without trailing slashes;
	// a redirect would turn a POST into a GET in some clients (docs/eureka-api.md, "Client traps").
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = false
	m := s.newMetrics()
	e.Use(m.observe, s.recoverPanics)
	e.Use(s.authenticate)
	e.Use(s.nodeHeaders, s.logRequests)
	e.Any("/eureka/*path", s.eureka)
	s.operatorRoutes(e)
	m.routes(e)
	e.GET("/", s.dash.Serve)
	s.snapshotRoutes(e)
	e.Any(nodeapi.Prefix+"*path", gin.WrapH(c.InternalHandler(errorStatus)))
	if cfg.Pprof {
		e.Any("/debug/pprof/*path", gin.WrapH(http.DefaultServeMux))
	}
	e.NoRoute(func(c *gin.Context) { s.fail(c, errNotFoundRoute) })
	s.engine = e
	return s, nil
}

// Close releases the parked blocking reads and stops the response cache's
// refresher and the dashboard's trend sampler.
func (s *Server) Close() {
	s.lot.close()
	s.dash.Close()
	s.cache.Close()
}

// Waiting is how many blocking reads are waiting for a change.
func (s *Server) Waiting() int64 { return s.waiting.Load() }

// CacheStats reports the response cache counters.
func (s *Server) CacheStats() cache.Stats { return s.cache.Stats() }

// Handler is the http.Handler to serve.
func (s *Server) Handler() http.Handler { return s.engine }

// nodeHeaders adds the contract's node headers to every response (the
// keys are in canonical form; the values are shared while they stay the
// same).
func (s *Server) nodeHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h["X-Heureka-Node"] = s.nodeValue.of(s.cluster.ID())
	h["X-Heureka-Mode"] = s.modeValue.of(s.cluster.Mode())
	h["X-Heureka-Leader"] = s.leaderValue.of(s.cluster.LeaderID())
	c.Next()
}

// sharedValue hands out a one-element header value slice for a value that
// rarely changes (the node's id, mode and leader), the same slice while the
// value stays the same, so that setting the header allocates nothing.
// Header values are never modified in place.
type sharedValue struct{ p atomic.Pointer[[]string] }

func (sv *sharedValue) of(v string) []string {
	if p := sv.p.Load(); p != nil && (*p)[0] == v {
		return *p
	}
	vs := []string{v}
	sv.p.Store(&vs)
	return vs
}

func (s *Server) logRequests(c *gin.Context) {
	if !s.log.IsDebug() {
		c.Next()
		return
	}
	start := time.Now()
	c.Next()
	s.log.Debug("request", "method", c.Request.Method, "path", c.Request.URL.Path,
		"status", c.Writer.Status(), "duration", time.Since(start))
}

// recoverPanics turns a handler panic into a 500 and a log line: no panic
// reaches a client or takes the node down.
func (s *Server) recoverPanics(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("handler panic", "method", c.Request.Method, "path", c.Request.URL.Path, "panic", v)
			if !c.Writer.Written() {
				c.Header("Content-Type", "application/json")
				c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "internal error"})
			}
		}
	}()
	c.Next()
}
