package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

const (
	// readyTimeout bounds how long a started node may take to answer /v1/status.
	readyTimeout = 30 * time.Second
	// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
	stopGrace = 10 * time.Second
	// cleanupGrace is the same for the processes t.Cleanup stops.
	cleanupGrace = 5 * time.Second
	// logTailLines is how much of each node's log a failed test prints.
	logTailLines = 80
	// binaryEnv names a prebuilt binary to use instead of building one.
	binaryEnv = "HEUREKA_E2E_BINARY"
	// binDirPrefix is the prefix of the temporary directory the binary is built in.
	binDirPrefix = "heureka-e2e-bin-"
)

// ---------------------------------------------------------------------------
// Binary

var (
	buildOnce sync.Once
	buildPath string
	buildDir  string
	buildErr  error
)

// Binary returns the path of a heureka binary built from this module's
// ./cmd/heureka. It is built once per test process, into a directory under
// os.TempDir() named heureka-e2e-bin-*; RemoveBinary deletes it (the e2e
// package's TestMain calls it; other packages may leave it behind). When the
// environment variable HEUREKA_E2E_BINARY is set, that file is used instead.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv(binaryEnv); p != "" {
			buildPath, buildErr = filepath.Abs(p)
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", binDirPrefix); buildErr != nil {
			return
		}
		buildPath, buildErr = launch.Build(buildDir, "heureka")
	})
	if buildErr != nil {
		t.Fatalf("build heureka: %v", buildErr)
	}
	return buildPath
}

// RemoveBinary deletes the directory Binary built into, if it built one.
// Call it from TestMain after m.Run.
func RemoveBinary() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// FreeAddr returns a loopback address "127.0.0.1:P" with P in [22000, 32000)
// (below the ephemeral range, so a node can restart on it) that was free a
// moment ago and is never handed out twice in one test process.
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := launch.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// ---------------------------------------------------------------------------
// Cluster and nodes

// Options adjust the processes StartCluster and StartNode launch.
type Options struct {
	// Binary, if set, is the heureka binary the nodes run instead of
	// Binary's (one built with test-only build tags).
	Binary string
	// Env is added to each process's environment (KEY=value). Inherited
	// HEUREKA_* variables are always dropped.
	Env []string
	// ExtraArgs are appended to every node's `heureka serve` arguments.
	ExtraArgs []string
	// NodeArgs, if set, returns further arguments for the node with the
	// given id (n1, n2, ...); they come after ExtraArgs.
	NodeArgs func(id string) []string
	// DefaultRaftTimings starts nodes with production Raft timings instead
	// of the fast test timings (benchmarks on a loaded machine want them).
	DefaultRaftTimings bool
	// RaftFront, if set, is called with each node's id and real Raft
	// address and returns the address the node advertises instead (a
	// faultproxy front): the initial cluster lists the fronts.
	RaftFront func(id, realAddr string) string
	// Credentials, if set ("user:password"), go into every node's BaseURL
	// (and so into the harness's own requests, status polls included) as
	// URL user info, which Go's HTTP client sends as basic auth.
	Credentials string
	// ClientTLS, if set, makes the harness talk HTTPS to the nodes with
	// this configuration (BaseURL starts with https:// and status polls use
	// it); requests through Do still use the plain package client.
	ClientTLS *tls.Config
}

// Cluster is a set of heureka processes started by one test.
type Cluster struct {
	// Nodes in the order they were started; StartNode appends.
	Nodes []*Node

	t    testing.TB
	opts Options
	lc   *launch.Cluster
	mu   sync.Mutex
}

// Node is one `heureka serve` process (and its restarts): launch.Node with
// methods that fail the test instead of returning errors.
type Node struct {
	*launch.Node
}

