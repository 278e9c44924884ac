package bench

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

// Suite is one `heureka bench` run: the workload, its bounds, and the
// systems to drive. Zero values take the defaults documented in
// docs/bench.md, "The workload".
type Suite struct {
	Workload Workload
	// Writers register in W1; Renewers renew in W2; FullReaders fetch the
	// full registry in W3; Readers fetch deltas and apps in W4 and W5.
	Writers, Renewers, FullReaders, Readers int
	// Duration bounds each timed phase (W2–W5, and each limit run).
	Duration time.Duration
	// RenewSoak, when positive, adds W2S: Renewers clients renew every
	// instance in turn for this long, while the leader's lease status is
	// polled for evictions and self-preservation; the limit answers the
	// same PUTs for a tenth of it, in turns around heureka's (soakTurns).
	RenewSoak time.Duration
	// Idle, when positive, measures a local heureka cluster at rest
	// after W1: IdleSettle after the registrations (default
	// DefaultIdleSettle), the CPU time of its nodes over Idle, given in
	// W1's note.
	Idle, IdleSettle time.Duration
	// RegisterTimeout bounds W1 (which ends when every instance is
	// registered); zero is 5 minutes, or 2 s for each 1,000 instances
	// when that is longer (a million on a slow machine takes more than
	// the 5 minutes meant for 10,000).
	RegisterTimeout time.Duration
	// Samples bounds each W6 row; PropWorkers take them concurrently; each
	// W6 row also ends after 3 × Duration (at least 5 s; the client-view row
	// at least 3 cache refreshes, with 4 × PropWorkers writers).
	Samples, PropWorkers int
	// CrashInstances stop renewing in W8; their lease is CrashLeaseSecs;
	// W8 gives up after CrashTimeout.
	CrashInstances int
	CrashLeaseSecs int
	CrashTimeout   time.Duration

	// Binary is the heureka executable used for local clusters and limit
	// servers; empty means neither can run.
	Binary string
	// NodeBinary, when set, is the executable of the local clusters'
	// nodes instead of Binary: an older build, to compare two binaries
	// with one driver.
	NodeBinary string
	// TempDir holds local clusters' data ("" = os.TempDir()).
	TempDir string
	// KeepLogs, when set, is a directory the local clusters' logs are
	// copied into as they stop (Local.KeepLogs): their data directories
	// go, and with them what a node said during a row that came out
	// strange.
	KeepLogs string
	// Progress receives one line per step while the suite runs (nil = quiet).
	Progress io.Writer

	// Heureka is an existing Eureka-compatible cluster to drive; LocalHeureka,
	// if positive, starts that many nodes instead, with LocalHeurekaArgs
	// added to HeurekaLocalArgs.
	Heureka          *HeurekaTarget
	LocalHeureka     int
	LocalHeurekaArgs []string
	// Etcd is an existing etcd cluster; LocalEtcd, if positive, starts that
	// many members of EtcdBinary ("etcd" on PATH when empty).
	Etcd       *EtcdTarget
	LocalEtcd  int
	EtcdBinary string
	// NoLimit skips the limit column.
	NoLimit bool
	// LocalEurekaServer, if positive, starts that many peers of Spring
	// Cloud's eureka-server (EurekaServerJar, run by Java: "java" on PATH
	// when empty) for an eureka-server column; EurekaServerNoReadOnly turns
	// its readOnly response cache off.
	LocalEurekaServer      int
	EurekaServerJar        string
	Java                   string
	EurekaServerNoReadOnly bool
	// Budgets bounds, by column name, the time that column's workload steps
	// may take in all (its cluster's start is not counted). A step still
	// running when its column's bound runs out is cancelled, and the rows the
	// column has not measured by then say so; other columns go on.
	Budgets map[string]time.Duration

	mu      sync.Mutex
	bodies  [][]byte        // W1 register bodies, generated once
	lastLat []time.Duration // latencies of the last timed run (steps run one at a time)
}

