package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
	"github.com/heureka-registry/heureka/opapi"
)

// startProc runs bin with args, its output appended to logPath, with the
// environment of every bench child: without HEUREKA_* and ETCD_* variables,
// so a child's settings are only the flags the bench gives.
func startProc(name, bin string, args []string, logPath string) (*launch.Proc, error) {
	return launch.StartProc(name, bin, args, launch.Env(nil, "HEUREKA_", "ETCD_"), logPath)
}

// Local is a set of processes of one system that the bench started on
// 127.0.0.1, with their data under one temporary directory.
type Local struct {
	// URLs are the members' client URLs (http://127.0.0.1:P), in order.
	URLs []string
	// Procs are the processes, parallel to URLs.
	Procs []*launch.Proc
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

// Stop stops every process (stopProcs) and removes the temporary
// directory.
func (l *Local) Stop() {
	l.stopProcs()
	if l.dir != "" {
		_ = os.RemoveAll(l.dir)
	}
}

// stopProcs stops every process by its PID (SIGTERM, SIGKILL after 10 s),
// leaving the directory. Stopping a stopped process does nothing.
func (l *Local) stopProcs() {
	var wg sync.WaitGroup
	for _, p := range l.Procs {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(10 * time.Second) }()
	}
	wg.Wait()
}

// KeepLogs stops the processes, so that their logs are complete, and
// copies each log into dir as <cluster directory>-<process>.log (the
// cluster directory's name is unique, so the clusters of one run, or of
// several sizes, do not overwrite each other); it returns the files it
// wrote. Stop still removes the directory.
func (l *Local) KeepLogs(dir string) ([]string, error) {
	l.stopProcs()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("keep logs: %w", err)
	}
	var kept []string
	for _, p := range l.Procs {
		dst := filepath.Join(dir, filepath.Base(l.dir)+"-"+p.Name+".log")
		if err := launch.CopyFile(p.LogPath, dst, 0o644); err != nil {
			return kept, fmt.Errorf("keep the log of %s: %w", p.Name, err)
		}
		kept = append(kept, dst)
	}
	return kept, nil
}

// KillAndRestart kills every process with SIGKILL, then starts them again
// (same arguments and data) in the given order, and returns the new PIDs.
func (l *Local) KillAndRestart(order []int) ([]int, error) {
	for _, p := range l.Procs {
		p.Kill()
	}
	for _, i := range order {
		if err := l.Procs[i].Start(); err != nil {
			return nil, fmt.Errorf("restart %s: %w", l.Procs[i].Name, err)
		}
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
	args := append(append([]string(nil), HeurekaLocalArgs...), extra...)
	l := &Local{dir: dir,
		Settings: fmt.Sprintf("%d local nodes, `heureka serve %s`, Raft timings default", n, strings.Join(args, " "))}
	c, err := launch.Start(launch.Spec{Binary: bin, Dir: dir, Args: args}, n, 60*time.Second)
	for _, nd := range c.Nodes() {
		l.Procs = append(l.Procs, nd.Proc)
		l.URLs = append(l.URLs, nd.BaseURL())
	}
	if err == nil {
		_, err = c.WaitLeader(ctx, 60*time.Second)
	}
	for _, p := range l.Procs {
		if err == nil && !p.Running() {
			err = fmt.Errorf("%s exited before the cluster was ready", p.Name)
		}
	}
	if err != nil {
		err = l.failure(err)
		l.Stop()
		return nil, err
	}
	return l, nil
}

var statusClient = &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// getHeurekaStatus fetches GET <base>/v1/status.
func getHeurekaStatus(ctx context.Context, base string) (opapi.Status, error) {
	st, _, err := launch.FetchStatus(ctx, statusClient, base)
	return st, err
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
	addr, err := launch.FreeAddr()
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
	l.Procs = []*launch.Proc{p}
	l.URLs = []string{"http://" + addr}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return l, nil
		}
		if !p.Running() || time.Now().After(deadline) {
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

// machineTicks reads the first line of /proc/stat: the clock ticks all of
// the machine's CPUs spent busy and in all (idle and waiting for I/O count
// as not busy; guest time is already in user time), and of the busy ones
// those stolen: ticks a virtual CPU wanted to run and the hypervisor ran
// something else.
func machineTicks() (busy, total, stolen float64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, 0, false
	}
	// user nice system idle iowait irq softirq steal
	var v [8]float64
	for i := range v {
		if v[i], err = strconv.ParseFloat(f[i+1], 64); err != nil {
			return 0, 0, 0, false
		}
	}
	for _, x := range v {
		total += x
	}
	return total - v[3] - v[4], total, v[7], true
}

// cpuMeter adds up the CPU time a set of processes spends in measured
// phases, and beside it what the bench's own process (the driver) and
// the whole machine spent: on a machine the driver and the servers share,
// a write phase whose machine was busy throughout is a race for the cores,
// and its rate is the cores over everything a write costs there.
type cpuMeter struct {
	pids    []int
	seconds float64
	ok      bool
	// driver is the bench process's CPU seconds in the phases; busy,
	// total and stolen the machine's clock ticks (all CPUs) busy, in all
	// and stolen by the hypervisor.
	driver, busy, total, stolen float64
	machineOK                   bool
}

// newCPUMeter meters pids; the machine's figures only beside servers on
// this machine (a remote cluster's machine is not the one read here).
func newCPUMeter(pids []int) *cpuMeter {
	ok := cpuSeconds(pids) >= 0
	_, _, _, mok := machineTicks()
	return &cpuMeter{pids: pids, ok: ok, machineOK: ok && mok}
}

// measure runs f and adds the processes' CPU time meanwhile.
func (m *cpuMeter) measure(f func()) {
	self := []int{os.Getpid()}
	before, dBefore := cpuSeconds(m.pids), cpuSeconds(self)
	bBefore, tBefore, sBefore, ok1 := machineTicks()
	f()
	after, dAfter := cpuSeconds(m.pids), cpuSeconds(self)
	bAfter, tAfter, sAfter, ok2 := machineTicks()
	if !ok1 || !ok2 || dBefore < 0 || dAfter < 0 {
		m.machineOK = false
	} else {
		m.driver += dAfter - dBefore
		m.busy += bAfter - bBefore
		m.total += tAfter - tBefore
		m.stolen += sAfter - sBefore
	}
	if before < 0 || after < 0 {
		m.ok = false
		return
	}
	m.seconds += after - before
}

// machine is the driver's CPU time per operation and the fraction of the
// machine's CPU time that was busy in the measured phases; zero when
// unknown.
func (m *cpuMeter) machine(ops int64) (driverPerOp time.Duration, busy float64) {
	if !m.machineOK || ops <= 0 || m.total <= 0 {
		return 0, 0
	}
	return time.Duration(m.driver / float64(ops) * float64(time.Second)), m.busy / m.total
}

// stolenShare is the fraction of the machine's CPU time in the measured
// phases that the hypervisor gave to others while this machine's CPUs
// wanted it (counted in busy): on a shared host, a phase with much of it
// ran on fewer cores than the machine has, and its rate says so, not the
// system's. Zero when unknown or none.
func (m *cpuMeter) stolenShare() float64 {
	if !m.machineOK || m.total <= 0 {
		return 0
	}
	return m.stolen / m.total
}

// perOp is the CPU time per operation, or 0 when unknown.
func (m *cpuMeter) perOp(ops int64) time.Duration {
	if !m.ok || ops <= 0 {
		return 0
	}
	return time.Duration(m.seconds / float64(ops) * float64(time.Second))
}
