package bench

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heureka-registry/heureka/internal/runtime/memlimit"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// HeurekaTarget is a Eureka-compatible endpoint set: heureka, or
// eureka-server itself (anything serving Eureka's REST API under
// /eureka).
type HeurekaTarget struct {
	// URLs are the nodes' base URLs (http://host:port, without /eureka).
	URLs []string
	// PIDs, parallel to URLs, are the nodes' process ids when known (then
	// W7 reads /proc/<pid>/status); 0 or missing when not.
	PIDs []int
	// Settings describes how the nodes run, for the table.
	Settings string
	// DeltaRetention is the target's --delta-retention: W4 starts that long
	// after W1 ends, so the delta holds the bench's steady-state changes
	// rather than W1's burst (0 = read the delta as it is).
	DeltaRetention time.Duration
	// CacheRefresh is how long a change may take to reach the target's
	// cached reads: its --response-cache-update-interval when changes are
	// not pushed (eureka-server, whose default is 30 s, or heureka with
	// --response-cache-push-window 0); 0 for heureka's default push. W4
	// waits 1.5× this after its changes, and W6's client-view row spreads
	// its writes over it so they do not fall in step with the refresh.
	CacheRefresh time.Duration
	// EvictionInterval is the target's --eviction-interval, for W8's note
	// (0 = unknown).
	EvictionInterval time.Duration
	// Restart, when set, kills every node with SIGKILL and starts it again
	// on its data, returning the new PIDs (only for nodes the bench
	// started); the restart row needs it. NoRestart, when set, is why the
	// restart row is not run (else: the nodes are not the bench's).
	Restart   func() ([]int, error)
	NoRestart string
}

type heurekaRun struct {
	s      *Suite
	t      *HeurekaTarget
	sys    *System
	lim    *System
	client *http.Client
	// a is the node W6 writes on; b the follower all reads use.
	a, b  int
	w1End time.Time
	// term is the highest Raft term the nodes reported before W1 (0 when
	// they have no /v1/status).
	term uint64
}

// heurekaSteps prepares the heureka column: one step per workload, in
// order (W1, W2, W3, W4, W5, W3 and W5 under changes, W6, W6 as clients see
// it, W6 to a blocking read, W7, W8), which the
// suite interleaves with etcd's; close releases the client.
func (s *Suite) heurekaSteps(ctx context.Context, t *HeurekaTarget, sys, lim *System) ([]step, func(), error) {
	if len(t.URLs) == 0 {
		sys.NotRun = "no URLs"
		return nil, nil, errors.New("no heureka URLs")
	}
	conc := max(s.Writers, s.Renewers, s.Readers, s.FullReaders, s.CrashInstances)
	r := &heurekaRun{s: s, t: t, sys: sys, lim: lim, client: NewClient(conc)}
	r.roles(ctx)
	s.logf("heureka", "writer A = %s, reader B = %s", t.URLs[r.a], t.URLs[r.b])
	steps := []step{
		func(ctx context.Context) error {
			err := r.register(ctx)
			r.idle(ctx) // in W1's step, so that the columns' steps stay paired
			return err
		},
		func(ctx context.Context) error { r.renew(ctx); return nil },
		func(ctx context.Context) error { r.renewSoak(ctx); return nil },
		func(ctx context.Context) error { r.full(ctx); return nil },
		func(ctx context.Context) error { r.delta(ctx); return nil },
		func(ctx context.Context) error { r.app(ctx); return nil },
		// Under changes after W4, whose delta they would fill.
		func(ctx context.Context) error { r.fullChurn(ctx); return nil },
		func(ctx context.Context) error { r.appChurn(ctx); return nil },
		func(ctx context.Context) error { r.propagation(ctx, RowPropagation); return nil },
		func(ctx context.Context) error { r.propagation(ctx, RowPropClient); return nil },
		func(ctx context.Context) error { r.propagationBlocking(ctx); return nil },
		func(ctx context.Context) error { r.memory(ctx); return nil },
		r.crash,
		func(ctx context.Context) error { r.elections(ctx); return nil },
		r.restart,
	}
	return steps, r.client.CloseIdleConnections, nil
}

// roles picks B, the reader, as the first follower and A, the writer, as
// another follower when there is one. Targets without /v1/status
// (eureka-server) get A = first URL, B = second.
func (r *heurekaRun) roles(ctx context.Context) {
	var followers []int
	for i, u := range r.t.URLs {
		st, err := getHeurekaStatus(ctx, u)
		if err != nil {
			followers = nil
			break
		}
		if st.State != "Leader" {
			followers = append(followers, i)
		}
		r.term = max(r.term, st.Term)
	}
	r.a, r.b = pickRoles(followers, len(r.t.URLs))
}

// pickRoles chooses, among n members, the writer A and the reader B: B is
// the first follower, A another follower, or the member after B when B is
// the only one. Without followers it is A = 0, B = 1 (0 for a single member).
func pickRoles(followers []int, n int) (a, b int) {
	switch {
	case len(followers) >= 2:
		return followers[1], followers[0]
	case len(followers) == 1:
		return (followers[0] + 1) % n, followers[0]
	}
	return 0, min(1, n-1)
}

func (r *heurekaRun) url(node int, path string) string { return r.t.URLs[node] + path }

// send issues one request and reads the whole answer.
func (r *heurekaRun) send(ctx context.Context, method, url string, body []byte, hdr http.Header) (int, []byte, http.Header, error) {
	return launch.Send(ctx, r.client, method, url, body, hdr)
}

func (r *heurekaRun) expect(ctx context.Context, method, url string, body []byte, want int) (int64, error) {
	code, b, _, err := r.send(ctx, method, url, body, nil)
	if err != nil {
		return int64(len(body)), err
	}
	if code != want {
		return int64(len(body)), fmt.Errorf("%s %s: %d %.200s, want %d", method, url, code, b, want)
	}
	return int64(len(body)), nil
}

