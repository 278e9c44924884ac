// Package lab is `heureka lab`: it starts a local cluster of real heureka
// processes with a fault-injecting proxy between their Raft links, runs a
// small client workload, plays a scripted fault scenario in AP and in CP
// mode, and reports what clients saw on each side of the faults.
//
// It drives real processes over HTTP, started and stopped by
// internal/testkit/launch. It imports faultproxy, internal/testkit/instance
// and internal/testkit/launch only; it must not import the server's
// packages.
package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/instance"
	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// Config tunes a lab run.
type Config struct {
	// Binary is the heureka executable to start (usually os.Executable()).
	Binary string
	// Nodes is the cluster size (3 or 5).
	Nodes int
	// Modes are played in order.
	Modes []string
	// Phase is how long each fault lasts.
	Phase time.Duration
	// Progress receives one line per step (nil: quiet).
	Progress io.Writer
	// Bucket is the timeline's resolution (0: half a second).
	Bucket time.Duration
}

// Counts is what clients saw in one phase on one side (or, in a
// Timeline, on one node in one bucket). ReadsOK counts every answered
// read, ReadsStale the answered ones marked stale among them; WritesOK
// every acknowledged write, WritesJournaled those among them a node
// accepted without quorum (AP journal, replayed later).
type Counts struct {
	ReadsOK         int `json:"reads_ok"`
	ReadsRefused    int `json:"reads_refused"`
	ReadsStale      int `json:"reads_stale"`
	WritesOK        int `json:"writes_accepted"`
	WritesJournaled int `json:"writes_journaled"`
	WritesRefused   int `json:"writes_refused"`
}

// Row is one (phase, side) line of the report.
type Row struct {
	Phase string `json:"phase"`
	Side  string `json:"side"`
	Counts
}

// ModeReport is one mode's outcome.
type ModeReport struct {
	Mode string `json:"mode"`
	Rows []Row  `json:"rows"`
	// WritesAccepted counts every acknowledged write; WritesLost those
	// missing from some node at the end; WritesReplayed the ones a node
	// accepted without quorum (AP journal) that reached every node.
	WritesAccepted int `json:"writes_accepted"`
	WritesLost     int `json:"writes_lost"`
	WritesReplayed int `json:"writes_replayed"`
	// RecoverPartition and RecoverKill: from healing (restart) until every
	// node agrees on a leader and holds every acknowledged write.
	RecoverPartition time.Duration `json:"recover_partition_ns"`
	RecoverKill      time.Duration `json:"recover_kill_ns"`
	// Timeline is the same run in time, for the HTML report.
	Timeline Timeline `json:"timeline"`
}

// Report is a whole lab run.
type Report struct {
	Nodes int          `json:"nodes"`
	Modes []ModeReport `json:"modes"`
}

// write is an acknowledged registration.
type write struct {
	id        string
	journaled bool // accepted into an AP journal (no quorum), replayed later
}

// recorder collects the workload's observations.
type recorder struct {
	mu       sync.Mutex
	phase    string
	sideOf   func(nodeID string) string
	counts   map[[2]string]*Counts
	order    [][2]string
	accepted []write
	tl       *timeline
	mode     string
}

func (r *recorder) setPhase(phase string, sideOf func(string) string) {
	r.mu.Lock()
	r.phase, r.sideOf = phase, sideOf
	r.mu.Unlock()
}

// phaseNow is the phase in force and its sides, taken when an operation
// starts: an operation counts in the phase it began in, so a write sent
// just before a fault and acknowledged just after it is not counted as the
// fault's.
func (r *recorder) phaseNow() (string, func(string) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase, r.sideOf
}

// bucket returns the counts of phase for nodeID's side; r.mu is held.
func (r *recorder) bucket(phase string, sideOf func(string) string, nodeID string) (*Counts, string) {
	side := sideOf(nodeID)
	k := [2]string{phase, side}
	c := r.counts[k]
	if c == nil {
		c = &Counts{}
		r.counts[k] = c
		r.order = append(r.order, k)
	}
	return c, side
}

