// Randomized fault schedules against the read and write guarantees.
//
//	go test ./cluster -run 'TestSchedule$'                  # the short run (part of make test)
//	go test ./cluster -run 'TestSchedule$' -seed 7 -v       # replay one schedule, with its step log
//	go test -tags chaos ./cluster -run 'TestSchedule$' -schedules 2000 -timeout 0 -v   # the long run
//
// HEUREKA_SCHEDULES=N stands for -schedules N; -bound sets the read rule's
// one second. The long run draws its seeds from the clock and prints them
// (-seedbase fixes the first); each schedule is a subtest named by its seed,
// and a failing one prints the command that replays it.
//
// A schedule is drawn from its seed alone: writes of every kind (register,
// renew, status override set and deleted, cancel, metadata), a fifth of
// them on instances never registered (404 expected); pauses, partitions,
// heals, restarts, leader kills, full disks (Raft log and journal), a
// removal and mode switches (AP/CP) in between; reads of the full registry
// on every node after every step. It runs on the in-process cluster
// (memcluster_test.go) through the real HTTP layer (httpapi), so that what
// counts as a stale read is httpapi's own decision (X-Heureka-Stale);
// httpapi imports package cluster, hence this package cluster_test
// (export_sched_test.go opens the cluster to it). Each step's target node
// is chosen at run time among the nodes the step applies to (the leader to
// kill is the one that leads then), so a seed replays the same steps, not
// the same timing.
//
// The checks (each violation names its class):
//   - overlay: a node's AP fallback overlay exists exactly while its
//     journal holds entries (sampled every few milliseconds, under the
//     fallback's lock);
//   - stale-read: an unmarked 200 holds every write acknowledged (answered
//     2xx) more than -bound before the read began; a write a node
//     acknowledged into its AP fallback journal counts from when that
//     journal was seen empty again (replayed);
//   - phantom: no read, marked or not, shows a state that no subset of the
//     writes issued so far gives, nor an instance never registered;
//   - ghost-ack: a write on an instance never registered is never acknowledged;
//   - lost: after healing everything and waiting for a leader and every
//     journal's replay, every member shows the state of every
//     acknowledged write applied in order (writes whose outcome is unknown,
//     5xx or timed out, may or may not have applied), and a removed node
//     holds no acknowledged writes in a journal; diverged: the members
//     show the same;
//   - settle: that wait ends within 15 s;
//   - hung: every request answers within 3 s past its deadline.
//
// The model applies writes per instance in the order they were issued
// (writes are issued one at a time). That is the order Raft commits them
// in, except across an AP partition: a node's journal is replayed after
// whatever the majority committed meanwhile. So once an instance was
// written on a node outside the majority (or a write of it was journaled,
// or its outcome is unknown and it may still commit), its writes go to
// that node only, until a settle step has every journal replayed. A
// cancel, status or metadata change journaled on such a node loses, by
// design, to a registration made elsewhere after it (fallback.go,
// conditional), timed in milliseconds: where the registration's time may
// be no earlier than the change's (the same millisecond, or a registration
// itself replayed later), the model lets the change apply or not.
package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/httpapi"
)

var (
	schedCount = flag.Int("schedules", 0, "how many fault schedules TestSchedule runs (0: $HEUREKA_SCHEDULES, else the build's default)")
	schedSeed  = flag.Uint64("seed", 0, "run only the fault schedule of this seed")
	schedBase  = flag.Uint64("seedbase", 0, "the first seed of the run (0: 1, or the clock under -tags chaos)")
	schedBound = flag.Duration("bound", time.Second, "an unmarked read must hold every write acknowledged this long before it began")
)

// The short run is shortSeeds: two schedules of about two seconds each
// that drive a node in AP fallback into every refusal (404 and more), and
// so catch an overlay left with an empty journal. schedule_chaos_test.go
// sets the long run; -schedules N runs seeds from -seedbase on instead.
var (
	shortSeeds       = []uint64{34, 47}
	defaultSchedules = 0
	clockSeeds       = false
)

func TestSchedule(t *testing.T) {
	var seeds []uint64
	switch {
	case *schedSeed != 0:
		seeds = []uint64{*schedSeed}
	default:
		n := defaultSchedules
		if v, err := strconv.Atoi(os.Getenv("HEUREKA_SCHEDULES")); err == nil && v > 0 {
			n = v
		}
		if *schedCount > 0 {
			n = *schedCount
		}
		if n == 0 {
			seeds = shortSeeds
			break
		}
		base := *schedBase
		if base == 0 {
			base = 1
			if clockSeeds {
				base = uint64(time.Now().UnixNano()%1e9) * 1000
			}
		}
		t.Logf("%d schedules, seeds %d to %d", n, base, base+uint64(n)-1)
		for i := range n {
			seeds = append(seeds, base+uint64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSchedule(t, seed, *schedBound) })
	}
}

// The schedule.

type opKind uint8

const (
	opWrite opKind = iota
	opSleep
	opIsolate  // cut a node off from the others
	opPause    // cut a node off and send it no client requests
	opHeal     // link a cut-off or paused node again
	opHealAll  // link every node again
	opRestart  // stop a node and start it again
	opKill     // stop the leader
	opStart    // start a stopped node
	opDiskFull // fill a node's disk (Raft log and journal)
	opDiskFree
	opRemove // take a follower out of the cluster (once)
	opMode   // switch the cluster between AP and CP
	opSettle // heal everything, wait for every journal's replay
)