// W1: every instance registered once, by Writers clients spread over the nodes.
func (r *heurekaRun) register(ctx context.Context) error {
	s, wl, n := r.s, r.s.Workload, len(r.t.URLs)
	bodies := s.registerBodies()
	cpu := newCPUMeter(r.t.PIDs)
	var res Result
	cpu.measure(func() {
		res = s.timed(ctx, "heureka", "W1 register", LoadConfig{Concurrency: s.Writers, Duration: s.RegisterTimeout, MaxRequests: int64(wl.Instances)},
			func(ctx context.Context, w, _ int, seq int64) (int64, error) {
				return r.expect(ctx, http.MethodPost, r.url(w%n, "/eureka/apps/"+wl.App(int(seq))), bodies[seq], http.StatusNoContent)
			})
	})
	r.w1End = time.Now()
	return s.registered(ctx, "heureka", "instances", r.sys, res, cpu, res.Requests-res.Errors, func(ctx context.Context) (int64, error) {
		got, err := r.countOnB(ctx)
		return int64(got), err
	})
}

// Settling before the renewal rows: the nodes count as quiet once they
// used less than quietCPU of CPU a second together over a second, and
// the bench waits for that at most settleMax.
const (
	quietCPU  = 0.2
	settleMax = 90 * time.Second
)

// settle waits until the local nodes are quiet before row's turns, so
// that what W1 left running (a node's snapshot of the registry it just
// took in, a collection) does not share the machine with the limit's
// turn that comes first. At a million instances a snapshot takes a core
// for seconds, and the limit's first W2S turn ran at 12,753 renewals a
// second against 22,913 in its second (BENCHMARKS.md, "A million
// instances on one machine"). Then it waits out the collection a node
// makes once it has been quiet for a while (memlimit.IdleReturnAfter, at
// most a few tens of seconds), taking the largest node's RSS for its live
// heap, which RSS exceeds, and for quiet again: that collection took a
// second or more of each million-instance node's CPU in the middle of
// the limit's W2S turns, before and after, and counted against the limit
// (docs/benchmarks/2026-12-05-heartbeats-found-by-hash.md, "The limit's
// turns and the nodes' idle return"). Nodes the bench did not start are
// not waited for.
func (r *heurekaRun) settle(ctx context.Context, row string) {
	if len(r.t.PIDs) == 0 {
		return
	}
	start := time.Now()
	quiet := r.waitQuiet(ctx, start)
	if quiet {
		var rss int64
		for _, pid := range r.t.PIDs {
			rss = max(rss, RSS(pid))
		}
		sleepCtx(ctx, min(memlimit.IdleReturnAfter(uint64(max(rss, 0))), settleMax-time.Since(start)))
		quiet = r.waitQuiet(ctx, start)
	}
	if !quiet {
		r.s.logf("heureka", "%s: the nodes were not quiet after %s; going on", row, fmtDur(settleMax))
		return
	}
	r.s.logf("heureka", "%s: waited %s for the nodes to be quiet and past their idle return", row, fmtDur(time.Since(start).Round(time.Second)))
}

// waitQuiet samples the local nodes' CPU a second at a time until they
// used less than quietCPU in one, and reports whether they did before
// settleMax from start.
func (r *heurekaRun) waitQuiet(ctx context.Context, start time.Time) bool {
	for ctx.Err() == nil && time.Since(start) < settleMax {
		cpu := newCPUMeter(r.t.PIDs)
		cpu.measure(func() { sleepCtx(ctx, time.Second) })
		if !cpu.ok || cpu.seconds < quietCPU {
			return true // a node gone (not measurable) is not waited for
		}
	}
	return false
}

// DefaultIdleSettle is how long the idle measurement (Suite.Idle) waits
// after W1 unless told: the registrations' snapshots and collections are
// over by then at 10,000 instances.
const DefaultIdleSettle = 15 * time.Second

// idle measures the nodes' CPU at rest after W1 (Suite.Idle) and adds it
// to W1's note, as milliseconds of CPU a second over all the nodes.
func (r *heurekaRun) idle(ctx context.Context) {
	s := r.s
	if s.Idle <= 0 || len(r.t.PIDs) == 0 {
		return
	}
	s.logf("heureka", "idle: waiting %s, then the nodes' CPU over %s", s.IdleSettle, s.Idle)
	sleepCtx(ctx, s.IdleSettle)
	cpu := newCPUMeter(r.t.PIDs)
	start := time.Now()
	cpu.measure(func() { sleepCtx(ctx, s.Idle) })
	took := time.Since(start)
	if !cpu.ok || ctx.Err() != nil {
		return
	}
	note := fmt.Sprintf("at rest %s after it: %.1f ms of CPU a second over the %d nodes (%s)",
		fmtDur(s.IdleSettle), cpu.seconds*1000/took.Seconds(), len(r.t.PIDs), fmtDur(took.Round(time.Second)))
	s.logf("heureka", "idle: %s", note)
	m := r.sys.Rows[RowRegister]
	m.Note = strings.TrimPrefix(m.Note+"; "+note, "; ")
	r.sys.Set(RowRegister, m)
}

// countOnB is how many instances B holds: from /v1/status when it has one,
// else from its full registry.
func (r *heurekaRun) countOnB(ctx context.Context) (int, error) {
	if st, err := getHeurekaStatus(ctx, r.t.URLs[r.b]); err == nil {
		return st.Instances, nil
	}
	code, body, hdr, err := r.send(ctx, http.MethodGet, r.url(r.b, "/eureka/apps"), nil, nil)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("GET /eureka/apps: %d", code)
	}
	ids, err := appsInstances(body, hdr.Get("Content-Encoding") == "gzip")
	return len(ids), err
}

// W2: renewals as fast as Renewers clients, each bound to one node, can go,
// taking turns with the limit answering the same PUTs.
func (r *heurekaRun) renew(ctx context.Context) {
	r.settle(ctx, RowRenew)
	run, cpu := r.renewRun(RowRenew)
	limit, limitCPU, stop := r.renewLimit(RowRenew)
	defer stop()
	lc := LoadConfig{Concurrency: r.s.Renewers, Duration: r.s.Duration, Drain: drain}
	r.sys.Set(RowRenew, measured(r.againstLimit(ctx, RowRenew, lc, run, limit, limitCPU, 0), cpu))
}

// againstLimit runs heureka's load under lc, taking turns with the limit's
// (Suite.alternate) when the limit column runs, whose cell of row it then
// sets (answers of body bytes); it returns heureka's result.
func (r *heurekaRun) againstLimit(ctx context.Context, row string, lc LoadConfig, run, limit loadRun, limitCPU *cpuMeter, body int64) Result {
	if limit == nil {
		return run(ctx, lc)
	}
	res, lres := r.s.alternate(ctx, lc, run, limit)
	lm := measured(lres, limitCPU)
	lm.BodyBytes = body
	r.lim.Set(row, lm)
	return res
}

