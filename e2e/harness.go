package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Fast Raft timings every node gets, so that elections in tests take well
// under a second.
var raftTestArgs = []string{
	"--raft-heartbeat-timeout", "500ms",
	"--raft-election-timeout", "500ms",
	"--raft-leader-lease-timeout", "250ms",
}

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
		buildPath, buildErr = build()
	})
	if buildErr != nil {
		t.Fatalf("build heureka: %v", buildErr)
	}
	return buildPath
}

func build() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module (go env GOMOD is empty)")
	}
	dir, err := os.MkdirTemp("", binDirPrefix)
	if err != nil {
		return "", err
	}
	buildDir = dir
	bin := filepath.Join(dir, "heureka")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/heureka-registry/heureka/cmd/heureka")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/heureka: %w\n%s", err, out)
	}
	return bin, nil
}

// RemoveBinary deletes the directory Binary built into, if it built one.
// Call it from TestMain after m.Run.
func RemoveBinary() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// ---------------------------------------------------------------------------
// Ports

var (
	portMu   sync.Mutex
	usedPort = map[string]bool{}
)

// Ports come from below Linux's ephemeral range (32768–60999): a port picked
// there may be taken by some outgoing connection's local end while its node
// is down, and a node that restarts must bind the same port again.
const (
	portLow  = 20000
	portHigh = 32000
)

// FreeAddr returns a loopback address "127.0.0.1:P" with P in [20000, 32000)
// that was free a moment ago: it picks a random port, checks it by listening
// on it, and closes the listener. A port is never handed out twice in one
// test process.
func FreeAddr(t testing.TB) string {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", portLow+rand.IntN(portHigh-portLow))
		if usedPort[addr] {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: try another
		}
		l.Close()
		usedPort[addr] = true
		return addr
	}
	t.Fatal("no free loopback port found below the ephemeral range")
	return ""
}

// ---------------------------------------------------------------------------
// Cluster and nodes

// Options adjust the processes StartCluster and StartNode launch.
type Options struct {
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
	dir  string
	opts Options
	mu   sync.Mutex
}

// Node is one `heureka serve` process (and its restarts).
type Node struct {
	ID       string
	HTTPAddr string // 127.0.0.1:P
	RaftAddr string // 127.0.0.1:Q
	DataDir  string
	LogPath  string // stdout and stderr of every run, appended

	args  []string // full argument list, starting with "serve"
	extra []string // node-specific arguments added by the harness
	env   []string

	userinfo  string       // Options.Credentials
	clientTLS *tls.Config  // Options.ClientTLS
	statusCl  *http.Client // status polls when clientTLS is set

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current process has exited
	exit   int           // exit code of the last process (-1 when killed by a signal)
	paused bool
	runs   int
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
	bin := Binary(t)
	c := newCluster(t, opts)
	members := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		nd := c.newNode(fmt.Sprintf("n%d", i))
		adv := nd.RaftAddr
		if opts.RaftFront != nil {
			adv = opts.RaftFront(nd.ID, nd.RaftAddr)
			nd.extra = append(nd.extra, "--raft-advertise", adv)
		}
		members = append(members, fmt.Sprintf("%s=%s@%s", nd.ID, adv, nd.HTTPAddr))
	}
	initial := strings.Join(members, ",")
	for _, nd := range c.Nodes {
		nd.args = c.serveArgs(nd, "--initial-cluster", initial)
	}
	for _, nd := range c.Nodes {
		if err := nd.start(bin); err != nil {
			t.Fatalf("start %s: %v", nd.ID, err)
		}
	}
	for _, nd := range c.Nodes {
		nd.waitReady(t)
	}
	return c
}

func newCluster(t testing.TB, opts Options) *Cluster {
	skipShort(t)
	c := &Cluster{t: t, dir: t.TempDir(), opts: opts}
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

// newNode allocates ports and directories for a node and adds it to c.
func (c *Cluster) newNode(id string) *Node {
	nd := &Node{
		ID:       id,
		HTTPAddr: FreeAddr(c.t),
		RaftAddr: FreeAddr(c.t),
		DataDir:  filepath.Join(c.dir, id),
		LogPath:  filepath.Join(c.dir, "logs", id+".log"),
		env:      nodeEnv(c.opts.Env),
		userinfo: c.opts.Credentials,
	}
	if c.opts.ClientTLS != nil {
		nd.clientTLS = c.opts.ClientTLS
		nd.statusCl = &http.Client{Timeout: 2 * time.Second,
			Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, TLSClientConfig: c.opts.ClientTLS}}
	}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, nd)
	c.mu.Unlock()
	return nd
}