// Defaults fills zero fields with the documented defaults.
func (s *Suite) Defaults() {
	d := DefaultWorkload()
	if s.Workload.Instances == 0 {
		s.Workload.Instances = d.Instances
	}
	if s.Workload.Apps == 0 {
		s.Workload.Apps = min(d.Apps, s.Workload.Instances)
	}
	if s.Workload.MetadataBytes == 0 {
		s.Workload.MetadataBytes = d.MetadataBytes
	}
	if s.Workload.LeaseSecs == 0 {
		s.Workload.LeaseSecs = d.LeaseSecs
	}
	if s.Workload.RenewalSecs == 0 {
		s.Workload.RenewalSecs = d.RenewalSecs
	}
	setInt := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setInt(&s.Writers, 64)
	setInt(&s.Renewers, 64)
	setInt(&s.FullReaders, 8)
	setInt(&s.Readers, 32)
	setInt(&s.Samples, 300)
	setInt(&s.PropWorkers, 4)
	setInt(&s.CrashInstances, 100)
	setInt(&s.CrashLeaseSecs, 2)
	if s.IdleSettle <= 0 {
		s.IdleSettle = DefaultIdleSettle
	}
	if s.Duration <= 0 {
		s.Duration = 5 * time.Second
	}
	if s.RegisterTimeout <= 0 {
		s.RegisterTimeout = max(5*time.Minute, time.Duration(s.Workload.Instances/1000)*2*time.Second)
	}
	if s.CrashTimeout <= 0 {
		s.CrashTimeout = 60 * time.Second
	}
}

// Params is the suite's settings as the report records them.
func (s *Suite) Params() Params {
	return Params{Instances: s.Workload.Instances, Apps: s.Workload.Apps, MetadataBytes: s.Workload.MetadataBytes,
		Writers: s.Writers, Renewers: s.Renewers, FullReaders: s.FullReaders, Readers: s.Readers,
		Duration: s.Duration, Samples: s.Samples, CrashInstances: s.CrashInstances, CrashLeaseSecs: s.CrashLeaseSecs,
		RenewSoak: max(s.RenewSoak, 0)}
}

// step is one workload of one column.
type step func(ctx context.Context) error

// drain is how long a timed phase lets operations started before its end
// finish (see LoadConfig.Drain): full-registry ranges of etcd at 50,000
// instances take seconds each.
const drain = time.Minute

// column is one system prepared to run: its steps and how to release it.
type column struct {
	name  string
	steps []step
	close func()
	// budget, when positive, bounds the time its steps take in all; spent
	// is the time they took so far.
	budget, spent time.Duration
}

// run runs step i under the column's budget and reports whether the
// budget ran out during it.
func (c *column) run(ctx context.Context, i int) (out bool, err error) {
	if c.budget <= 0 {
		return false, c.steps[i](ctx)
	}
	sctx, cancel := context.WithTimeout(ctx, c.budget-c.spent)
	defer cancel()
	t0 := time.Now()
	err = c.steps[i](sctx)
	c.spent += time.Since(t0)
	return c.spent >= c.budget && ctx.Err() == nil, err
}

// BudgetNote is what a row says that a column did not measure because the
// column's time bound (Suite.Budgets) ran out.
func BudgetNote(bound time.Duration) string {
	return "not measured: the column's steps were bounded at " + fmtElapsed(bound) + " in all, and the bound ran out"
}

// markBudgetSpent marks, in a column whose time bound ran out, every row
// it did not measure, and the ones the bound cut short.
func markBudgetSpent(sys *System, bound time.Duration) {
	for _, row := range Rows {
		m, ok := sys.Rows[row.ID]
		if !ok || strings.Contains(m.NA, context.DeadlineExceeded.Error()) || strings.Contains(m.FirstError, context.DeadlineExceeded.Error()) {
			sys.Set(row.ID, NotApplicable(BudgetNote(bound)))
		}
	}
	sys.Events = append(sys.Events, "its steps were bounded at "+fmtElapsed(bound)+" in all, and the bound ran out")
}