// measured is the cell of a run whose servers' CPU time cpu metered.
func measured(res Result, cpu *cpuMeter) Measurement {
	m := FromResult(res)
	m.CPUPerOp = cpu.perOp(res.Requests)
	return m
}

// renewPath is operation seq's renewal: of instance seq mod Instances of
// the W1 population.
func (r *heurekaRun) renewPath(seq int64) string {
	wl := r.s.Workload
	k := int(seq % int64(wl.Instances))
	return "/eureka/apps/" + wl.App(k) + "/" + wl.ID(k)
}

// renewReq is a renewal as the bench sends it: a PUT answered 200.
var renewReq = Request{Method: http.MethodPut, WantMin: http.StatusOK, WantMax: http.StatusOK}

// renewRun is a run of renewals of every instance in turn (operation seq
// of all its runs renews instance seq mod Instances), spread over the
// nodes by worker, and the meter of the nodes' CPU time during its runs.
func (r *heurekaRun) renewRun(row string) (loadRun, *cpuMeter) {
	s, n := r.s, len(r.t.URLs)
	cpu := newCPUMeter(r.t.PIDs)
	// Each run goes on in the order where the one before stopped, so that
	// turns of one row renew every instance in turn, not the first ones
	// again in each turn.
	var from int64
	return func(ctx context.Context, lc LoadConfig) (res Result) {
		cpu.measure(func() {
			res = s.timed(ctx, "heureka", row+" renew", lc, func(ctx context.Context, w, _ int, seq int64) (int64, error) {
				return do(ctx, r.client, renewReq, r.url(w%n, r.renewPath(from+seq)))
			})
		})
		from += res.Requests
		return res
	}, cpu
}

// renewLimit is the limit answering the same renewals as heureka does
// (200, no body); nil when the limit column is off.
func (r *heurekaRun) renewLimit(row string) (loadRun, *cpuMeter, func()) {
	return r.s.startLimit(r.lim, row, nil, http.Header{}, renewReq, r.s.Renewers, r.renewPath)
}

// W2S: every instance renewed in turn for RenewSoak, the fleet's steady
// load, while the leader's lease status is polled: the row's note says
// whether the renewals stayed above the self-preservation threshold (the
// bench's nodes run with self-preservation off, so that W8 can evict; the
// threshold is computed all the same), whether anything was evicted and
// how many instances the leader held.
//
// heureka renews in turns of a minute (soakTurns), and the limit answers
// the same PUTs for a tenth of RenewSoak in all, in short turns before,
// between and after heureka's. The machine's speed moves by a third
// within minutes (another tenant's load, the hypervisor's steal): a limit
// measured only before and after five minutes of heureka compared heureka
// with two other machines. A limit turn after one of heureka's starts
// once the nodes are quiet, so that what heureka's turn left running (its
// last batches, a collection) is not counted against the limit; the
// wait is short, and a quiet node's idle return comes later (more than
// 10 s after a million-instance follower goes quiet, and 1 s of waiting
// and a 5 s turn come first). The nodes' CPU during the limit's turns is
// metered and noted in the limit's cell. The pauses take heureka's
// renewals away for as long, which the threshold judgement counts: each
// minute's renewals include one.
func (r *heurekaRun) renewSoak(ctx context.Context) {
	s := r.s
	if s.RenewSoak <= 0 {
		return
	}
	r.settle(ctx, RowRenewSoak)
	run, cpu := r.renewRun(RowRenewSoak)
	limit, limitCPU, stop := r.renewLimit(RowRenewSoak)
	defer stop()
	turns, turn, limitTurn := soakTurns(s.RenewSoak)
	var hres, lres []Result
	var hlat, llat [][]time.Duration
	// nodesBusy meters the nodes during the limit's turns: CPU they spend
	// then is taken from the limit, and the limit's note says how much.
	nodesBusy := newCPUMeter(r.t.PIDs)
	limitPart := func() {
		nodesBusy.measure(func() {
			lres = append(lres, limit(ctx, LoadConfig{Concurrency: s.Renewers, Duration: limitTurn, Drain: drain}))
		})
		llat = append(llat, s.lastLat)
	}
	if limit != nil {
		limitPart()
	}
	watch := r.watchLeases(ctx)
	var note string
	for i := range turns {
		hres = append(hres, run(ctx, LoadConfig{Concurrency: s.Renewers, Duration: turn, Drain: drain}))
		hlat = append(hlat, s.lastLat)
		if i == turns-1 {
			note = watch()
		}
		if limit == nil {
			continue
		}
		if len(r.t.PIDs) > 0 {
			// What the nodes did after the turn is heureka's CPU.
			cpu.measure(func() {
				if !r.waitQuiet(ctx, time.Now()) {
					s.logf("heureka", "%s: the nodes were not quiet after %s; going on", RowRenewSoak, fmtDur(settleMax))
				}
			})
		}
		limitPart()
	}
	m := measured(Merge(hres, hlat), cpu)
	m.Note = note
	if len(lres) > 0 {
		all := Merge(lres, llat)
		lm := measured(all, limitCPU)
		if nodesBusy.ok && all.Elapsed > 0 {
			lm.Note = fmt.Sprintf("the nodes used %.2f s of CPU a second during its turns", nodesBusy.seconds/all.Elapsed.Seconds())
		}
		r.lim.Set(RowRenewSoak, lm)
		m.Note = strings.TrimPrefix(m.Note+"; "+turnRatios(hres, lres), "; ")
	}
	r.sys.Set(RowRenewSoak, m)
}

// soakTurns splits a W2S of d into heureka's turns (one a minute, at most
// five, at least one) and the limit's turns (one before each of heureka's
// and one after the last, a tenth of d in all, at least a second each).
func soakTurns(d time.Duration) (turns int, turn, limitTurn time.Duration) {
	turns = max(1, min(5, int(d/time.Minute)))
	return turns, d / time.Duration(turns), max(d/10/time.Duration(turns+1), time.Second)
}

// turnRatios says how heureka's turns compared with the limit's on either
// side of each, for the W2S note.
func turnRatios(h, l []Result) string {
	if len(l) != len(h)+1 || len(h) < 2 {
		return ""
	}
	lo, hi := math.Inf(1), 0.0
	for i, res := range h {
		around := (l[i].PerSec + l[i+1].PerSec) / 2
		if around <= 0 {
			return ""
		}
		ratio := res.PerSec / around
		lo, hi = min(lo, ratio), max(hi, ratio)
	}
	return fmt.Sprintf("its %d turns ×%.2f–%.2f of the limit's turns either side", len(h), lo, hi)
}