var opNames = [...]string{"write", "sleep", "isolate", "pause", "heal", "heal-all", "restart", "kill-leader",
	"start", "disk-full", "disk-free", "remove", "mode", "settle"}

type writeKind uint8

const (
	wRegister writeKind = iota
	wCancel
	wStatus    // PUT .../status?value=S
	wDelStatus // DELETE .../status[?value=S]
	wMetadata  // PUT .../metadata?k=v
	wRenew
)

var writeNames = [...]string{"register", "cancel", "status", "delete-status", "metadata", "renew"}

type step struct {
	op   opKind
	pick int // chooses the target among the candidates at run time
	// write
	inst      int // instance index; numInstances and up are never registered
	write     writeKind
	value     string // status value, metadata key
	preferCut bool   // on a cut-off node when there is one
	// isolate, pause: count quorum as lost at once
	lose bool
	// remove: connected (told), or cut off first
	tell bool
	// sleep: d, or long thousandths of the read rule's bound
	d    time.Duration
	long int
}

const (
	numInstances = 4
	numGhosts    = 2
	app          = "SCHED"
)

func instID(k int) string {
	if k >= numInstances {
		return fmt.Sprintf("ghost-%d", k-numInstances)
	}
	return fmt.Sprintf("i-%d", k)
}

// genSchedule draws the initial mode and the steps from seed alone.
func genSchedule(seed uint64) (string, []step) {
	rng := rand.New(rand.NewPCG(seed, 0x5c4ed01e))
	mode := cluster.ModeAP
	if rng.IntN(5) == 0 {
		mode = cluster.ModeCP
	}
	steps := make([]step, 30+rng.IntN(31))
	for i := range steps {
		s := step{pick: rng.IntN(1 << 20)}
		switch p := rng.IntN(100); {
		case p < 55:
			s.op = opWrite
			s.preferCut = rng.IntN(5) < 2
			if rng.IntN(5) == 0 {
				s.inst = numInstances + rng.IntN(numGhosts)
				s.write = []writeKind{wCancel, wStatus, wDelStatus, wMetadata, wRenew}[rng.IntN(5)]
			} else {
				s.inst = rng.IntN(numInstances)
				switch w := rng.IntN(100); {
				case w < 30:
					s.write = wRegister
				case w < 40:
					s.write = wCancel
				case w < 55:
					s.write = wStatus
				case w < 63:
					s.write = wDelStatus
				case w < 85:
					s.write = wMetadata
				default:
					s.write = wRenew
				}
			}
			switch s.write {
			case wStatus:
				s.value = []string{"UP", "DOWN", "OUT_OF_SERVICE"}[rng.IntN(3)]
			case wDelStatus:
				s.value = []string{"UP", ""}[rng.IntN(2)]
			case wMetadata:
				s.value = []string{"a", "b", "c"}[rng.IntN(3)]
			}
		case p < 65:
			// A quarter of the sleeps outlast the read rule's bound, so that
			// a node cut off meanwhile falls behind by more than that.
			s.op, s.d = opSleep, time.Duration(20+rng.IntN(380))*time.Millisecond
			if rng.IntN(4) == 0 {
				s.long = 1000 + rng.IntN(1500)
			}
		case p < 73:
			s.op, s.lose = opIsolate, rng.IntN(4) > 0
		case p < 76:
			s.op, s.lose = opPause, rng.IntN(2) > 0
		case p < 84:
			s.op = opHeal
		case p < 86:
			s.op = opHealAll
		case p < 88:
			s.op = opRestart
		case p < 90:
			s.op = opKill
		case p < 92:
			s.op = opStart
		case p < 94:
			s.op = opDiskFull
		case p < 95:
			s.op = opDiskFree
		case p < 96:
			s.op, s.tell = opRemove, rng.IntN(2) == 0
		case p < 98:
			s.op = opMode
		default:
			s.op = opSettle
		}
		steps[i] = s
	}
	return mode, steps
}

func (s step) String() string {
	switch s.op {
	case opWrite:
		v := ""
		if s.value != "" {
			v = " " + s.value
		}
		return fmt.Sprintf("%s %s%s", writeNames[s.write], instID(s.inst), v)
	case opSleep:
		if s.long > 0 {
			return fmt.Sprintf("sleep %.3f × bound", float64(s.long)/1000)
		}
		return fmt.Sprintf("sleep %v", s.d)
	case opIsolate, opPause:
		return fmt.Sprintf("%s (quorum lost at once: %v)", opNames[s.op], s.lose)
	case opRemove:
		return fmt.Sprintf("remove (told: %v)", s.tell)
	}
	return opNames[s.op]
}

// The model.

type outcome uint8

const (
	outAck     outcome = iota // 2xx
	outRefused                // 404 or 400: not applied
	outUnknown                // 5xx or no answer: applied or not, maybe later
)

// write is one write the schedule issued on a real instance.
type write struct {
	seq        int
	kind       writeKind
	value      string
	node       string
	start, end time.Time
	out        outcome
	code       int
	// journal is the node index whose AP fallback journal took the write,
	// -1 if none; eff is when the write was in the Raft log for sure (the
	// answer, or the journal seen empty since), zero while unknown.
	journal int
	eff     time.Time
	// optional: acknowledged, but may be dropped by design (a journaled
	// change that loses to a registration its node did not see).
	optional bool
}