// serveArgs is the `heureka serve` argument list for nd with the cluster
// arguments (--initial-cluster or --join) in between the fixed and extra ones.
func (c *Cluster) serveArgs(nd *Node, clusterArgs ...string) []string {
	args := []string{"serve",
		"--node-id", nd.ID,
		"--http-addr", nd.HTTPAddr,
		"--raft-addr", nd.RaftAddr,
		"--data-dir", nd.DataDir,
	}
	args = append(args, clusterArgs...)
	args = append(args, nd.extra...)
	if !c.opts.DefaultRaftTimings {
		args = append(args, raftTestArgs...)
	}
	args = append(args, c.opts.ExtraArgs...)
	if c.opts.NodeArgs != nil {
		args = append(args, c.opts.NodeArgs(nd.ID)...)
	}
	return args
}

// StartNode starts one more node with the given id that joins the cluster
// through `--join <joinHTTPAddr>` (the HTTP address of any member) instead of
// --initial-cluster, and waits until it answers GET /v1/status. It does not
// wait for the join to complete.
func (c *Cluster) StartNode(t testing.TB, id, joinHTTPAddr string) *Node {
	t.Helper()
	bin := Binary(t)
	nd := c.newNode(id)
	nd.args = c.serveArgs(nd, "--join", joinHTTPAddr)
	if err := nd.start(bin); err != nil {
		t.Fatalf("start %s: %v", nd.ID, err)
	}
	nd.waitReady(t)
	return nd
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
	deadline := time.Now().Add(timeout)
	var last string
	for {
		leader, desc := c.leaderOnce()
		if leader != nil {
			return leader
		}
		last = desc
		if time.Now().After(deadline) {
			t.Fatalf("no agreed leader after %v: %s", timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaderOnce asks every live node once; it returns the agreed leader, or nil
// and a description of the disagreement.
func (c *Cluster) leaderOnce() (*Node, string) {
	live := c.Live()
	if len(live) == 0 {
		return nil, "no live nodes"
	}
	var (
		leaders []*Node
		named   = map[string]bool{}
		parts   []string
		ok      = true
	)
	for _, nd := range live {
		st, err := nd.TryStatus()
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", nd.ID, err))
			ok = false
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: state=%s leader=%q term=%d", nd.ID, st.State, st.Leader, st.Term))
		if st.State == "Leader" {
			leaders = append(leaders, nd)
		}
		named[st.Leader] = true
	}
	desc := strings.Join(parts, "; ")
	if !ok || len(leaders) != 1 || len(named) != 1 || !named[leaders[0].ID] {
		return nil, desc
	}
	return leaders[0], desc
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
	c.mu.Lock()
	nodes := append([]*Node(nil), c.Nodes...)
	c.mu.Unlock()
	for _, nd := range nodes {
		c.t.Logf("---- last %d lines of %s (%s) ----\n%s", logTailLines, nd.ID, nd.LogPath, tailFile(nd.LogPath, logTailLines))
	}
}

// stopAll stops every process of the cluster concurrently: resume if
// paused, SIGTERM, SIGKILL after cleanupGrace.
func (c *Cluster) stopAll() {
	c.mu.Lock()
	nodes := append([]*Node(nil), c.Nodes...)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, nd := range nodes {
		if !nd.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, killed := nd.stop(cleanupGrace)
			if killed {
				c.t.Logf("cleanup: %s did not exit within %v of SIGTERM; killed", nd.ID, cleanupGrace)
			} else if code != 0 {
				c.t.Logf("cleanup: %s exited with code %d after SIGTERM", nd.ID, code)
			}
		}()
	}
	wg.Wait()
}

// nodeEnv is the current environment without HEUREKA_* variables, plus extra.
func nodeEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HEUREKA_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// Args returns a copy of the node's `heureka serve` arguments.
func (nd *Node) Args() []string { return append([]string(nil), nd.args...) }

// BaseURL is "http://<http addr>" ("https://" with Options.ClientTLS, and
// with Options.Credentials as user info).
func (nd *Node) BaseURL() string {
	scheme := "http://"
	if nd.clientTLS != nil {
		scheme = "https://"
	}
	if nd.userinfo != "" {
		return scheme + nd.userinfo + "@" + nd.HTTPAddr
	}
	return scheme + nd.HTTPAddr
}

// URL is BaseURL followed by path, e.g. nd.URL("/eureka/apps").
func (nd *Node) URL(path string) string { return nd.BaseURL() + path }

// start launches the process; its output is appended to LogPath.
func (nd *Node) start(bin string) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil && !isClosed(nd.done) {
		return fmt.Errorf("%s is already running (pid %d)", nd.ID, nd.cmd.Process.Pid)
	}
	if err := os.MkdirAll(filepath.Dir(nd.LogPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(nd.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	nd.runs++
	fmt.Fprintf(logf, "==== e2e: run %d of %s at %s: %s %s\n", nd.runs, nd.ID,
		time.Now().Format(time.RFC3339Nano), bin, strings.Join(nd.args, " "))
	cmd := exec.Command(bin, nd.args...)
	cmd.Env = nd.env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	nd.cmd, nd.done, nd.paused = cmd, done, false
	go func() {
		cmd.Wait()
		logf.Close()
		nd.mu.Lock()
		nd.exit = cmd.ProcessState.ExitCode()
		nd.mu.Unlock()
		close(done)
	}()
	return nil
}

// waitReady waits until the node answers GET /v1/status, failing the test if
// the process exits first or readyTimeout passes.
func (nd *Node) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	var err error
	for {
		if _, err = nd.TryStatus(); err == nil {
			return
		}
		if !nd.Running() {
			t.Fatalf("%s exited with code %d before answering /v1/status; log tail:\n%s",
				nd.ID, nd.ExitCode(), tailFile(nd.LogPath, logTailLines))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer /v1/status within %v: %v", nd.ID, readyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PID is the process id of the current (or last) process, 0 if none.
func (nd *Node) PID() int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil || nd.cmd.Process == nil {
		return 0
	}
	return nd.cmd.Process.Pid
}

// Running reports whether the node's process has been started and not yet exited.
func (nd *Node) Running() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.cmd != nil && !isClosed(nd.done)
}

// Paused reports whether the process is stopped with SIGSTOP.
func (nd *Node) Paused() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.paused
}

// ExitCode is the exit code of the last process that exited (-1 when it was
// killed by a signal).
func (nd *Node) ExitCode() int {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.exit
}

// Done returns a channel closed when the current process exits.
func (nd *Node) Done() <-chan struct{} {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.done
}

func (nd *Node) signal(sig syscall.Signal) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil || isClosed(nd.done) {
		return errors.New("not running")
	}
	return syscall.Kill(nd.cmd.Process.Pid, sig)
}

// Kill sends SIGKILL to the process and waits for it to exit.
func (nd *Node) Kill() {
	if nd.signal(syscall.SIGKILL) == nil {
		<-nd.Done()
	}
	nd.mu.Lock()
	nd.paused = false
	nd.mu.Unlock()
}

// Stop sends SIGTERM (resuming a paused process first), waits up to 10 s for
// the process to exit, then sends SIGKILL. It returns the exit code (-1 when
// the process had to be killed or was not running).
func (nd *Node) Stop() int {
	code, _ := nd.stop(stopGrace)
	return code
}

func (nd *Node) stop(grace time.Duration) (code int, killed bool) {
	if !nd.Running() {
		return nd.ExitCode(), false
	}
	if nd.Paused() {
		nd.Resume()
	}
	done := nd.Done()
	if nd.signal(syscall.SIGTERM) != nil {
		<-done
		return nd.ExitCode(), false
	}
	select {
	case <-done:
		return nd.ExitCode(), false
	case <-time.After(grace):
		nd.Kill()
		return nd.ExitCode(), true
	}
}

// Pause stops the process with SIGSTOP; it keeps its sockets but answers nothing.
func (nd *Node) Pause() {
	if nd.signal(syscall.SIGSTOP) == nil {
		nd.mu.Lock()
		nd.paused = true
		nd.mu.Unlock()
	}
}

// Resume continues a paused process with SIGCONT.
func (nd *Node) Resume() {
	nd.signal(syscall.SIGCONT)
	nd.mu.Lock()
	nd.paused = false
	nd.mu.Unlock()
}

// Restart starts the node again with the same arguments and data dir (after
// stopping it with SIGKILL if it is still running) and waits until it answers
// GET /v1/status.
func (nd *Node) Restart(t testing.TB) {
	t.Helper()
	if nd.Running() {
		nd.Kill()
	}
	if err := nd.start(Binary(t)); err != nil {
		t.Fatalf("restart %s: %v", nd.ID, err)
	}
	nd.waitReady(t)
}

// LogTail returns the last n lines of the node's log file.
func (nd *Node) LogTail(n int) string { return tailFile(nd.LogPath, n) }

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
// and extra environment, waits up to timeout for it to exit (then kills it),
// and returns its exit code and output. The process is killed by its PID in
// t.Cleanup if still running.
func RunBinary(t testing.TB, timeout time.Duration, env []string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = nodeEnv(env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = sysProcAttr()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start heureka %s: %v", strings.Join(args, " "), err)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		if !isClosed(done) {
			syscall.Kill(pid, syscall.SIGKILL)
			<-done
		}
	})
	res := Result{}
	select {
	case <-done:
	case <-time.After(timeout):
		res.TimedOut = true
		syscall.Kill(pid, syscall.SIGKILL)
		<-done
	}
	res.Elapsed = time.Since(start)
	res.ExitCode = cmd.ProcessState.ExitCode()
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	return res
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

// ---------------------------------------------------------------------------
// Small helpers

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// tailFile returns the last n lines of the file at path.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	ring := make([]string, 0, n)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if len(ring) == n {
			ring = ring[1:]
		}
		ring = append(ring, sc.Text())
	}
	return strings.Join(ring, "\n")
}