// leaseWatch is what polling the leader's lease status during W2S saw.
type leaseWatch struct {
	polls, failed int
	// judged counts the polls after the first minute; under those whose
	// renewals of the last minute were below the threshold, active those
	// that found self-preservation on.
	judged, under, active int
	lowest, threshold     int64
	evicted               uint64
	leaders               map[string]bool
	fewest, most          int
}

// watchLeases polls B's /v1/status (which carries the leader's lease view)
// every 5 s until the returned function is called, which gives the note.
// The first minute is not judged: the renewals counted then include the
// minute before the soak.
func (r *heurekaRun) watchLeases(ctx context.Context) func() string {
	w := leaseWatch{leaders: map[string]bool{}, fewest: -1, lowest: -1}
	// evicted_total counts from a leader's start: kept per leader.
	first, last := map[string]uint64{}, map[string]uint64{}
	start := time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	poll := func() {
		st, err := getHeurekaStatus(ctx, r.t.URLs[r.b])
		w.polls++
		if err != nil || st.Leases == nil {
			w.failed++
			return
		}
		ls := st.Leases
		w.leaders[ls.From] = true
		if _, ok := first[ls.From]; !ok {
			first[ls.From] = ls.EvictedTotal
		}
		last[ls.From] = ls.EvictedTotal
		if w.fewest < 0 || ls.Instances < w.fewest {
			w.fewest = ls.Instances
		}
		w.most = max(w.most, ls.Instances)
		if time.Since(start) < time.Minute+5*time.Second {
			return
		}
		w.judged++
		if ls.RenewsLastMin < ls.Threshold {
			w.under++
		}
		if ls.SelfPreservationActive {
			w.active++
		}
		if w.lowest < 0 || ls.RenewsLastMin < w.lowest {
			w.lowest, w.threshold = ls.RenewsLastMin, ls.Threshold
		}
	}
	go func() {
		defer close(done)
		poll()
		tick.Every(stop, 5*time.Second, poll)
	}()
	return func() string {
		close(stop)
		<-done
		for id, n := range last {
			w.evicted += n - first[id]
		}
		return w.String(r.s.Workload)
	}
}

// String is the W2S note.
func (w leaseWatch) String(wl Workload) string {
	var parts []string
	switch {
	case w.judged == 0:
		parts = append(parts, "self-preservation not judged (shorter than a minute)")
	case w.under == 0:
		parts = append(parts, fmt.Sprintf("renewals above the self-preservation threshold at all %d polls after the first minute (lowest %s/min against %s)",
			w.judged, group(w.lowest), group(w.threshold)))
	default:
		parts = append(parts, fmt.Sprintf("renewals UNDER the self-preservation threshold at %d of %d polls after the first minute (lowest %s/min against %s)",
			w.under, w.judged, group(w.lowest), group(w.threshold)))
	}
	if w.judged > 0 && w.lowest > 0 {
		// The threshold is inversely proportional to the interval the
		// fleet declares: the lowest minute stays above it for a fleet
		// declaring this many seconds or more.
		carried := float64(wl.RenewalSecs) * float64(w.threshold) / float64(w.lowest)
		parts = append(parts, fmt.Sprintf("the lowest minute would keep a fleet renewing every %.0f s or more above it", math.Ceil(carried)))
	}
	if w.active > 0 {
		parts = append(parts, fmt.Sprintf("self-preservation active at %d polls", w.active))
	}
	parts = append(parts, fmt.Sprintf("%d evicted", w.evicted))
	if w.fewest == w.most {
		parts = append(parts, fmt.Sprintf("the leader held %s instances at every poll", group(int64(w.most))))
	} else {
		parts = append(parts, fmt.Sprintf("the leader held %s–%s instances", group(int64(max(w.fewest, 0))), group(int64(w.most))))
	}
	if len(w.leaders) > 1 {
		parts = append(parts, fmt.Sprintf("%d leaders", len(w.leaders)))
	}
	if w.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d polls unanswered", w.failed, w.polls))
	}
	return strings.Join(parts, "; ") + fmt.Sprintf(" (lease %d s, renewal interval %d s)", wl.LeaseSecs, wl.RenewalSecs)
}

// firstFetchClient makes the reads that precede a timed phase.
var firstFetchClient = &http.Client{Timeout: 10 * time.Minute}

// readHeader is what Eureka clients send: JSON, gzip accepted.
func readHeader() http.Header {
	return http.Header{"Accept": {"application/json"}, "Accept-Encoding": {"gzip"}}
}

// W3: the full registry on follower B, then the limit.
func (r *heurekaRun) full(ctx context.Context) {
	s := r.s
	r.read(ctx, RowFull, "/eureka/apps", LoadConfig{Concurrency: s.FullReaders, Duration: s.Duration, Drain: drain}, nil)
	r.sys.Set(RowFullLinear, NotApplicable("— (no linearizable read: every node serves reads from its own cache)"))
}

// W4: the delta on B once W1's burst has left it and 20 changes were made.
func (r *heurekaRun) delta(ctx context.Context) {
	s, wl := r.s, r.s.Workload
	if wait := time.Until(r.w1End.Add(r.t.DeltaRetention + time.Second)); r.t.DeltaRetention > 0 && wait > 0 {
		s.logf("heureka", "W4: waiting %s for W1's registrations to leave the delta", wait.Round(time.Second))
		sleepCtx(ctx, wait)
	}
	for i := range 20 {
		k := (i * 7919) % wl.Instances
		_, err := r.expect(ctx, http.MethodPut, r.url(r.a, fmt.Sprintf("/eureka/apps/%s/%s/metadata?bench.round=%d", wl.App(k), wl.ID(k), i)), nil, http.StatusOK)
		if err != nil {
			s.logf("heureka", "W4: metadata change failed: %v", err)
		}
	}
	sleepCtx(ctx, r.t.CacheRefresh*3/2)
	r.read(ctx, RowDelta, "/eureka/apps/delta", LoadConfig{Concurrency: s.Readers, Duration: s.Duration, Drain: drain}, nil)
}