// inst is an instance's state as reads show it.
type inst struct {
	present  bool
	status   string
	override string // "" when none (overriddenStatus UNKNOWN)
	md       map[string]string
}

func (s inst) key() string {
	if !s.present {
		return "absent"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "status=%s override=%s md={", s.status, s.override)
	for i, k := range slices.Sorted(maps.Keys(s.md)) {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%s", k, s.md[k])
	}
	b.WriteByte('}')
	return b.String()
}

// apply is the registry's rule for w (fsm/registry.go) on the few fields
// the schedule's writes set.
func (s inst) apply(w *write) inst {
	switch w.kind {
	case wRegister:
		n := inst{present: true, status: "UP", md: map[string]string{"gen": strconv.Itoa(w.seq)}}
		if s.present {
			n.override = s.override
			switch {
			case s.override != "":
				n.status = s.override
			case s.status == "UP" || s.status == "OUT_OF_SERVICE":
				n.status = s.status
			}
		}
		return n
	case wCancel:
		return inst{}
	case wStatus:
		if s.present && s.status != w.value {
			s.status, s.override = w.value, w.value
		}
	case wDelStatus:
		if s.present && s.override != "" {
			s.override, s.status = "", w.value
			if s.status == "" {
				s.status = "UNKNOWN"
			}
		}
	case wMetadata:
		if s.present {
			md := maps.Clone(s.md)
			md[w.value] = strconv.Itoa(w.seq)
			s.md = md
		}
	}
	return s
}

// maxStates bounds the states a check follows; past it the check is skipped.
const maxStates = 4096

// states returns the states of an instance that its writes give, applied
// in order: each write for which include says so, when must says so
// certainly, else applied or not. ok is false past maxStates.
func states(ws []*write, include func(*write) (in, must bool)) (map[string]bool, bool) {
	cur := map[string]inst{"absent": {}}
	for _, w := range ws {
		in, must := include(w)
		if !in {
			continue
		}
		next := make(map[string]inst, 2*len(cur))
		for k, s := range cur {
			if !must {
				next[k] = s
			}
			n := s.apply(w)
			next[n.key()] = n
		}
		if len(next) > maxStates {
			return nil, false
		}
		cur = next
	}
	out := make(map[string]bool, len(cur))
	for k := range cur {
		out[k] = true
	}
	return out, true
}

// The run.

type nodeState struct {
	id                               string
	node                             *cluster.Node
	srv                              *httpapi.Server
	down, cut, paused, removed, full bool
	overlayBad                       bool      // the overlay invariant fails (counted once until it holds again)
	linked                           time.Time // when last healed or started
}

type runner struct {
	t     *testing.T
	seed  uint64
	bound time.Duration
	mc    *cluster.MemCluster
	begin time.Time
	ldt   int64 // lastDirtyTimestamp of the schedule's first write, less one

	mu      sync.Mutex // guards what the sampler reads: nodes, insts, problems
	nodes   []*nodeState
	insts   [numInstances][]*write
	pending []*write // journaled, eff unknown
	seq     int
	pins    [numInstances]int // node a pinned instance's writes go to, -1 if none
	settled time.Time         // the last settle (the start counts)
	mode    string
	removal bool // the schedule's removal was tried
	// problems: the first few of each class in full, and a count.
	problems []string
	count    map[string]int
	trace    []string
}

func runSchedule(t *testing.T, seed uint64, bound time.Duration) {
	mode, steps := genSchedule(seed)
	r := &runner{t: t, seed: seed, bound: bound, count: map[string]int{}, mode: cluster.ModeAP}
	r.mc = cluster.StartMemCluster(t, 3, cluster.ModeAP)
	r.begin, r.settled = time.Now(), time.Now()
	r.ldt = time.Now().UnixMilli()
	for k := range r.pins {
		r.pins[k] = -1
	}
	for i := range r.mc.Size() {
		r.nodes = append(r.nodes, &nodeState{id: r.mc.ID(i)})
		r.serve(i)
	}
	t.Cleanup(func() {
		for _, ns := range r.nodes {
			if ns.srv != nil {
				ns.srv.Close()
			}
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(3 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				r.sample()
			}
		}
	})
	r.logf("seed %d: mode %s, %d steps, bound %v", seed, mode, len(steps), bound)
	if mode == cluster.ModeCP {
		r.setMode(0, cluster.ModeCP)
	}
	for i, s := range steps {
		r.logf("step %d: %s", i+1, s)
		r.run(s)
		r.sample()
		r.readAll()
	}
	r.logf("final settle")
	if r.settle() {
		r.sample()
		r.final()
	}
	close(stop)
	wg.Wait()
	r.report()
}

func (r *runner) logf(format string, args ...any) {
	line := fmt.Sprintf("%7.3fs ", time.Since(r.begin).Seconds()) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.trace = append(r.trace, line)
	r.mu.Unlock()
}

// problem records a violation; r.mu must be held.
func (r *runner) problem(class, format string, args ...any) {
	r.count[class]++
	if r.count[class] <= 3 {
		msg := fmt.Sprintf("%7.3fs %s: ", time.Since(r.begin).Seconds(), class) + fmt.Sprintf(format, args...)
		r.problems = append(r.problems, msg)
		r.trace = append(r.trace, "  VIOLATION "+msg)
	}
}