// StartCluster starts n nodes n1..nN that bootstrap together from the same
// --initial-cluster list (n=1 lists only itself), each with data dir
// <t.TempDir()>/nK, and waits until every node answers GET /v1/status. It does
// not wait for a leader: call WaitLeader. All processes are stopped in
// t.Cleanup; if the test failed, each node's log tail is printed first.
func StartCluster(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("StartCluster: n = %d", n)
	}
	c := newCluster(t, opts)
	planned, err := c.lc.Plan(n)
	if err != nil {
		t.Fatalf("StartCluster: %v", err)
	}
	for _, nd := range planned {
		c.add(nd)
	}
	if err := c.lc.StartAll(readyTimeout); err != nil {
		t.Fatal(err)
	}
	return c
}

func newCluster(t testing.TB, opts Options) *Cluster {
	skipShort(t)
	c := &Cluster{t: t, opts: opts}
	bin := opts.Binary
	if bin == "" {
		bin = Binary(t)
	}
	spec := launch.Spec{
		Binary:      bin,
		Dir:         t.TempDir(),
		Args:        opts.ExtraArgs,
		FastRaft:    !opts.DefaultRaftTimings,
		Env:         opts.Env,
		ClientTLS:   opts.ClientTLS,
		Credentials: opts.Credentials,
		// Through c.opts, so that a test may change NodeArgs before StartNode.
		NodeArgs: func(id string) []string {
			if c.opts.NodeArgs == nil {
				return nil
			}
			return c.opts.NodeArgs(id)
		},
	}
	if opts.RaftFront != nil {
		spec.RaftFront = func(id, real string) (string, error) { return opts.RaftFront(id, real), nil }
	}
	c.lc = launch.New(spec)
	// Cleanups run last-registered first: processes are stopped before the
	// logs are read, and both happen before t.TempDir is removed.
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpLogs()
		}
	})
	t.Cleanup(c.stopAll)
	return c
}

// skipShort skips a system test under go test -short (make unit): every
// test that starts heureka processes comes through here, so this is the one
// place that decides.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts heureka processes; skipped with -short (make unit), run by make e2e and make test")
	}
}

func (c *Cluster) add(lnd *launch.Node) *Node {
	nd := &Node{lnd}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, nd)
	c.mu.Unlock()
	return nd
}

// newNode allocates ports and directories for a node and adds it to c; its
// arguments have no --initial-cluster or --join.
func (c *Cluster) newNode(id string) *Node {
	lnd, err := c.lc.NewNode(id)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.add(lnd)
}

// StartNode starts one more node with the given id that joins the cluster
// through `--join <joinHTTPAddr>` (the HTTP address of any member) instead of
// --initial-cluster, and waits until it answers GET /v1/status. It does not
// wait for the join to complete.
func (c *Cluster) StartNode(t testing.TB, id, joinHTTPAddr string) *Node {
	t.Helper()
	lnd, err := c.lc.Join(id, joinHTTPAddr, readyTimeout)
	if lnd != nil {
		c.add(lnd)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.Node(id)
}

// Node returns the node with the given id, or nil.
func (c *Cluster) Node(id string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nd := range c.Nodes {
		if nd.ID == id {
			return nd
		}
	}
	return nil
}

// Live returns the nodes whose process is running and not paused.
func (c *Cluster) Live() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var live []*Node
	for _, nd := range c.Nodes {
		if nd.Running() && !nd.Paused() {
			live = append(live, nd)
		}
	}
	return live
}

// WaitLeader polls the live nodes every 50 ms until exactly one of them says
// it is Leader and every live node names that node as leader, and returns it.
// It fails the test after timeout, listing what each node last said.
func (c *Cluster) WaitLeader(t testing.TB, timeout time.Duration) *Node {
	t.Helper()
	lnd, err := c.lc.WaitLeader(context.Background(), timeout)
	if err != nil {
		t.Fatal(err)
	}
	return c.Node(lnd.ID)
}

// leaderOnce asks every live node once; it returns the agreed leader, or nil
// and a description of the disagreement.
func (c *Cluster) leaderOnce() (*Node, string) {
	nd, desc := c.lc.LeaderOnce(context.Background())
	if nd == nil {
		return nil, desc
	}
	return c.Node(nd.ID), desc
}