// newColumn is a column of prepared steps whose close runs closeFn and then
// stop (ending what the column started); when preparing the steps failed,
// stop runs at once and err is returned.
func newColumn(name string, steps []step, closeFn func(), err error, stop func()) (*column, error) {
	if err != nil {
		stop()
		return nil, err
	}
	return &column{name: name, steps: steps, close: func() { closeFn(); stop() }}, nil
}

// settingsOr is a target's settings, or for a target given only its
// endpoints, those.
func settingsOr(settings string, endpoints []string) string {
	if settings == "" {
		return "existing endpoints " + strings.Join(endpoints, ", ")
	}
	return settings
}

// Run starts the configured systems (local clusters first, so that both are
// up before anything is measured), then runs the workload interleaved, one
// workload at a time on each system in turn (W1 on heureka, W1 on etcd, W2
// on heureka, ...), the limit right after heureka's reads, so that a
// fluctuating load on a shared machine falls on both columns alike. It
// stops every process it started and returns the report. The error joins
// whatever went wrong; the report is complete either way, with the failed
// cells marked.
func (s *Suite) Run(ctx context.Context) (*Report, error) {
	s.Defaults()
	if err := s.Workload.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Format: reportFormat, Started: time.Now(), Machine: machineInfo(), Params: s.Params()}
	h := &System{Name: ColumnHeureka}
	e := &System{Name: ColumnEtcd}
	lim := &System{Name: ColumnLimit, Settings: "`heureka limit-server`, one process per read row, serving the bytes heureka served, to the same clients, alternating with heureka in halves of the phase"}
	rep.Systems = []*System{h, e, lim}
	var errs []error

	t0 := time.Now()
	s.logf("bench", "generating %s instances (%d apps, ~%d B metadata)", group(int64(s.Workload.Instances)), s.Workload.Apps, s.Workload.MetadataBytes)
	s.registerBodies()
	s.logf("bench", "generated in %s", time.Since(t0).Round(time.Millisecond))

	if s.NoLimit {
		lim.NotRun = "--no-limit"
	} else if s.Binary == "" {
		lim.NotRun = "no heureka executable to run limit-server"
	}
	var cols []*column
	if c, err := s.heurekaColumn(ctx, h, lim); err != nil {
		errs = append(errs, fmt.Errorf("heureka: %w", err))
	} else if c != nil {
		cols = append(cols, c)
	}
	if s.LocalEurekaServer > 0 {
		es := &System{Name: ColumnEurekaServer}
		rep.Systems = append(rep.Systems, es)
		if c, err := s.eurekaServerColumn(ctx, es); err != nil {
			errs = append(errs, fmt.Errorf("eureka-server: %w", err))
		} else if c != nil {
			cols = append(cols, c)
		}
	}
	if c, err := s.etcdColumn(ctx, e); err != nil {
		errs = append(errs, fmt.Errorf("etcd: %w", err))
	} else if c != nil {
		cols = append(cols, c)
	}
	for _, c := range cols {
		c.budget = s.Budgets[c.name]
	}
	spent := map[string]bool{}
	for i := 0; ctx.Err() == nil; i++ {
		ran := false
		for _, c := range cols {
			if i < len(c.steps) && !spent[c.name] {
				ran = true
				out, err := c.run(ctx, i)
				if err != nil && !out {
					errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
				}
				if out {
					spent[c.name] = true
					s.logf(c.name, "bounded at %s: the bound ran out, skipping its remaining steps", fmtElapsed(c.budget))
				}
			}
		}
		if !ran {
			break
		}
	}
	for _, sys := range rep.Systems {
		if spent[sys.Name] {
			markBudgetSpent(sys, s.Budgets[sys.Name])
		}
	}
	for _, c := range cols {
		c.close()
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	if lim.NotRun == "" && len(lim.Rows) == 0 {
		lim.NotRun = "heureka not run, so no bytes to serve"
	}
	rep.Elapsed = time.Since(rep.Started)
	rep.Machine.LoadAvgEnd = loadAvg()
	return rep, errors.Join(errs...)
}