func (r *runner) report() {
	if len(r.count) == 0 {
		return
	}
	var classes []string
	for _, c := range slices.Sorted(maps.Keys(r.count)) {
		classes = append(classes, fmt.Sprintf("%s×%d", c, r.count[c]))
	}
	bound := ""
	if r.bound != time.Second {
		bound = " -bound " + r.bound.String()
	}
	r.t.Errorf("seed %d: violations %s\n%s\nreplay: go test ./cluster -run 'TestSchedule$' -seed %d%s -v\nschedule:\n%s",
		r.seed, strings.Join(classes, " "), strings.Join(r.problems, "\n"), r.seed, bound, strings.Join(r.trace, "\n"))
}

// sample checks the overlay invariant on every node running and notes
// journaled writes whose journal has been replayed.
func (r *runner) sample() {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for i, ns := range r.nodes {
		if ns.down {
			continue
		}
		overlay, entries := cluster.OverlayState(ns.node)
		if bad := overlay != (entries > 0); bad && !ns.overlayBad {
			r.problem("overlay", "%s: overlay %v with %d journal entries (quorum lost %v, mode %s)",
				ns.id, overlay, entries, ns.node.QuorumLost(), ns.node.Mode())
			ns.overlayBad = true
		} else if !bad {
			ns.overlayBad = false
		}
		if entries == 0 {
			r.pending = slices.DeleteFunc(r.pending, func(w *write) bool {
				if w.journal == i {
					w.eff = now
					return true
				}
				return false
			})
		}
	}
}

// serve starts node i's HTTP layer; r.mu must not be held.
func (r *runner) serve(i int) {
	n := r.mc.Node(i)
	srv, err := httpapi.New(httpapi.DefaultConfig(), n, nil)
	if err != nil {
		r.t.Fatalf("http layer of %s: %v", r.nodes[i].id, err)
	}
	r.mu.Lock()
	r.nodes[i].node, r.nodes[i].srv, r.nodes[i].down, r.nodes[i].linked = n, srv, false, time.Now()
	r.mu.Unlock()
}

// hangAfter is how long past its deadline a request may go unanswered
// before it counts as hung (the cluster's ApplyTimeout is 2 s).
const hangAfter = 3 * time.Second

// do sends one request to node i's HTTP layer; code 0 means no answer.
func (r *runner) do(i int, method, target, body string, timeout time.Duration) (int, http.Header, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, method, target, strings.NewReader(body))
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	h := r.nodes[i].srv.Handler()
	go func() {
		defer close(done)
		h.ServeHTTP(rec, req)
	}()
	select {
	case <-done:
		return rec.Code, rec.Result().Header, rec.Body.Bytes()
	case <-time.After(timeout + hangAfter):
		r.mu.Lock()
		r.problem("hung", "%s: %s %s unanswered %v after its deadline (full disks: %v; goroutines: %s)", r.nodes[i].id, method, target,
			hangAfter, r.fullDisks(), dumpGoroutines())
		r.mu.Unlock()
		return 0, nil, nil
	}
}

// dumpGoroutines writes every goroutine's stack to a temporary file, for
// a hang to be read after the run, and returns its name.
func dumpGoroutines() string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	f, err := os.CreateTemp("", "schedule-hung-*.txt")
	if err != nil {
		return "not written: " + err.Error()
	}
	defer f.Close()
	if _, err := f.Write(buf); err != nil {
		return "not written: " + err.Error()
	}
	return f.Name()
}

func (r *runner) members() []int {
	var out []int
	for i, ns := range r.nodes {
		if !ns.removed {
			out = append(out, i)
		}
	}
	return out
}

// inMajority reports whether node i is on the side of a partition that
// holds a quorum of the members, as the schedule made it.
func (r *runner) inMajority(i int) bool {
	linked := func(ns *nodeState) bool { return !ns.removed && !ns.down && !ns.cut && !ns.paused }
	if !linked(r.nodes[i]) {
		return false
	}
	n := 0
	for _, j := range r.members() {
		if linked(r.nodes[j]) {
			n++
		}
	}
	return n >= len(r.members())/2+1
}

// candidates lists the nodes for which ok holds.
func (r *runner) candidates(ok func(*nodeState) bool) []int {
	var out []int
	for i, ns := range r.nodes {
		if ok(ns) {
			out = append(out, i)
		}
	}
	return out
}

func (r *runner) leader() int {
	for i, ns := range r.nodes {
		if !ns.down && !ns.removed && ns.node.IsLeader() {
			return i
		}
	}
	return -1
}