// W5: one application at a time on B, over all applications, then the
// limit serving one of them.
func (r *heurekaRun) app(ctx context.Context) {
	s, wl := r.s, r.s.Workload
	// W5 measures warm reads, as clients that fetch their apps regularly
	// see them: every app is fetched once first (its cold build is noted).
	t0 := time.Now()
	err := parallel(ctx, 8, wl.Apps, func(ctx context.Context, a int) error {
		_, _, err := Fetch(r.client, r.url(r.b, "/eureka/apps/"+wl.AppName(a)), readHeader())
		return err
	})
	warm := time.Since(t0)
	s.logf("heureka", "W5: first fetch of all %d apps took %s", wl.Apps, warm.Round(time.Millisecond))
	if err != nil {
		s.logf("heureka", "W5: warm-up: %v", err)
	}
	sleepCtx(ctx, r.t.CacheRefresh)
	r.read(ctx, RowApp, "/eureka/apps/"+wl.AppName(42%wl.Apps), LoadConfig{Concurrency: s.Readers, Duration: s.Duration, Drain: drain},
		func(w, i int) string { return r.url(r.b, "/eureka/apps/"+wl.AppName((i*s.Readers+w)%wl.Apps)) })
	if m, ok := r.sys.Rows[RowApp]; ok && m.NA == "" {
		m.Note = fmt.Sprintf("first fetch of all %d apps %s", wl.Apps, fmtDur(warm))
		r.sys.Set(RowApp, m)
	}
	r.sys.Set(RowAppLinear, NotApplicable("— (as W3)"))
}

// read measures one cached read on B and then the limit serving its bytes.
func (r *heurekaRun) read(ctx context.Context, row, path string, lc LoadConfig, next func(w, i int) string) {
	s := r.s
	hdr := readHeader()
	t0 := time.Now()
	// The first fetch may build the document: give it longer than the
	// timed reads get (a million instances' full registry took more than
	// their 30 s).
	body, respHdr, err := Fetch(firstFetchClient, r.url(r.b, path), hdr)
	first := time.Since(t0)
	if err != nil {
		r.sys.Set(row, NotApplicable("failed: "+err.Error()))
		return
	}
	note := ""
	if row == RowDelta { // the full registry is gigabytes at a million instances: not parsed
		if ids, err := appsInstances(body, respHdr.Get("Content-Encoding") == "gzip"); err == nil {
			note = "holds " + group(int64(len(ids))) + " instances"
		}
	}
	url := r.url(r.b, path)
	req := Request{Method: http.MethodGet, Header: hdr, WantMin: 200, WantMax: 200}
	// Reads are served by B alone: its CPU is the cost.
	var bPIDs []int
	if r.b < len(r.t.PIDs) {
		bPIDs = []int{r.t.PIDs[r.b]}
	}
	cpu := newCPUMeter(bPIDs)
	run := func(ctx context.Context, lc LoadConfig) (res Result) {
		cpu.measure(func() {
			res = s.timed(ctx, "heureka", row+" GET "+path, lc, func(ctx context.Context, w, i int, _ int64) (int64, error) {
				u := url
				if next != nil {
					u = next(w, i)
				}
				return do(ctx, r.client, req, u)
			})
		})
		return res
	}
	limit, limitCPU, stop := s.startLimit(r.lim, row, body, respHdr, req, max(s.Readers, s.FullReaders), func(int64) string { return path })
	defer stop()
	m := measured(r.againstLimit(ctx, row, lc, run, limit, limitCPU, int64(len(body))), cpu)
	m.BodyBytes = int64(len(body))
	switch row {
	case RowDelta:
		m.Note = note
	case RowFull:
		m.Note = "first fetch " + fmtDur(first)
	}
	r.sys.Set(row, m)
}

// W3U and W5U: W3 and W5 again while ChurnPerSec metadata changes per
// second are written on A, so that every node keeps rebuilding the
// documents it serves.
func (r *heurekaRun) fullChurn(ctx context.Context) {
	s := r.s
	r.churn(ctx, RowFullChurn, func(ctx context.Context) {
		r.read(ctx, RowFullChurn, "/eureka/apps", LoadConfig{Concurrency: s.FullReaders, Duration: s.Duration, Drain: drain}, nil)
	})
}

func (r *heurekaRun) appChurn(ctx context.Context) {
	s, wl := r.s, r.s.Workload
	r.churn(ctx, RowAppChurn, func(ctx context.Context) {
		r.read(ctx, RowAppChurn, "/eureka/apps/"+wl.AppName(42%wl.Apps), LoadConfig{Concurrency: s.Readers, Duration: s.Duration, Drain: drain},
			func(w, i int) string { return r.url(r.b, "/eureka/apps/"+wl.AppName((i*s.Readers+w)%wl.Apps)) })
	})
}

// churn runs measure while ChurnPerSec metadata changes per second go to
// A, one instance after another (spread over the applications), and notes
// how many were written on the row.
func (r *heurekaRun) churn(ctx context.Context, row string, measure func(ctx context.Context)) {
	s, wl := r.s, r.s.Workload
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var written, failed atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Each change on its own goroutine (at most 16 in flight), so that a
		// slow write does not lower the rate.
		inFlight := make(chan struct{}, 16)
		t := time.NewTicker(time.Second / ChurnPerSec)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-cctx.Done():
				return
			case <-t.C:
			}
			select {
			case inFlight <- struct{}{}:
			default:
				failed.Add(1) // 16 writes still under way: count it as missed
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-inFlight }()
				k := (i * 7919) % wl.Instances
				_, err := r.expect(cctx, http.MethodPut, r.url(r.a, fmt.Sprintf("/eureka/apps/%s/%s/metadata?bench.churn=%d", wl.App(k), wl.ID(k), i)), nil, http.StatusOK)
				switch {
				case err == nil:
					written.Add(1)
				case cctx.Err() == nil:
					failed.Add(1)
				}
			}()
		}
	}()
	start := time.Now()
	measure(ctx)
	cancel()
	wg.Wait()
	rate := float64(written.Load()) / time.Since(start).Seconds()
	s.logf("heureka", "%s: %d changes written (%.0f/s), %d failed or missed", row, written.Load(), rate, failed.Load())
	if m, ok := r.sys.Rows[row]; ok && m.NA == "" {
		m.Note = fmt.Sprintf("%.0f changes/s written on A", rate)
		r.sys.Set(row, m)
	}
}

// instState is what W6 waits for on B.
type instState int

const (
	statePresent instState = iota // registered, UP
	stateOut                      // status OUT_OF_SERVICE
	stateGone                     // cancelled
)