// client runs one node's workload until ctx ends: a registration, then a
// read of the application, every 50 ms.
func (r *recorder) client(ctx context.Context, nd *launch.Node) {
	for seq := 0; ctx.Err() == nil; seq++ {
		phase, sideOf := r.phaseNow()
		if !nd.Running() {
			r.mu.Lock()
			c, _ := r.bucket(phase, sideOf, nd.ID)
			c.WritesRefused++
			c.ReadsRefused++
			r.mu.Unlock()
			r.tl.count(nd.ID, func(c *Counts) { c.WritesRefused++; c.ReadsRefused++ })
			time.Sleep(50 * time.Millisecond)
			continue
		}
		id := fmt.Sprintf("%s-%d-%d", nd.ID, time.Now().UnixNano()%1e9, seq)
		body := fmt.Sprintf(`{"instance":{"instanceId":%q,"hostName":%q,"app":"LAB","ipAddr":"127.0.0.1","status":"UP","dataCenterInfo":{"name":"MyOwn"}}}`, id, id)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, nd.URL("/eureka/apps/LAB"), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		ok := err == nil && resp.StatusCode == http.StatusNoContent
		// A write an AP node acknowledged while it knew no leader went to
		// its journal (a Raft write needs a leader); so did every one the
		// partitioned-away side acknowledged.
		noLeader := ok && resp.Header.Get("X-Heureka-Leader") == ""
		if resp != nil {
			resp.Body.Close()
		}
		r.mu.Lock()
		c, side := r.bucket(phase, sideOf, nd.ID)
		refused := !ok && ctx.Err() == nil
		journaled := ok && r.mode == "ap" && (side == "minority" || noLeader)
		if ok {
			c.WritesOK++
			r.accepted = append(r.accepted, write{id: id, journaled: journaled})
		} else if refused {
			c.WritesRefused++
		}
		if journaled {
			c.WritesJournaled++
		}
		r.mu.Unlock()
		r.tl.count(nd.ID, func(c *Counts) {
			switch {
			case journaled:
				c.WritesOK++
				c.WritesJournaled++
			case ok:
				c.WritesOK++
			case refused:
				c.WritesRefused++
			}
		})

		resp, err = client.Get(nd.URL("/eureka/apps/LAB"))
		r.mu.Lock()
		c, _ = r.bucket(phase, sideOf, nd.ID)
		answered := err == nil && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotFound)
		stale := answered && resp.Header.Get("X-Heureka-Stale") == "true"
		readRefused := !answered && ctx.Err() == nil
		add := func(c *Counts) {
			switch {
			case answered:
				c.ReadsOK++
				if stale {
					c.ReadsStale++
				}
			case readRefused:
				c.ReadsRefused++
			}
		}
		add(c)
		r.mu.Unlock()
		r.tl.count(nd.ID, add)
		if resp != nil {
			resp.Body.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// idsOn returns the instance ids nd lists for the lab's application, read
// once (a stale read is fine: the lab waits for convergence).
func idsOn(nd *launch.Node) (map[string]bool, error) {
	req, _ := http.NewRequest(http.MethodGet, nd.URL("/eureka/apps/LAB?consistency=stale"), nil)
	req.Header.Set("Accept", "application/json")
	code, body, _, err := launch.Read(slowClient, req)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	if code == http.StatusNotFound {
		return have, nil
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s: GET /eureka/apps/LAB: %d %s", nd.ID, code, http.StatusText(code))
	}
	ids, err := instance.AppIDs(body)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		have[id] = true
	}
	return have, nil
}

// slowClient reads whole registries, which may take a while under load.
var slowClient = &http.Client{Timeout: 15 * time.Second}

// missing counts the acknowledged writes nd does not list (-1 if it
// cannot be asked).
func missing(nd *launch.Node, accepted []write) int {
	have, err := idsOn(nd)
	if err != nil {
		return -1
	}
	n := 0
	for _, w := range accepted {
		if !have[w.id] {
			n++
		}
	}
	return n
}

// Run plays the scenario in every mode and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Nodes != 3 && cfg.Nodes != 5 {
		return nil, fmt.Errorf("lab: %d nodes: want 3 or 5", cfg.Nodes)
	}
	if cfg.Phase <= 0 {
		cfg.Phase = 5 * time.Second
	}
	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, format+"\n", args...)
		}
	}
	rep := &Report{Nodes: cfg.Nodes}
	for _, mode := range cfg.Modes {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("lab: %w", err)
		}
		mr, err := runMode(ctx, cfg, mode, progress)
		if err != nil {
			return rep, fmt.Errorf("lab %s: %w", mode, err)
		}
		rep.Modes = append(rep.Modes, *mr)
	}
	return rep, nil
}