func waitUntil(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(2 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func (r *runner) run(s step) {
	up := func(ns *nodeState) bool { return !ns.down }
	pick := func(c []int) int {
		if len(c) == 0 {
			r.logf("  no node to apply it to")
			return -1
		}
		return c[s.pick%len(c)]
	}
	switch s.op {
	case opWrite:
		r.write(s)
	case opSleep:
		if s.long > 0 {
			time.Sleep(r.bound * time.Duration(s.long) / 1000)
		} else {
			time.Sleep(s.d)
		}
	case opIsolate, opPause:
		i := pick(r.candidates(func(ns *nodeState) bool { return !ns.down && !ns.cut && !ns.paused }))
		if i < 0 {
			return
		}
		r.mc.Cut(i)
		r.mu.Lock()
		r.nodes[i].cut, r.nodes[i].paused = true, s.op == opPause
		r.mu.Unlock()
		lost := false
		if s.lose {
			waitUntil(time.Second, func() bool { return !r.nodes[i].node.HasQuorum() })
			lost = r.mc.AgeQuorum(i)
		}
		r.logf("  %s cut off (quorum lost: %v)", r.nodes[i].id, lost)
	case opHeal:
		i := pick(r.candidates(func(ns *nodeState) bool { return ns.cut || ns.paused }))
		if i >= 0 {
			r.heal(i)
		}
	case opHealAll:
		for _, i := range r.candidates(func(ns *nodeState) bool { return ns.cut || ns.paused }) {
			r.heal(i)
		}
	case opRestart:
		if i := pick(r.candidates(up)); i >= 0 {
			r.stop(i)
			r.start(i)
		}
	case opKill:
		if i := r.leader(); i >= 0 {
			r.stop(i)
		} else {
			r.logf("  no leader")
		}
	case opStart:
		if i := pick(r.candidates(func(ns *nodeState) bool { return ns.down })); i >= 0 {
			r.start(i)
		}
	case opDiskFull, opDiskFree:
		full := s.op == opDiskFull
		if i := pick(r.candidates(func(ns *nodeState) bool { return ns.full != full })); i >= 0 {
			r.mc.SetDiskFull(i, full)
			r.nodes[i].full = full
			r.logf("  %s disk full: %v", r.nodes[i].id, full)
		}
	case opRemove:
		r.remove(s)
	case opMode:
		mode := cluster.ModeCP
		if r.mode == cluster.ModeCP {
			mode = cluster.ModeAP
		}
		if i := pick(r.candidates(func(ns *nodeState) bool { return !ns.down && !ns.paused && !ns.removed })); i >= 0 {
			r.setMode(i, mode)
		}
	case opSettle:
		r.settle()
	}
}

// within runs fn with a deadline of timeout; past the deadline and
// hangAfter more, it counts fn as hung and returns without it.
func (r *runner) within(what string, timeout time.Duration, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- fn(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout + hangAfter):
		r.mu.Lock()
		r.problem("hung", "%s unanswered %v after its deadline (full disks: %v; goroutines: %s)", what, hangAfter, r.fullDisks(), dumpGoroutines())
		r.mu.Unlock()
		return errors.New("hung")
	}
}

// fullDisks lists the nodes whose disk is full.
func (r *runner) fullDisks() []string {
	var out []string
	for _, ns := range r.nodes {
		if ns.full {
			out = append(out, ns.id)
		}
	}
	return out
}

func (r *runner) setMode(i int, mode string) {
	n := r.nodes[i].node
	err := r.within("set mode "+mode+" via "+r.nodes[i].id, time.Second, func(ctx context.Context) error { return n.SetMode(ctx, mode) })
	if err == nil {
		r.mode = mode
	}
	r.logf("  mode %s via %s: %v", mode, r.nodes[i].id, err)
}

// heal links node i again; unless paused, it waits (briefly) until the
// node hears from a leader, then reads it at once: right after a heal is
// when a node that fell behind must not answer unmarked from its old state.
func (r *runner) heal(i int) {
	ns := r.nodes[i]
	paused := ns.paused
	r.mc.Heal(i)
	r.mu.Lock()
	ns.cut, ns.paused, ns.linked = false, false, time.Now()
	r.mu.Unlock()
	r.logf("  %s healed", ns.id)
	if ns.down {
		return
	}
	if !paused && r.inMajority(i) {
		waitUntil(500*time.Millisecond, ns.node.HasQuorum)
	}
	for range 3 {
		r.read(i)
		time.Sleep(3 * time.Millisecond)
	}
}

func (r *runner) stop(i int) {
	ns := r.nodes[i]
	r.mu.Lock()
	ns.down = true
	srv := ns.srv
	ns.srv = nil
	r.mu.Unlock()
	srv.Close()
	r.mc.Stop(i)
	r.logf("  %s stopped", ns.id)
}

func (r *runner) start(i int) {
	if err := r.mc.Start(i); err != nil {
		r.mu.Lock()
		r.problem("harness", "start %s: %v", r.nodes[i].id, err)
		r.mu.Unlock()
		return
	}
	r.serve(i)
	r.logf("  %s started", r.nodes[i].id)
}

func (r *runner) remove(s step) {
	if r.removal || len(r.members()) < 3 {
		r.logf("  skipped")
		return
	}
	l := r.leader()
	if l < 0 {
		r.logf("  no leader")
		return
	}
	i := -1
	if c := r.candidates(func(ns *nodeState) bool { return !ns.down && !ns.removed && ns != r.nodes[l] }); len(c) > 0 {
		i = c[s.pick%len(c)]
	}
	if i < 0 {
		r.logf("  no follower running")
		return
	}
	r.removal = true
	ns := r.nodes[i]
	if !s.tell && !ns.cut {
		r.mc.Cut(i)
		r.mu.Lock()
		ns.cut = true
		r.mu.Unlock()
	}
	n := r.nodes[l].node
	err := r.within("remove "+ns.id+" via "+r.nodes[l].id, 2*time.Second, func(ctx context.Context) error { return n.Remove(ctx, ns.id) })
	if err == nil {
		r.mu.Lock()
		ns.removed = true
		r.mu.Unlock()
	}
	r.logf("  remove %s via %s (cut off: %v): %v", ns.id, r.nodes[l].id, ns.cut, err)
}

// write issues one write of step s.
func (r *runner) write(s step) {
	k := s.inst
	ghost := k >= numInstances
	i := -1
	eligible := func(ns *nodeState) bool { return !ns.down && !ns.paused }
	switch {
	case !ghost && r.pins[k] >= 0:
		if eligible(r.nodes[r.pins[k]]) {
			i = r.pins[k]
		}
	default:
		c := r.candidates(eligible)
		if cut := r.candidates(func(ns *nodeState) bool { return eligible(ns) && ns.cut }); s.preferCut && len(cut) > 0 {
			c = cut
		}
		if len(c) > 0 {
			i = c[s.pick%len(c)]
		}
	}
	if i < 0 {
		r.logf("  skipped: no node for it")
		return
	}
	ns := r.nodes[i]
	if !ghost && r.pins[k] < 0 && !r.inMajority(i) {
		r.pins[k] = i
	}
	r.seq++
	w := &write{seq: r.seq, kind: s.write, value: s.value, node: ns.id, journal: -1}
	id := instID(k)
	path := "/eureka/apps/" + app + "/" + id
	method, body := "", ""
	switch s.write {
	case wRegister:
		method, path = http.MethodPost, "/eureka/apps/"+app
		body = fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":"h","app":%q,"ipAddr":"10.0.0.1","status":"UP",`+
			`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},`+
			`"lastDirtyTimestamp":"%d","metadata":{"gen":"%d"}}}`, id, app, r.ldt+int64(w.seq), w.seq)
	case wCancel:
		method = http.MethodDelete
	case wStatus:
		method, path = http.MethodPut, path+"/status?value="+s.value
	case wDelStatus:
		method, path = http.MethodDelete, path+"/status"
		if s.value != "" {
			path += "?value=" + s.value
		}
	case wMetadata:
		method, path = http.MethodPut, path+"/metadata?"+s.value+"="+strconv.Itoa(w.seq)
	case wRenew:
		method = http.MethodPut
	}
	w.start = time.Now()
	code, _, _ := r.do(i, method, path, body, 300*time.Millisecond)
	w.end, w.code = time.Now(), code
	switch {
	case code/100 == 2:
		w.out = outAck
	case code == http.StatusNotFound || code == http.StatusBadRequest:
		w.out = outRefused
	default:
		w.out = outUnknown
	}
	_, entries := cluster.OverlayState(ns.node)
	note := ""
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case ghost && w.out == outAck:
		r.problem("ghost-ack", "%s %s on %s, never registered, answered %d", writeNames[s.write], id, ns.id, code)
	case ghost, s.write == wRenew:
	case w.out == outAck && entries > 0:
		w.journal, r.pins[k] = i, i
		r.pending = append(r.pending, w)
		note = " (journaled)"
		if s.write != wRegister {
			for _, o := range r.insts[k] {
				if o.kind == wRegister && o.node != ns.id && o.out != outRefused && o.start.After(r.settled) && registeredNoEarlier(o, w) {
					w.optional = true
					note = " (journaled; may lose to " + o.node + "'s registration)"
				}
			}
		}
	case w.out == outAck:
		w.eff = w.end
	case w.out == outUnknown:
		// It may still commit (a full disk holds it up), after writes
		// issued later elsewhere: the instance's next writes go where it
		// went, behind it.
		r.pins[k] = i
	}
	if !ghost && s.write != wRenew {
		r.insts[k] = append(r.insts[k], w)
	}
	r.trace = append(r.trace, fmt.Sprintf("%7.3fs   #%d on %s: %d in %v%s", time.Since(r.begin).Seconds(), w.seq, ns.id, code,
		w.end.Sub(w.start).Round(time.Millisecond), note))
}