// started logs the addresses and PIDs of a local cluster a column just
// started (its members called members, the whole called group) and returns
// the column's stop, which logs the PIDs it stops.
func (s *Suite) started(system, members, group string, l *Local) (stop func()) {
	s.logf(system, "%s %v, pids %v", members, l.URLs, l.PIDs())
	return func() {
		s.logf(system, "stopping the local %s (pids %v)", group, l.PIDs())
		if s.KeepLogs != "" {
			if kept, err := l.KeepLogs(s.KeepLogs); err != nil {
				s.logf(system, "keeping the logs: %v", err)
			} else {
				s.logf(system, "logs kept: %s", strings.Join(kept, ", "))
			}
		}
		l.Stop()
	}
}

// heurekaColumn starts the local heureka cluster if asked for, and prepares
// its steps; nil when there is no heureka target.
func (s *Suite) heurekaColumn(ctx context.Context, h, lim *System) (*column, error) {
	t := s.Heureka
	stop := func() {}
	switch {
	case s.LocalHeureka > 0:
		if s.Binary == "" {
			h.NotRun = "no heureka executable for --local"
			return nil, errors.New(h.NotRun)
		}
		s.logf("heureka", "starting a local %d-node cluster", s.LocalHeureka)
		l, err := StartHeureka(ctx, cmp.Or(s.NodeBinary, s.Binary), s.LocalHeureka, s.TempDir, s.LocalHeurekaArgs)
		if err != nil {
			h.NotRun = "local cluster did not start"
			return nil, err
		}
		stop = s.started("heureka", "nodes", "cluster", l)
		t = &HeurekaTarget{URLs: l.URLs, PIDs: l.PIDs(), Settings: l.Settings,
			DeltaRetention: 5 * time.Second, EvictionInterval: 60 * time.Second,
			Restart: func() ([]int, error) { return l.KillAndRestart(rand.Perm(len(l.Procs))) }}
	case t == nil:
		h.NotRun = "no target (give --local N or --targets)"
		return nil, nil
	}
	h.Settings = settingsOr(t.Settings, t.URLs)
	steps, closeFn, err := s.heurekaSteps(ctx, t, h, lim)
	return newColumn(ColumnHeureka, steps, closeFn, err, stop)
}

// etcdColumn starts the local etcd cluster if asked for (or marks the
// column "not run" when etcd is not installed), and prepares its steps.
func (s *Suite) etcdColumn(ctx context.Context, e *System) (*column, error) {
	t := s.Etcd
	stop := func() {}
	switch {
	case s.LocalEtcd > 0:
		bin := cmp.Or(s.EtcdBinary, "etcd")
		path, err := exec.LookPath(bin)
		if err != nil {
			e.NotRun = "etcd not installed"
			s.logf("etcd", "not run: %s not found", bin)
			return nil, nil
		}
		e.Version = etcdVersion(path)
		s.logf("etcd", "starting a local %d-member cluster (etcd %s)", s.LocalEtcd, e.Version)
		l, err := StartEtcd(ctx, path, s.LocalEtcd, s.TempDir)
		if err != nil {
			e.NotRun = "local cluster did not start"
			return nil, err
		}
		stop = s.started("etcd", "members", "cluster", l)
		t = &EtcdTarget{Endpoints: l.URLs, PIDs: l.PIDs(), Settings: l.Settings}
	case t == nil:
		e.NotRun = notRunDisabled + " (give --etcd local or --etcd-endpoints)"
		return nil, nil
	}
	e.Settings = settingsOr(t.Settings, t.Endpoints)
	steps, closeFn, err := s.etcdSteps(ctx, t, e)
	return newColumn(ColumnEtcd, steps, closeFn, err, stop)
}

// registerBodies generates W1's register bodies once, so that building
// them costs no time inside the measured phase.
func (s *Suite) registerBodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bodies == nil {
		now := time.Now().UnixMilli()
		s.bodies = make([][]byte, s.Workload.Instances)
		for i := range s.bodies {
			sp := s.Workload.Spec(i)
			sp.DirtyMillis = now
			s.bodies[i] = RegisterBody(sp)
		}
	}
	return s.bodies
}

