package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/heureka-registry/heureka/opapi"
)

// Proc is one child process the bench started; it is stopped by its PID.
type Proc struct {
	Name    string
	LogPath string

	bin  string
	args []string

	cmd  *exec.Cmd
	done chan struct{}
}

// startProc runs bin with args, its output appended to logPath.
func startProc(name, bin string, args []string, logPath string) (*Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "==== bench: %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	cmd.Env = childEnv()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, bin: bin, args: args, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// childEnv is the environment without HEUREKA_* and ETCD_* variables, so a
// child's settings are only the flags the bench gives.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HEUREKA_") && !strings.HasPrefix(kv, "ETCD_") {
			env = append(env, kv)
		}
	}
	return env
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process's PID, waits up to grace, then sends
// SIGKILL; it returns once the process has exited.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(p.PID(), syscall.SIGKILL)
		<-p.done
	}
}

// Kill sends SIGKILL to the process's PID and waits until it has exited.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(p.PID(), syscall.SIGKILL)
	<-p.done
}

// again starts a new process with the same name, program, arguments and log.
func (p *Proc) again() (*Proc, error) { return startProc(p.Name, p.bin, p.args, p.LogPath) }

// LogTail returns the last n lines of the process's log.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Local is a set of processes of one system that the bench started on
// 127.0.0.1, with their data under one temporary directory.
type Local struct {
	// URLs are the members' client URLs (http://127.0.0.1:P), in order.
	URLs []string
	// Procs are the processes, parallel to URLs.
	Procs []*Proc
	// Settings describes how they were started, for the table.
	Settings string
	dir      string
}

// PIDs returns the members' process ids, parallel to URLs.
func (l *Local) PIDs() []int {
	pids := make([]int, len(l.Procs))
	for i, p := range l.Procs {
		pids[i] = p.PID()
	}
	return pids
}

// Stop stops every process by its PID (SIGTERM, SIGKILL after 10 s) and
// removes the temporary directory.
func (l *Local) Stop() {
	var wg sync.WaitGroup
	for _, p := range l.Procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(10 * time.Second) }()
	}
	wg.Wait()
	if l.dir != "" {
		_ = os.RemoveAll(l.dir)
	}
}

// KillAndRestart kills every process with SIGKILL, then starts them again
// (same arguments and data) in the given order, and returns the new PIDs.
func (l *Local) KillAndRestart(order []int) ([]int, error) {
	for _, p := range l.Procs {
		p.Kill()
	}
	for _, i := range order {
		np, err := l.Procs[i].again()
		if err != nil {
			return nil, fmt.Errorf("restart %s: %w", l.Procs[i].Name, err)
		}
		l.Procs[i] = np
	}
	return l.PIDs(), nil
}

// failure describes why a local cluster did not come up, with each log's tail.
func (l *Local) failure(err error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%v", err)
	for _, p := range l.Procs {
		fmt.Fprintf(&b, "\n---- %s (%s) ----\n%s", p.Name, p.LogPath, p.LogTail(20))
	}
	return errors.New(b.String())
}

var (
	portMu    sync.Mutex
	usedPorts = map[string]bool{}
)

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago and
// was not handed out before by this process. Ports come from [20000, 32000),
// below Linux's ephemeral range: W9 restarts the nodes on their ports, and
// an ephemeral port may meanwhile be the local end of some connection.
func freeAddr() (string, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		if usedPorts[addr] {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken
		}
		ln.Close()
		usedPorts[addr] = true
		return addr, nil
	}
	return "", errors.New("no free loopback port below the ephemeral range")
}

// HeurekaLocalArgs are the `heureka serve` flags a local bench cluster gets
// besides its addresses: a 5 s delta retention so W4 reads a steady-state
// delta (the bench's 20 changes) rather than W1's burst; self-preservation
// off, because the bench's W1 fleet does not heartbeat between phases (a real
// fleet does, and would not trip it). The response cache and eviction keep
// their defaults: changes are pushed into cached reads, which is what W6 as
// clients see it measures, and the leader evicts each lease at its deadline,
// which is what W8 measures.
var HeurekaLocalArgs = []string{
	"--delta-retention", "5s",
	"--enable-self-preservation=false",
	"--log-level", "warn",
}