// registeredNoEarlier reports whether registration o, made on another node
// than the journaled change w, may carry a registration time no earlier
// than w's (fallback.go, conditional: such a registration stands against
// the change). Times are milliseconds, so one answered in the millisecond
// w began may; so may one whose time is the replay of a journal or of a
// write whose outcome is unknown, which comes later.
func registeredNoEarlier(o, w *write) bool {
	return o.journal >= 0 || o.out == outUnknown || o.end.UnixMilli() >= w.start.UnixMilli()
}

// appsDoc is what the checks read of GET /eureka/apps.
type appsDoc struct {
	Applications struct {
		Application []struct {
			Name     string `json:"name"`
			Instance []struct {
				InstanceID string            `json:"instanceId"`
				Status     string            `json:"status"`
				Override   string            `json:"overriddenStatus"`
				Metadata   map[string]string `json:"metadata"`
			} `json:"instance"`
		} `json:"application"`
	} `json:"applications"`
}

// readApps reads the full registry on node i: its status code, whether
// marked stale, and the instances by id.
func (r *runner) readApps(i int) (code int, stale bool, got map[string]inst, err error) {
	code, hdr, body := r.do(i, http.MethodGet, "/eureka/apps", "", 300*time.Millisecond)
	if code != http.StatusOK {
		return code, false, nil, nil
	}
	var doc appsDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return code, false, nil, fmt.Errorf("decode: %v", err)
	}
	got = map[string]inst{}
	for _, a := range doc.Applications.Application {
		for _, in := range a.Instance {
			md := maps.Clone(in.Metadata)
			delete(md, "@class")
			s := inst{present: true, status: in.Status, override: in.Override, md: md}
			if s.override == "UNKNOWN" {
				s.override = ""
			}
			got[a.Name+"/"+in.InstanceID] = s
		}
	}
	return code, hdr.Get("X-Heureka-Stale") == "true", got, nil
}