// logf writes one progress line.
func (s *Suite) logf(system, format string, args ...any) {
	if s.Progress == nil {
		return
	}
	line := fmt.Sprintf("%s [%s] %s\n", time.Now().Format("15:04:05"), system, fmt.Sprintf(format, args...))
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.WriteString(s.Progress, line)
}

// timed runs op under lc, printing progress every 2 s and a summary.
func (s *Suite) timed(ctx context.Context, system, label string, lc LoadConfig, op Op) Result {
	s.logf(system, "%s: %d clients, up to %s%s", label, lc.Concurrency, lc.Duration, maxNote(lc.MaxRequests))
	var done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t0 := time.Now()
		tick.Every(stop, 2*time.Second, func() {
			n := done.Load()
			s.logf(system, "%s: %s done (%s)", label, group(n), fmtRate(float64(n)/time.Since(t0).Seconds()))
		})
	}()
	res, lat := runFunc(ctx, lc, func(ctx context.Context, w, i int, seq int64) (int64, error) {
		n, err := op(ctx, w, i, seq)
		done.Add(1)
		return n, err
	})
	close(stop)
	wg.Wait()
	s.logf(system, "%s: %s", label, res)
	if res.Errors > 0 {
		s.logf(system, "%s: first error: %s", label, res.FirstError)
	}
	s.lastLat = lat
	return res
}

// loadRun is one run of a load against a system.
type loadRun = func(ctx context.Context, lc LoadConfig) Result

// alternate runs a and b in turns, each for half of lc.Duration twice
// (a, b, a, b), so that a change in the machine's load falls on both alike,
// and returns each one's merged result.
func (s *Suite) alternate(ctx context.Context, lc LoadConfig, a, b loadRun) (Result, Result) {
	half := lc
	half.Duration = max(lc.Duration/2, time.Millisecond)
	var ra, rb []Result
	var la, lb [][]time.Duration
	for range 2 {
		ra = append(ra, a(ctx, half))
		la = append(la, s.lastLat)
		rb = append(rb, b(ctx, half))
		lb = append(lb, s.lastLat)
	}
	return Merge(ra, la), Merge(rb, lb)
}

func maxNote(n int64) string {
	if n > 0 {
		return " or " + group(n) + " operations"
	}
	return ""
}

// propBound is how long a W6 row may take: 3 × Duration, at least 5 s and
// at least three periods of the delay the row waits out.
func (s *Suite) propBound(period time.Duration) time.Duration {
	return max(3*s.Duration, 5*time.Second, 3*period)
}

// startLimit starts a limit server answering every request with body and
// hdr's Content-Type and Content-Encoding, and returns a run of req's load
// against it (at the path next gives each operation), the meter of the
// limit process's CPU time during those runs, and a stop function; nil when
// the limit column is off or failed (then the cell says why).
func (s *Suite) startLimit(lim *System, row string, body []byte, hdr http.Header, req Request, conc int, next func(seq int64) string) (loadRun, *cpuMeter, func()) {
	if lim.NotRun != "" {
		return nil, nil, func() {}
	}
	ct := hdr.Get("Content-Type")
	if ct == "" {
		ct = "application/json"
	}
	l, err := StartLimit(s.Binary, body, ct, hdr.Get("Content-Encoding"), s.TempDir)
	if err != nil {
		lim.Set(row, NotApplicable("limit-server failed: "+firstLine(err.Error())))
		return nil, nil, func() {}
	}
	cpu := newCPUMeter(l.PIDs())
	client := NewClient(conc)
	base := l.URLs[0]
	run := func(ctx context.Context, lc LoadConfig) (res Result) {
		cpu.measure(func() {
			res = s.timed(ctx, ColumnLimit, row+" limit", lc, func(ctx context.Context, _, _ int, seq int64) (int64, error) {
				return do(ctx, client, req, base+next(seq))
			})
		})
		return res
	}
	return run, cpu, func() { client.CloseIdleConnections(); l.Stop() }
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// machineInfo describes this machine from /proc.
func machineInfo() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvgStart: loadAvg()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				var kb int64
				fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
				m.Memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				break
			}
		}
		f.Close()
	}
	return m
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