// StartHeureka starts an n-node heureka cluster of `bin serve` processes on
// free 127.0.0.1 ports with data under a new directory in tmp, and waits
// until every node names the same leader.
func StartHeureka(ctx context.Context, bin string, n int, tmp string, extra []string) (*Local, error) {
	dir, err := os.MkdirTemp(tmp, "heureka-bench-")
	if err != nil {
		return nil, err
	}
	l := &Local{dir: dir}
	args := append(append([]string(nil), HeurekaLocalArgs...), extra...)
	l.Settings = fmt.Sprintf("%d local nodes, `heureka serve %s`, Raft timings default", n, strings.Join(args, " "))
	type node struct{ id, http, raft string }
	nodes := make([]node, n)
	var members []string
	for i := range nodes {
		h, err := freeAddr()
		if err != nil {
			return nil, err
		}
		r, err := freeAddr()
		if err != nil {
			return nil, err
		}
		nodes[i] = node{fmt.Sprintf("n%d", i+1), h, r}
		members = append(members, fmt.Sprintf("%s=%s@%s", nodes[i].id, r, h))
	}
	initial := strings.Join(members, ",")
	for _, nd := range nodes {
		a := []string{"serve", "--node-id", nd.id, "--http-addr", nd.http, "--raft-addr", nd.raft,
			"--data-dir", filepath.Join(dir, nd.id), "--initial-cluster", initial}
		p, err := startProc(nd.id, bin, append(a, args...), filepath.Join(dir, nd.id+".log"))
		if err != nil {
			l.Stop()
			return nil, err
		}
		l.Procs = append(l.Procs, p)
		l.URLs = append(l.URLs, "http://"+nd.http)
	}
	if err := waitHeurekaLeader(ctx, l, 60*time.Second); err != nil {
		err = l.failure(err)
		l.Stop()
		return nil, err
	}
	return l, nil
}

var statusClient = &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// getHeurekaStatus fetches GET <base>/v1/status.
func getHeurekaStatus(ctx context.Context, base string) (opapi.Status, error) {
	var st opapi.Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := statusClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s/v1/status: %d", base, resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func waitHeurekaLeader(ctx context.Context, l *Local, timeout time.Duration) error {
	return waitFor(ctx, timeout, 100*time.Millisecond, func() (bool, error) {
		leaders, named := 0, map[string]bool{}
		for i, u := range l.URLs {
			if l.Procs[i].Exited() {
				return false, fmt.Errorf("%s exited before the cluster was ready", l.Procs[i].Name)
			}
			st, err := getHeurekaStatus(ctx, u)
			if err != nil {
				return false, err
			}
			if st.State == "Leader" {
				leaders++
			}
			named[st.Leader] = true
		}
		if leaders == 1 && len(named) == 1 && !named[""] {
			return true, nil
		}
		return false, fmt.Errorf("%d leaders, nodes name %d", leaders, len(named))
	})
}

// StartLimit runs `bin limit-server` answering every request with body and
// the given Content-Type and Content-Encoding; URLs[0] is its base URL.
func StartLimit(bin string, body []byte, contentType, encoding, tmp string) (*Local, error) {
	dir, err := os.MkdirTemp(tmp, "heureka-bench-limit-")
	if err != nil {
		return nil, err
	}
	l := &Local{dir: dir, Settings: "heureka limit-server"}
	f := filepath.Join(dir, "body")
	if err := os.WriteFile(f, body, 0o644); err != nil {
		l.Stop()
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		l.Stop()
		return nil, err
	}
	args := []string{"limit-server", "--addr", addr, "--body-file", f, "--content-type", contentType}
	if encoding != "" {
		args = append(args, "--content-encoding", encoding)
	}
	p, err := startProc("limit", bin, args, filepath.Join(dir, "limit.log"))
	if err != nil {
		l.Stop()
		return nil, err
	}
	l.Procs = []*Proc{p}
	l.URLs = []string{"http://" + addr}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return l, nil
		}
		if p.Exited() || time.Now().After(deadline) {
			err = l.failure(fmt.Errorf("limit-server did not listen on %s: %v", addr, err))
			l.Stop()
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RSS returns a process's resident set size from /proc/<pid>/status, or -1.
func RSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return -1
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// cpuSeconds is the user+system CPU time the processes have used, from
// /proc/<pid>/stat (clock ticks of 1/100 s), or -1 when any is unknown.
func cpuSeconds(pids []int) float64 {
	if len(pids) == 0 {
		return -1
	}
	var sum float64
	for _, pid := range pids {
		if pid <= 0 {
			return -1
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return -1
		}
		st := string(b)
		i := strings.LastIndexByte(st, ')')
		if i < 0 || i+2 > len(st) {
			return -1
		}
		// After the command name: state is field 3; utime and stime are
		// fields 14 and 15.
		f := strings.Fields(st[i+2:])
		if len(f) < 13 {
			return -1
		}
		ut, err1 := strconv.ParseFloat(f[11], 64)
		stt, err2 := strconv.ParseFloat(f[12], 64)
		if err1 != nil || err2 != nil {
			return -1
		}
		sum += (ut + stt) / 100
	}
	return sum
}

// cpuMeter adds up the CPU time a set of processes spends in measured
// stretches.
type cpuMeter struct {
	pids    []int
	seconds float64
	ok      bool
}

func newCPUMeter(pids []int) *cpuMeter { return &cpuMeter{pids: pids, ok: cpuSeconds(pids) >= 0} }

// measure runs f and adds the processes' CPU time meanwhile.
func (m *cpuMeter) measure(f func()) {
	before := cpuSeconds(m.pids)
	f()
	after := cpuSeconds(m.pids)
	if before < 0 || after < 0 {
		m.ok = false
		return
	}
	m.seconds += after - before
}

// perOp is the CPU time per operation, or 0 when unknown.
func (m *cpuMeter) perOp(ops int64) time.Duration {
	if !m.ok || ops <= 0 {
		return 0
	}
	return time.Duration(m.seconds / float64(ops) * float64(time.Second))
}