func (r *runner) readAll() {
	for i, ns := range r.nodes {
		if !ns.down && !ns.paused {
			r.read(i)
		}
	}
}

// read reads node i's registry and checks it against the writes.
func (r *runner) read(i int) {
	ns := r.nodes[i]
	start := time.Now()
	code, stale, got, err := r.readApps(i)
	end := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		r.problem("read", "%s: GET /eureka/apps: %v", ns.id, err)
		return
	case code == http.StatusServiceUnavailable:
		return
	case code != http.StatusOK:
		r.problem("read", "%s: GET /eureka/apps answered %d", ns.id, code)
		return
	}
	mark := "marked stale"
	if !stale {
		mark = "unmarked"
	}
	for key := range got {
		if k := slices.IndexFunc(allKeys(), func(s string) bool { return s == key }); k < 0 || k >= numInstances {
			r.problem("phantom", "%s: %s read shows %s, never registered", ns.id, mark, key)
		}
	}
	cutoff := start.Add(-r.bound)
	for k := range numInstances {
		obs := got[app+"/"+instID(k)]
		issued := func(w *write) bool { return w.out != outRefused && w.start.Before(end) }
		possible, ok := states(r.insts[k], func(w *write) (bool, bool) { return issued(w), false })
		if ok && !possible[obs.key()] {
			r.problem("phantom", "%s: %s read of %s shows %s, which no subset of its writes gives\n%s",
				ns.id, mark, instID(k), obs.key(), r.history(k))
			continue
		}
		if stale {
			continue
		}
		want, ok := states(r.insts[k], func(w *write) (bool, bool) {
			return issued(w), w.out == outAck && !w.optional && !w.eff.IsZero() && w.eff.Before(cutoff)
		})
		if ok && !want[obs.key()] {
			st := ns.node.Status()
			r.problem("stale-read", "%s: unmarked read of %s (began %.3fs) shows %s, without a write acknowledged over %v before "+
				"(node: state %s, leader %q, ready %v, quorum %v, applied %d, commit %d, journal %d, disk full %v, linked %.3fs before; "+
				"its registry now: %s)\n%s",
				ns.id, instID(k), start.Sub(r.begin).Seconds(), obs.key(), r.bound,
				st.State, st.Leader, st.Ready, st.Quorum, st.AppliedIndex, st.CommitIndex, st.JournalEntries, ns.full,
				start.Sub(ns.linked).Seconds(), direct(ns.node, k).key(), r.history(k))
		}
	}
}