// Followers returns the live nodes other than leader.
func (c *Cluster) Followers(leader *Node) []*Node {
	var out []*Node
	for _, nd := range c.Live() {
		if nd != leader {
			out = append(out, nd)
		}
	}
	return out
}

// DumpLogs prints the last lines of every node's log with t.Log.
func (c *Cluster) DumpLogs() {
	for _, nd := range c.lc.Nodes() {
		c.t.Logf("---- last %d lines of %s (%s) ----\n%s", logTailLines, nd.ID, nd.LogPath, nd.LogTail(logTailLines))
	}
}

// stopAll stops every process of the cluster concurrently: resume if
// paused, SIGTERM, SIGKILL after cleanupGrace.
func (c *Cluster) stopAll() {
	c.lc.Stop(cleanupGrace, func(nd *launch.Node, code int, killed bool) {
		if killed {
			c.t.Logf("cleanup: %s did not exit within %v of SIGTERM; killed", nd.ID, cleanupGrace)
		} else if code != 0 {
			c.t.Logf("cleanup: %s exited with code %d after SIGTERM", nd.ID, code)
		}
	})
}

// Args returns a copy of the node's `heureka serve` arguments.
func (nd *Node) Args() []string { return append([]string(nil), nd.Argv...) }

// waitReady waits until the node answers GET /v1/status, failing the test if
// the process exits first or readyTimeout passes.
func (nd *Node) waitReady(t testing.TB) {
	t.Helper()
	if err := nd.WaitReady(readyTimeout); err != nil {
		t.Fatal(err)
	}
}

// Stop sends SIGTERM (resuming a paused process first), waits up to 10 s for
// the process to exit, then sends SIGKILL. It returns the exit code (-1 when
// the process had to be killed or was not running).
func (nd *Node) Stop() int {
	code, _ := nd.Node.Stop(stopGrace)
	return code
}

// Restart starts the node again with the same arguments and data dir (after
// stopping it with SIGKILL if it is still running) and waits until it answers
// GET /v1/status.
func (nd *Node) Restart(t testing.TB) {
	t.Helper()
	nd.Kill()
	if err := nd.Start(); err != nil {
		t.Fatalf("restart %s: %v", nd.ID, err)
	}
	nd.waitReady(t)
}

// ---------------------------------------------------------------------------
// One-off processes

// Result is the outcome of RunBinary.
type Result struct {
	ExitCode int // -1 if killed by a signal (including the timeout)
	Stdout   string
	Stderr   string
	TimedOut bool
	Elapsed  time.Duration
}

// RunBinary runs the heureka binary with args (e.g. "serve", "--data-dir", d)
// and extra environment, waits up to timeout for it to exit (then kills it
// by its PID), and returns its exit code and output.
func RunBinary(t testing.TB, timeout time.Duration, env []string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Env = launch.Env(env, "HEUREKA_")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = launch.SysProcAttr()
	cmd.WaitDelay = 5 * time.Second // a child left holding its output does not hold the test
	start := time.Now()
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatalf("run heureka %s: %v", strings.Join(args, " "), err)
	}
	code := cmd.ProcessState.ExitCode()
	return Result{
		ExitCode: code,
		Stdout:   stdout.String(),
		Stderr:   stderr.String(),
		TimedOut: code == -1 && ctx.Err() != nil, // killed because the time ran out
		Elapsed:  time.Since(start),
	}
}

// ---------------------------------------------------------------------------
// Waiting

// WaitFor polls cond every 25 ms until it returns true, failing the test with
// msg if timeout passes first. Use it instead of sleeping.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	if !Eventually(timeout, cond) {
		t.Fatalf("timed out after %v waiting for: %s", timeout, msg)
	}
}

// Eventually polls cond every 25 ms until it returns true (true) or timeout
// passes (false).
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}