func stateOf(status string) instState {
	if status == "OUT_OF_SERVICE" {
		return stateOut
	}
	return statePresent
}

// check reads instance id of PropApp on B: directly (GET .../{app}/{id})
// or through the cached application document clients fetch.
func (r *heurekaRun) check(ctx context.Context, direct bool, id string) (instState, error) {
	path, what := "/eureka/apps/"+PropApp, "app"
	if direct {
		path, what = path+"/"+id, "instance"
	}
	code, body, _, err := r.send(ctx, http.MethodGet, r.url(r.b, path), nil, nil)
	if err != nil {
		return 0, err
	}
	switch {
	case code == http.StatusNotFound:
		return stateGone, nil
	case code == http.StatusOK && direct:
		var doc struct {
			Instance struct {
				Status string `json:"status"`
			} `json:"instance"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return 0, err
		}
		return stateOf(doc.Instance.Status), nil
	case code == http.StatusOK:
		ids, err := appInstances(body)
		if err != nil {
			return 0, err
		}
		if st, ok := ids[id]; ok {
			return stateOf(st), nil
		}
		return stateGone, nil
	}
	return 0, fmt.Errorf("GET %s: %d", what, code)
}

// propStep is one write of a W6 cycle and the state B must then show.
type propStep struct {
	method, path string
	body         []byte
	code         int
	want         instState
}

// propSteps are a W6 cycle's writes for worker w's n-th instance of
// PropApp: register, status change, cancel.
func (r *heurekaRun) propSteps(row string, w, n int) (string, []propStep) {
	wl := r.s.Workload
	id := fmt.Sprintf("prop-%s-%d-%d", strings.ToLower(row), w, n)
	sp := Spec{App: PropApp, ID: id, IP: ipOf(1<<23 + w<<12 + n), LeaseSecs: wl.LeaseSecs, RenewalSecs: wl.RenewalSecs,
		Metadata: Metadata(n, 256), DirtyMillis: time.Now().UnixMilli()}
	app := "/eureka/apps/" + PropApp
	return id, []propStep{
		{http.MethodPost, app, RegisterBody(sp), http.StatusNoContent, statePresent},
		{http.MethodPut, app + "/" + id + "/status?value=OUT_OF_SERVICE", nil, http.StatusOK, stateOut},
		{http.MethodDelete, app + "/" + id, nil, http.StatusOK, stateGone},
	}
}

// W6: register, status change and cancel on A, each timed from A's answer
// until B's reads show it: a direct instance read (RowPropagation) or the
// cached application document clients fetch (RowPropClient).
func (r *heurekaRun) propagation(ctx context.Context, row string) {
	s := r.s
	direct := row == RowPropagation
	label, poll, timeout := row+" propagation (direct read)", time.Millisecond, 10*time.Second
	if !direct {
		// Polled less often, and long enough for a Eureka-default 30 s cache.
		label, poll, timeout = row+" propagation (app document)", 5*time.Millisecond, 40*time.Second
	}
	left := newPropLeft()
	cycle := func(ctx context.Context, w, n int, record func(time.Duration, bool)) error {
		id, steps := r.propSteps(row, w, n)
		for i, st := range steps {
			if !direct {
				sleepCtx(ctx, jitter(r.t.CacheRefresh))
			}
			if err := left.write(ctx, r, id, steps, i); err != nil {
				return err
			}
			ack := time.Now()
			err := waitFor(ctx, timeout, poll, func() (bool, error) {
				got, err := r.check(ctx, direct, id)
				return err == nil && got == st.want, err
			})
			if ctx.Err() != nil {
				return nil
			}
			record(time.Since(ack), err == nil)
		}
		return nil
	}
	workers, period := s.PropWorkers, time.Duration(0)
	if !direct {
		// Each sample waits out part of a refresh; more writers keep the
		// sample count up.
		workers, period = 4*s.PropWorkers, r.t.CacheRefresh
	}
	m := s.sample(ctx, "heureka", label, workers, period, cycle)
	r.cancelLeft(ctx, left)
	if !direct && r.t.CacheRefresh > 0 {
		m.Note = "cache refresh " + fmtDur(r.t.CacheRefresh)
	}
	r.sys.Set(row, m)
}

// propLeft is the instances a W6 row registered and has not cancelled: a
// row ends by cutting its writers' cycles off, and what they left would
// stay in the application the next W6 row follows, making its documents
// larger than the workload says (up to 24 more instances by W6B).
type propLeft struct {
	mu  sync.Mutex
	ids map[string]bool
}

func newPropLeft() *propLeft { return &propLeft{ids: map[string]bool{}} }

// write sends step i of id's cycle to A: id is open from its first step
// until its cancel, the last, is acknowledged.
func (l *propLeft) write(ctx context.Context, r *heurekaRun, id string, steps []propStep, i int) error {
	if i == 0 {
		l.mu.Lock()
		l.ids[id] = true
		l.mu.Unlock()
	}
	st := steps[i]
	if _, err := r.expect(ctx, st.method, r.url(r.a, st.path), st.body, st.code); err != nil {
		return err
	}
	if i == len(steps)-1 {
		l.mu.Lock()
		delete(l.ids, id)
		l.mu.Unlock()
	}
	return nil
}

// cancelLeft cancels on A the instances a W6 row left (a cut-off write may
// have been applied or not: 404 is as good as 200), and waits, 5 s at most
// in all, until B's direct reads show them gone, so that the next row
// starts on the application as the workload describes it.
func (r *heurekaRun) cancelLeft(ctx context.Context, l *propLeft) {
	l.mu.Lock()
	ids := slices.Sorted(maps.Keys(l.ids))
	l.mu.Unlock()
	var sent []string
	for _, id := range ids {
		code, _, _, err := r.send(ctx, http.MethodDelete, r.url(r.a, "/eureka/apps/"+PropApp+"/"+id), nil, nil)
		if err != nil || (code != http.StatusOK && code != http.StatusNotFound) {
			r.s.logf("heureka", "W6: could not cancel %s, left by a cut-off sample: %d %v", id, code, err)
			continue
		}
		sent = append(sent, id)
	}
	_ = waitFor(ctx, 5*time.Second, time.Millisecond, func() (bool, error) {
		for len(sent) > 0 {
			if st, err := r.check(ctx, true, sent[0]); err != nil || st != stateGone {
				return false, nil
			}
			sent = sent[1:]
		}
		return true, nil
	})
}

// W6B: register, status change and cancel on A, each timed from A's answer
// until a blocking read of the application document on B returns a
// document that shows it: what a sidecar or gateway using blocking reads
// sees. One loop on B follows the document (GET /eureka/apps/{app}?index=N,
// N from the previous answer) for all writers, as etcd's row holds one
// watch for all of them: a read that returns with another writer's change
// is followed at once by the next, which answers at once when more has
// changed meanwhile.
func (r *heurekaRun) propagationBlocking(ctx context.Context) {
	s := r.s
	const timeout = 10 * time.Second
	appPath := "/eureka/apps/" + PropApp
	// read reads the application document on B with its version (0 while
	// it is missing: a blocking read with index 0 waits for it to appear),
	// stamped with when it arrived.
	read := func(ctx context.Context, query string) (appAnswer, uint64, error) {
		code, body, hdr, err := r.send(ctx, http.MethodGet, r.url(r.b, appPath+query), nil, nil)
		if err != nil {
			return appAnswer{}, 0, err
		}
		at := time.Now()
		if code != http.StatusOK && code != http.StatusNotFound {
			return appAnswer{}, 0, fmt.Errorf("GET %s%s: %d", appPath, query, code)
		}
		var idx uint64
		_, _ = fmt.Sscan(hdr.Get("X-Heureka-Index"), &idx)
		return appAnswer{code: code, body: body, at: at}, idx, nil
	}
	docs := newTimedLog[map[string]string]()
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	_, idx, err := read(fctx, "")
	if err != nil {
		r.sys.Set(RowPropBlock, Measurement{Errors: 1, FirstError: err.Error()})
		return
	}
	// The loop asks again as soon as an answer arrives and leaves the
	// parsing to another goroutine, in order: a watch's stream too delivers
	// the next event while the client handles the last, and its row times
	// an event from its arrival. The documents are larger than a watch's
	// events, and decoding one (hundreds of microseconds for a few dozen
	// instances) is the bench's cost, not the server's.
	answers := make(chan appAnswer, 1024)
	followed := make(chan error, 2)
	go func() {
		defer close(answers)
		for fctx.Err() == nil {
			a, next, err := read(fctx, fmt.Sprintf("?index=%d&wait=%ds", idx, int(timeout.Seconds())))
			if err != nil {
				followed <- err
				return
			}
			answers <- a
			idx = next
		}
		followed <- nil
	}()
	parsed := make(chan error, 1)
	go func() {
		var failed error
		for a := range answers {
			ids, err := a.instances()
			if err != nil {
				failed = cmp.Or(failed, err)
				continue
			}
			docs.add(ids, a.at)
		}
		parsed <- failed
	}()
	left := newPropLeft()
	cycle := func(ctx context.Context, w, n int, record func(time.Duration, bool)) error {
		id, steps := r.propSteps(RowPropBlock, w, n)
		for i, st := range steps {
			from := docs.len()
			if err := left.write(ctx, r, id, steps, i); err != nil {
				return err
			}
			ack := time.Now()
			at, ok := docs.wait(ctx, from, timeout, func(ids map[string]string) bool {
				status, present := ids[id]
				return (st.want == stateGone && !present) || (present && stateOf(status) == st.want)
			})
			if ctx.Err() != nil {
				return nil
			}
			record(max(at.Sub(ack), 0), ok)
		}
		return nil
	}
	m := s.sample(ctx, "heureka", RowPropBlock+" propagation (blocking read)", s.PropWorkers, 0, cycle)
	stop()
	r.cancelLeft(ctx, left)
	if err = <-followed; ctx.Err() != nil || errors.Is(err, context.Canceled) {
		err = nil
	}
	if err = cmp.Or(err, <-parsed); err != nil {
		m.Errors++
		if m.FirstError == "" {
			m.FirstError = "following the document on B: " + err.Error()
		}
	}
	r.sys.Set(RowPropBlock, m)
}

// appAnswer is one answer to a read of an application document, and
// when it arrived.
type appAnswer struct {
	code int
	body []byte
	at   time.Time
}

// instances maps the answer's instance ids to their status (none for a
// 404: the application is gone).
func (a appAnswer) instances() (map[string]string, error) {
	if a.code == http.StatusNotFound {
		return map[string]string{}, nil
	}
	return appInstances(a.body)
}

// timedLog is what a following loop received (a watch's events, the
// documents of a blocking-read loop), each with when it arrived, for the
// writers waiting to see their change.
type timedLog[T any] struct {
	mu      sync.Mutex
	items   []timedItem[T]
	changed chan struct{}
}

type timedItem[T any] struct {
	v  T
	at time.Time
}

func newTimedLog[T any]() *timedLog[T] { return &timedLog[T]{changed: make(chan struct{})} }

func (l *timedLog[T]) add(v T, at time.Time) {
	l.mu.Lock()
	l.items = append(l.items, timedItem[T]{v, at})
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

func (l *timedLog[T]) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.items)
}

// wait returns when the first item from the from-th on that match accepts
// arrived; false when ctx ends or timeout passes first.
func (l *timedLog[T]) wait(ctx context.Context, from int, timeout time.Duration, match func(T) bool) (time.Time, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		for ; from < len(l.items); from++ {
			if it := l.items[from]; match(it.v) {
				l.mu.Unlock()
				return it.at, true
			}
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, false
		case <-deadline.C:
			return time.Time{}, false
		}
	}
}

// elections records a change of Raft term since W1 began: a leader
// election happened during the run, and writes around it may have failed.
func (r *heurekaRun) elections(ctx context.Context) {
	if r.term == 0 {
		return
	}
	var term uint64
	for _, u := range r.t.URLs {
		if st, err := getHeurekaStatus(ctx, u); err == nil {
			term = max(term, st.Term)
		}
	}
	r.s.termChange("heureka", &r.sys.Events, r.term, term)
}

// W7: each node's resident memory (from /proc when the PID is known, else
// the Go runtime's sys_bytes from /v1/status).
func (r *heurekaRun) memory(ctx context.Context) {
	m := r.s.memory("heureka", "n", r.t.PIDs, len(r.t.URLs), func(i int) (int64, string, bool) {
		st, err := getHeurekaStatus(ctx, r.t.URLs[i])
		return int64(st.Memory.SysBytes), "Go sys_bytes from /v1/status", err == nil && st.Memory.SysBytes > 0
	})
	r.sys.Set(RowMemory, m)
}

// W8: CrashInstances instances with a short lease renew for three rounds,
// then stop; each is timed from its last acknowledged renewal until B's
// application document no longer lists it.
func (r *heurekaRun) crash(ctx context.Context) error {
	s, n := r.s, len(r.t.URLs)
	k := s.CrashInstances
	ids := make([]string, k)
	for i := range ids {
		ids[i] = fmt.Sprintf("crash-%d", i)
	}
	now := time.Now().UnixMilli()
	s.logf("heureka", "W8: registering %d instances with a %d s lease", k, s.CrashLeaseSecs)
	err := parallel(ctx, min(k, 32), k, func(ctx context.Context, i int) error {
		sp := Spec{App: CrashApp, ID: ids[i], IP: ipOf(1<<22 + i), LeaseSecs: s.CrashLeaseSecs, RenewalSecs: 1,
			Metadata: Metadata(i, s.Workload.MetadataBytes), DirtyMillis: now}
		_, err := r.expect(ctx, http.MethodPost, r.url(i%n, "/eureka/apps/"+CrashApp), RegisterBody(sp), http.StatusNoContent)
		return err
	})
	if err != nil {
		r.sys.Set(RowCrash, NotApplicable("failed: "+err.Error()))
		return fmt.Errorf("W8 register: %w", err)
	}
	m := s.crashDetection(ctx, "heureka", "renewal", ids, func(ctx context.Context, i int) error {
		_, err := r.expect(ctx, http.MethodPut, r.url(i%n, "/eureka/apps/"+CrashApp+"/"+ids[i]), nil, http.StatusOK)
		return err
	}, func(ctx context.Context) (map[string]bool, error) {
		code, body, _, err := r.send(ctx, http.MethodGet, r.url(r.b, "/eureka/apps/"+CrashApp), nil, nil)
		switch {
		case err != nil:
			return nil, err
		case code == http.StatusNotFound:
			return map[string]bool{}, nil
		case code != http.StatusOK:
			return nil, fmt.Errorf("GET the crash application: status %d", code)
		}
		instances, err := appInstances(body)
		if err != nil {
			return nil, err
		}
		present := map[string]bool{}
		for id := range instances {
			present[id] = true
		}
		return present, nil
	})
	m.Note = fmt.Sprintf("lease %d s", s.CrashLeaseSecs)
	if r.t.EvictionInterval > 0 {
		m.Note += ", --eviction-interval " + fmtDur(r.t.EvictionInterval)
	}
	if r.t.CacheRefresh > 0 {
		m.Note += ", cache refresh " + fmtDur(r.t.CacheRefresh)
	}
	r.sys.Set(RowCrash, m)
	s.logf("heureka", "W8 crash detection: %s", FormatCell(KindLatency, m))
	return nil
}

// sample runs W6 cycles on workers goroutines until Samples delays were
// recorded or the row's time bound (propBound(period)) passes.
func (s *Suite) sample(ctx context.Context, system, label string, workers int, period time.Duration,
	cycle func(ctx context.Context, w, n int, record func(time.Duration, bool)) error) Measurement {
	bound := s.propBound(period)
	s.logf(system, "%s: %d writers, up to %d samples or %s", label, workers, s.Samples, bound)
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var mu sync.Mutex
	var samples []time.Duration
	var timeouts, errs int64
	var firstErr string
	record := func(d time.Duration, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		if !ok {
			timeouts++
			return
		}
		samples = append(samples, d)
		if len(samples) >= s.Samples {
			cancel()
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				if err := cycle(ctx, w, n, record); err != nil && ctx.Err() == nil {
					mu.Lock()
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
					mu.Unlock()
					sleepCtx(ctx, 100*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	m := FromSamples(samples, timeouts)
	m.Errors, m.FirstError = errs, firstErr
	s.logf(system, "%s: %s", label, FormatCell(KindLatency, m))
	if firstErr != "" {
		s.logf(system, "%s: first error: %s", label, firstErr)
	}
	return m
}

// jitter is a random delay in [0, d).
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d)))
}

// parallel calls f(i) for i in [0, n) on workers goroutines and returns
// the first error.
func parallel(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// waitFor polls cond every interval until it holds (nil), timeout passes
// or ctx ends (an error naming the last failure).
func waitFor(ctx context.Context, timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("not within %s (last error: %v)", timeout, last)
			}
			return fmt.Errorf("not within %s", timeout)
		}
		sleepCtx(ctx, interval)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// oneOrMany splits a JSON value that Eureka's codecs write either as one
// object or as an array of them.
func oneOrMany(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return nil
	}
	if raw[0] != '[' {
		return []json.RawMessage{raw}
	}
	var list []json.RawMessage
	_ = json.Unmarshal(raw, &list)
	return list
}

type wireInstance struct {
	InstanceID string `json:"instanceId"`
	HostName   string `json:"hostName"`
	Status     string `json:"status"`
}

func (w wireInstance) id() string {
	if w.InstanceID != "" {
		return w.InstanceID
	}
	return w.HostName
}

// wireApp is one application of a JSON document, its instances left raw.
type wireApp struct {
	Instance json.RawMessage `json:"instance"`
}

// instances decodes the application's instances (one object or an array).
func (a wireApp) instances() ([]wireInstance, error) {
	var out []wireInstance
	for _, raw := range oneOrMany(a.Instance) {
		var in wireInstance
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// appInstances maps instance id → status in a JSON {"application": ...}
// document.
func appInstances(body []byte) (map[string]string, error) {
	var doc struct {
		Application wireApp `json:"application"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	ins, err := doc.Application.instances()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ins))
	for _, in := range ins {
		out[in.id()] = in.Status
	}
	return out, nil
}

// appsInstances lists the instance ids in a JSON {"applications": ...}
// document (full registry or delta), gunzipping it first if gz.
func appsInstances(body []byte, gz bool) ([]string, error) {
	if gz {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if body, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	var doc struct {
		Applications struct {
			Application json.RawMessage `json:"application"`
		} `json:"applications"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	var ids []string
	for _, raw := range oneOrMany(doc.Applications.Application) {
		var app wireApp
		if err := json.Unmarshal(raw, &app); err != nil {
			return nil, err
		}
		ins, err := app.instances()
		if err != nil {
			return nil, err
		}
		for _, in := range ins {
			ids = append(ids, in.id())
		}
	}
	return ids, nil
}