// finalView is what node i's read shows of the instances, or "" when the
// final check would not accept it.
func (r *runner) finalView(i int) string {
	code, stale, got, err := r.readApps(i)
	if err != nil || code != http.StatusOK || stale {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []string
	for k := range numInstances {
		obs := got[app+"/"+instID(k)].key()
		want, ok := states(r.insts[k], func(w *write) (bool, bool) { return w.out != outRefused, w.out == outAck && !w.optional })
		if ok && !want[obs] {
			return ""
		}
		all = append(all, obs)
	}
	return strings.Join(all, "; ")
}

// direct is instance k as node n's registry holds it, past the HTTP
// layer and its response cache.
func direct(n *cluster.Node, k int) inst {
	var s inst
	n.Read(func(reg *fsm.Registry) {
		if e := reg.Get(app, instID(k)); e != nil {
			s = inst{present: true, status: e.Instance.Status, override: e.Instance.OverriddenStatus, md: e.Instance.Metadata.Map()}
			if s.override == "UNKNOWN" {
				s.override = ""
			}
		}
	})
	return s
}

func allKeys() []string {
	var out []string
	for k := range numInstances + numGhosts {
		out = append(out, app+"/"+instID(k))
	}
	return out
}

// history lists instance k's writes; r.mu must be held.
func (r *runner) history(k int) string {
	var b strings.Builder
	for _, w := range r.insts[k] {
		eff := "?"
		if !w.eff.IsZero() {
			eff = fmt.Sprintf("%.3fs", w.eff.Sub(r.begin).Seconds())
		}
		fmt.Fprintf(&b, "    #%d %s %s on %s: %d, answered %.3fs, in the log by %s", w.seq, writeNames[w.kind], w.value, w.node,
			w.code, w.end.Sub(r.begin).Seconds(), eff)
		if w.journal >= 0 {
			b.WriteString(", journaled")
		}
		if w.optional {
			b.WriteString(", may lose")
		}
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// settle heals everything, starts every node stopped, frees every disk,
// and waits until the members agree on a leader, are caught up with it and
// hold no journal entries. It then takes the membership from the leader and
// lifts the pins.
func (r *runner) settle() bool {
	for _, i := range r.candidates(func(ns *nodeState) bool { return ns.cut || ns.paused }) {
		r.mc.Heal(i)
		r.mu.Lock()
		r.nodes[i].cut, r.nodes[i].paused, r.nodes[i].linked = false, false, time.Now()
		r.mu.Unlock()
	}
	for _, i := range r.candidates(func(ns *nodeState) bool { return ns.down }) {
		r.start(i)
	}
	for _, i := range r.candidates(func(ns *nodeState) bool { return ns.full }) {
		r.mc.SetDiskFull(i, false)
		r.nodes[i].full = false
	}
	var why string
	ok := waitUntil(15*time.Second, func() bool {
		l := -1
		for i, ns := range r.nodes {
			if !ns.down && ns.node.IsLeader() {
				l = i
			}
		}
		if l < 0 {
			why = "no leader"
			return false
		}
		// The membership is the leader's: a removal that did not answer
		// may have gone through.
		ms, err := r.nodes[l].node.Members()
		if err != nil {
			why = "members: " + err.Error()
			return false
		}
		r.mu.Lock()
		for _, ns := range r.nodes {
			ns.removed = !slices.ContainsFunc(ms, func(m cluster.MemberInfo) bool { return m.ID == ns.id })
		}
		r.mu.Unlock()
		ls := r.nodes[l].node.Status()
		if ls.CommitIndex < ls.LastLogIndex {
			why = fmt.Sprintf("the leader %s has committed %d of %d", ls.Node, ls.CommitIndex, ls.LastLogIndex)
			return false
		}
		// A removed node hands its journal to the leader once it learns it
		// is out (its fallback monitor asks the peers every second).
		for _, ns := range r.nodes {
			if ns.removed && !ns.down {
				if st := ns.node.Status(); st.JournalEntries > 0 {
					why = fmt.Sprintf("%s, removed, still holds %d journal entries", ns.id, st.JournalEntries)
					return false
				}
			}
		}
		for _, i := range r.members() {
			st := r.nodes[i].node.Status()
			if !st.Ready || !st.Quorum || st.JournalEntries > 0 || st.Leader != ls.Node || st.AppliedIndex < ls.CommitIndex {
				why = fmt.Sprintf("%s: ready %v, quorum %v, journal %d, leader %q, term %d, last log %d, commit %d, applied %d; "+
					"the leader %s: term %d, last log %d, commit %d",
					st.Node, st.Ready, st.Quorum, st.JournalEntries, st.Leader, st.Term, st.LastLogIndex, st.CommitIndex, st.AppliedIndex,
					ls.Node, ls.Term, ls.LastLogIndex, ls.CommitIndex)
				return false
			}
		}
		return true
	})
	if !ok {
		r.mu.Lock()
		r.problem("settle", "the cluster did not settle in 15s: %s", why)
		r.mu.Unlock()
		return false
	}
	r.sample()
	r.mu.Lock()
	for k := range r.pins {
		r.pins[k] = -1
	}
	r.settled = time.Now()
	r.mu.Unlock()
	r.logf("  settled")
	return true
}

// final checks, after the last settle, that every member shows every
// acknowledged write (in order, the later winning), all alike, and that no
// removed node keeps acknowledged writes in its journal.
func (r *runner) final() {
	// A change reaches a node's cached reads within milliseconds of its
	// apply (cache/push.go), within the bound for sure.
	// Once every member gave an unmarked answer holding every acknowledged
	// write, all the same, the check passed: reading again could only find
	// a gate closed since by a slow confirmation on a loaded machine, which
	// is a marked answer, not a loss.
	deadline, agreed := time.Now().Add(r.bound), false
	for !agreed && time.Now().Before(deadline) {
		var views []string
		for _, i := range r.members() {
			views = append(views, r.finalView(i))
		}
		if agreed = !slices.Contains(views, "") && len(slices.Compact(views)) == 1; !agreed {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var first string
	for _, i := range r.members() {
		if agreed {
			break
		}
		ns := r.nodes[i]
		code, stale, got, err := r.readApps(i)
		r.mu.Lock()
		switch {
		case err != nil || code != http.StatusOK || stale:
			r.problem("lost", "%s: settled, it answers %d (stale %v, %v)", ns.id, code, stale, err)
		default:
			var all []string
			for k := range numInstances {
				obs := got[app+"/"+instID(k)]
				all = append(all, obs.key())
				want, ok := states(r.insts[k], func(w *write) (bool, bool) {
					return w.out != outRefused, w.out == outAck && !w.optional
				})
				if ok && !want[obs.key()] {
					st := ns.node.Status()
					r.problem("lost", "%s: settled, %s shows %s (the node's registry: %s; applied %d, commit %d): "+
						"an acknowledged write is lost or undone\n%s",
						ns.id, instID(k), obs.key(), direct(ns.node, k).key(), st.AppliedIndex, st.CommitIndex, r.history(k))
				}
			}
			if s := strings.Join(all, "; "); first == "" {
				first = s
			} else if s != first {
				r.problem("diverged", "%s: settled, it shows %s; the first member %s", ns.id, s, first)
			}
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ns := range r.nodes {
		if !ns.removed || ns.down {
			continue
		}
		if _, n := cluster.OverlayState(ns.node); n > 0 {
			r.problem("lost", "%s, removed, holds %d acknowledged writes in its journal that no cluster replays", ns.id, n)
		}
	}
}