func runMode(ctx context.Context, cfg Config, mode string, progress func(string, ...any)) (*ModeReport, error) {
	dir, err := os.MkdirTemp("", "heureka-lab-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	progress("[%s] starting %d nodes", mode, cfg.Nodes)
	c, err := startCluster(cfg.Binary, dir, cfg.Nodes, mode)
	defer c.stop()
	if err != nil {
		return nil, err
	}
	var lead *launch.Node
	if err := waitFor(ctx, 15*time.Second, func() bool { lead = c.leader(); return lead != nil }); err != nil {
		return nil, fmt.Errorf("no leader at start: %w", err)
	}
	var ids []string
	for _, nd := range c.nodes {
		ids = append(ids, nd.ID)
	}
	bucket := cfg.Bucket
	if bucket <= 0 {
		bucket = defaultBucket
	}
	rec := &recorder{counts: map[[2]string]*Counts{}, tl: newTimeline(ids, bucket), mode: mode}
	all := func(string) string { return "all" }
	rec.setPhase("steady", all)
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopWork(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); rec.tl.poll(wctx, c, 100*time.Millisecond) }()
	for _, nd := range c.nodes {
		wg.Add(1)
		go func(nd *launch.Node) { defer wg.Done(); rec.client(wctx, nd) }(nd)
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return nil, err
	}

	// Fault 1: the leader is partitioned away from every other node.
	isolated := lead
	progress("[%s] partitioning the leader %s away", mode, isolated.ID)
	endPartition := rec.tl.fault("partition", isolated.ID)
	c.proxy.Isolate(isolated.ID)
	rec.setPhase("leader partitioned away", sides(isolated.ID, "minority", "majority"))
	if err := sleep(ctx, cfg.Phase); err != nil {
		return nil, err
	}
	progress("[%s] healing", mode)
	rec.setPhase("healing", all)
	c.proxy.Heal()
	endPartition()
	healed := time.Now()
	mr := &ModeReport{Mode: mode}
	// recovered: every node agrees on a leader and lists every write
	// acknowledged before recovery began (the workload keeps writing).
	var target []write
	mark := func() {
		rec.mu.Lock()
		target = append([]write(nil), rec.accepted...)
		rec.mu.Unlock()
	}
	recovered := func() bool {
		if c.leader() == nil {
			return false
		}
		for _, nd := range c.nodes {
			if nd.Running() && missing(nd, target) != 0 {
				return false
			}
		}
		return true
	}
	mark()
	if err := waitFor(ctx, 30*time.Second, recovered); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		progress("[%s] did not recover within 30s after healing", mode)
	}
	mr.RecoverPartition = time.Since(healed)

	// Fault 2: the leader is killed, then restarted.
	if err := waitFor(ctx, 15*time.Second, func() bool { lead = c.leader(); return lead != nil }); err != nil {
		return nil, fmt.Errorf("no leader before the kill: %w", err)
	}
	killed := lead
	progress("[%s] killing the leader %s", mode, killed.ID)
	endKill := rec.tl.fault("kill", killed.ID)
	killed.Kill()
	rec.setPhase("leader killed", sides(killed.ID, "killed node", "survivors"))
	if err := sleep(ctx, cfg.Phase); err != nil {
		return nil, err
	}
	progress("[%s] restarting %s", mode, killed.ID)
	rec.setPhase("restart", all)
	restarted := time.Now()
	mark()
	endKill()
	endRestart := rec.tl.fault("restart", killed.ID)
	if err := killed.Start(); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 30*time.Second, recovered); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		progress("[%s] did not recover within 30s after the restart: %s", mode, c.describe(rec))
	}
	mr.RecoverKill = time.Since(restarted)
	endRestart()
	// A little steady state after recovery, so the timeline shows it.
	if err := sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	stopWork()
	wg.Wait()
	mr.Timeline = rec.tl.finish()

	// What survived: every acknowledged write must be on every node.
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var sets []map[string]bool
	_ = waitFor(ctx, 10*time.Second, func() bool {
		sets = sets[:0]
		for _, nd := range c.nodes {
			have, err := idsOn(nd)
			if err != nil {
				return false
			}
			sets = append(sets, have)
		}
		for _, have := range sets {
			for _, w := range rec.accepted {
				if !have[w.id] {
					return false
				}
			}
		}
		return true
	})
	for _, w := range rec.accepted {
		mr.WritesAccepted++
		present := len(sets) == len(c.nodes)
		for _, have := range sets {
			present = present && have[w.id]
		}
		switch {
		case !present:
			mr.WritesLost++
		case w.journaled:
			mr.WritesReplayed++
		}
	}
	for _, k := range rec.order {
		mr.Rows = append(mr.Rows, Row{Phase: k[0], Side: k[1], Counts: *rec.counts[k]})
	}
	progress("[%s] done", mode)
	return mr, nil
}

// WriteTable prints the report as aligned text: one block per mode, then
// the modes side by side.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tphase\tside\treads ok\treads refused\treads stale\twrites accepted\twrites refused")
	for _, m := range r.Modes {
		for _, row := range m.Rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", m.Mode, row.Phase, row.Side,
				row.ReadsOK, row.ReadsRefused, row.ReadsStale, row.WritesOK, row.WritesRefused)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "outcome"
	for _, m := range r.Modes {
		header += "\t" + m.Mode
	}
	fmt.Fprintln(tw, header)
	for _, o := range r.outcomes() {
		fmt.Fprintln(tw, o.Name+"\t"+strings.Join(o.Values, "\t"))
	}
	tw.Flush()
}

func (m ModeReport) find(phase, side string) Counts {
	for _, row := range m.Rows {
		if row.Phase == phase && row.Side == side {
			return row.Counts
		}
	}
	return Counts{}
}

// describe says, per node, its Raft view and how many acknowledged writes
// it lacks (for a progress line when recovery stalls).
func (c *cluster) describe(rec *recorder) string {
	rec.mu.Lock()
	acc := append([]write(nil), rec.accepted...)
	rec.mu.Unlock()
	var parts []string
	for _, nd := range c.nodes {
		st, _, err := nd.Status(context.Background())
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v (log: %s)", nd.ID, err, logTail(nd)))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s leader=%s missing %d of %d", nd.ID, st.State, st.Leader, missing(nd, acc), len(acc)))
	}
	return strings.Join(parts, "; ")
}

// sides labels the node the fault hits (id) one and every other node
// other, for the phase's outcome table.
func sides(id, one, other string) func(string) string {
	return func(n string) string {
		if n == id {
			return one
		}
		return other
	}
}
