package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Row identifiers: one row of the table per workload (docs/bench.md).
const (
	RowRegister    = "W1"  // register N instances
	RowRenew       = "W2"  // renew for a fixed time
	RowRenewSoak   = "W2S" // renew the whole registry, round and round, for RenewSoak
	RowFull        = "W3"  // full registry from a follower (etcd: serializable range)
	RowFullLinear  = "W3L" // full registry, linearizable
	RowFullChurn   = "W3U" // full registry while the registry changes (ChurnPerSec changes/s)
	RowDelta       = "W4"  // delta fetch
	RowApp         = "W5"  // one application from a follower (etcd: serializable)
	RowAppLinear   = "W5L" // one application, linearizable
	RowAppChurn    = "W5U" // one application while the registry changes
	RowPropagation = "W6"  // write acknowledged on A → visible in a direct read on B
	RowPropClient  = "W6C" // the same, as clients read (cached document; etcd: watch)
	RowPropBlock   = "W6B" // the same, to a blocking read (heureka: ?index=; etcd: watch)
	RowMemory      = "W7"  // RSS of each node
	RowCrash       = "W8"  // heartbeats stop → gone for readers
	RowRestart     = "W9"  // whole cluster kill -9 and restart → partial answers, time to serve
)

// Column names.
const (
	ColumnHeureka = "heureka"
	ColumnEtcd    = "etcd"
	ColumnLimit   = "limit"
	// ColumnEurekaServer is Spring Cloud's eureka-server, when run.
	ColumnEurekaServer = "eureka-server"
)

const reportFormat = 1

// Kind says how a row's cells are shown.
type Kind int

// Kinds of row.
const (
	KindRate    Kind = iota // operations per second and p99
	KindLatency             // p50 and p99 of sampled delays
	KindMemory              // resident memory per node
)

// RowSpec is one row of the table.
type RowSpec struct {
	ID    string
	Kind  Kind
	Short string // for the growth table
	Title func(p Params) string
}

// Rows lists the table's rows in order.
var Rows = []RowSpec{
	{RowRegister, KindRate, "register", func(p Params) string {
		return fmt.Sprintf("W1 register %s instances (%d writers)", group(int64(p.Instances)), p.Writers)
	}},
	{RowRenew, KindRate, "renew", func(p Params) string {
		return fmt.Sprintf("W2 renew (%d clients over all nodes, %s)", p.Renewers, fmtDur(p.Duration))
	}},
	{RowRenewSoak, KindRate, "renewals, sustained", func(p Params) string {
		return fmt.Sprintf("W2S renew every instance in turn (%d clients over all nodes, %s; the limit for a tenth of that, in turns between heureka's)", p.Renewers, fmtDur(p.RenewSoak))
	}},
	{RowFull, KindRate, "full registry", func(p Params) string {
		return fmt.Sprintf("W3 full registry from a follower (%d readers; etcd serializable)", p.FullReaders)
	}},
	{RowFullLinear, KindRate, "full registry, linearizable", func(p Params) string { return "W3 full registry, linearizable" }},
	{RowFullChurn, KindRate, "full registry under changes", func(p Params) string {
		return fmt.Sprintf("W3 full registry from a follower while %d changes/s are written", ChurnPerSec)
	}},
	{RowDelta, KindRate, "delta", func(p Params) string { return fmt.Sprintf("W4 delta from a follower (%d readers)", p.Readers) }},
	{RowApp, KindRate, "one app", func(p Params) string {
		return fmt.Sprintf("W5 one app from a follower (%d readers; etcd serializable)", p.Readers)
	}},
	{RowAppLinear, KindRate, "one app, linearizable", func(p Params) string { return "W5 one app, linearizable" }},
	{RowAppChurn, KindRate, "one app under changes", func(p Params) string {
		return fmt.Sprintf("W5 one app from a follower while %d changes/s are written", ChurnPerSec)
	}},
	{RowPropagation, KindLatency, "propagation, direct read", func(p Params) string {
		return "W6 propagation: ack on A → direct read on B"
	}},
	{RowPropClient, KindLatency, "propagation as clients see it", func(p Params) string {
		return "W6 propagation as clients see it (heureka: app document on B; etcd: watch on B)"
	}},
	{RowPropBlock, KindLatency, "propagation to a blocking read", func(p Params) string {
		return "W6 propagation to a blocking read (heureka: GET /eureka/apps/{app}?index= on B; etcd: watch on B)"
	}},
	{RowMemory, KindMemory, "RSS, largest node", func(p Params) string { return "W7 RSS per node" }},
	{RowCrash, KindLatency, "crash detection", func(p Params) string {
		return fmt.Sprintf("W8 crash detection: %d instances stop renewing → gone on B", p.CrashInstances)
	}},
	{RowRestart, KindLatency, "restart", func(p Params) string {
		return "W9 restart: every node killed (kill -9) and restarted → time until each serves every instance again"
	}},
}

// limitRows are the rows that have a limit column and a ratio: the reads,
// and the renewals (the limit answers the same PUTs with heureka's empty
// 200).
var limitRows = map[string]bool{RowRenew: true, RowRenewSoak: true, RowFull: true, RowDelta: true, RowApp: true, RowFullChurn: true, RowAppChurn: true}

// ChurnPerSec is how many registry changes per second W3U and W5U write
// while they read.
const ChurnPerSec = 50

// Params is what a run was asked to do, as the report records it.
type Params struct {
	Instances      int           `json:"instances"`
	Apps           int           `json:"apps"`
	MetadataBytes  int           `json:"metadata_bytes"`
	Writers        int           `json:"writers"`
	Renewers       int           `json:"renewers"`
	FullReaders    int           `json:"full_readers"`
	Readers        int           `json:"readers"`
	Duration       time.Duration `json:"duration_ns"`
	Samples        int           `json:"samples"`
	CrashInstances int           `json:"crash_instances"`
	CrashLeaseSecs int           `json:"crash_lease_secs"`
	// RenewSoak is how long W2S renewed (0: not run).
	RenewSoak time.Duration `json:"renew_soak_ns,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs         int    `json:"cpus"`
	Model        string `json:"model"`
	Memory       string `json:"memory"`
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
	GoVersion    string `json:"go_version"`
}

// NodeMemory is one node's memory figure for W7.
type NodeMemory struct {
	Node   string `json:"node"`
	Bytes  int64  `json:"bytes"`
	Source string `json:"source"` // "rss" (/proc) or where else it came from
}

// Measurement is one cell of the table.
type Measurement struct {
	// NA, when set, says why the cell has no figure.
	NA string `json:"na,omitempty"`
	// Count is operations completed (rate rows) or samples taken
	// (latency rows).
	Count    int64   `json:"count,omitempty"`
	Errors   int64   `json:"errors,omitempty"`
	Timeouts int64   `json:"timeouts,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`
	PerSec   float64 `json:"per_sec,omitempty"`
	// P50, P99 and Max are per-operation latencies (rate rows) or the
	// sampled delays (latency rows).
	P50 time.Duration `json:"p50_ns,omitempty"`
	P99 time.Duration `json:"p99_ns,omitempty"`
	Max time.Duration `json:"max_ns,omitempty"`
	// BodyBytes is the size of one answer as sent (reads).
	BodyBytes int64 `json:"body_bytes,omitempty"`
	// CPUPerOp is the CPU time the system's server processes (all nodes,
	// from /proc) spent per operation, when their PIDs are known.
	CPUPerOp time.Duration `json:"cpu_per_op_ns,omitempty"`
	// DriverCPUPerOp is the bench process's own CPU time per operation
	// and MachineBusy the fraction of the machine's CPU time (all cores)
	// that was busy during the phase, for W1 of servers on the bench's
	// machine: near 1, the servers and the driver were racing for the
	// cores. MachineStolen is the part of it the hypervisor took for
	// others (steal time): a shared host gave the phase fewer cores.
	DriverCPUPerOp time.Duration `json:"driver_cpu_per_op_ns,omitempty"`
	MachineBusy    float64       `json:"machine_busy,omitempty"`
	MachineStolen  float64       `json:"machine_stolen,omitempty"`
	Nodes          []NodeMemory  `json:"nodes,omitempty"`
	Note           string        `json:"note,omitempty"`
	FirstError     string        `json:"first_error,omitempty"`
}

// NotApplicable is a cell with no figure and the reason.
func NotApplicable(why string) Measurement { return Measurement{NA: why} }

// FromResult turns a load run into a rate cell.
func FromResult(r Result) Measurement {
	return Measurement{Count: r.Requests, Errors: r.Errors, Seconds: r.Elapsed.Seconds(), PerSec: r.PerSec,
		P50: r.P50, P99: r.P99, Max: r.Max, FirstError: r.FirstError}
}

// FromSamples turns sampled delays into a latency cell.
func FromSamples(d []time.Duration, timeouts int64) Measurement {
	s := Summarize(d)
	return Measurement{Count: int64(s.N), Timeouts: timeouts, P50: s.P50, P99: s.P99, Max: s.Max}
}

// System is one column's results.
type System struct {
	Name string `json:"name"`
	// NotRun, when set, says why the whole column is empty.
	NotRun   string                 `json:"not_run,omitempty"`
	Settings string                 `json:"settings,omitempty"`
	Version  string                 `json:"version,omitempty"`
	Rows     map[string]Measurement `json:"rows,omitempty"`
	// Events are things that happened to the system during the run and
	// bear on its figures (a leader election, say).
	Events []string `json:"events,omitempty"`
}

// Set records a cell.
func (s *System) Set(row string, m Measurement) {
	if s.Rows == nil {
		s.Rows = map[string]Measurement{}
	}
	s.Rows[row] = m
}

// Report is the outcome of one `heureka bench` run; --json prints it.
type Report struct {
	Format  int           `json:"format"`
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Command string        `json:"command,omitempty"`
	// Commit is the commit the bench's executable was built from, when
	// known (--summary records it).
	Commit  string    `json:"commit,omitempty"`
	Machine Machine   `json:"machine"`
	Params  Params    `json:"params"`
	Systems []*System `json:"systems"`
}

// notRunDisabled begins the NotRun of a column nobody asked for.
const notRunDisabled = "disabled"

// WithoutDisabled drops the columns nobody asked for (an etcd column
// without --etcd): the scale table shows what was run.
func (r *Report) WithoutDisabled() {
	r.Systems = slices.DeleteFunc(r.Systems, func(s *System) bool { return strings.HasPrefix(s.NotRun, notRunDisabled) })
}

// System returns the column with the given name, or nil.
func (r *Report) System(name string) *System {
	for _, s := range r.Systems {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (r *Report) cell(system, row string) (Measurement, bool) {
	s := r.System(system)
	if s == nil {
		return Measurement{}, false
	}
	if s.NotRun != "" {
		return Measurement{NA: "not run (" + s.NotRun + ")"}, true
	}
	m, ok := s.Rows[row]
	return m, ok
}

// Ratio is heureka's rate over the limit's for a read row, or 0.
func (r *Report) Ratio(row string) float64 {
	h, ok1 := r.cell(ColumnHeureka, row)
	l, ok2 := r.cell(ColumnLimit, row)
	if !ok1 || !ok2 || h.NA != "" || l.NA != "" || l.PerSec <= 0 || h.PerSec <= 0 {
		return 0
	}
	return h.PerSec / l.PerSec
}

// Table formats the report as a Markdown table (rows = workloads, columns
// = heureka, etcd, limit, heureka/limit) followed by the settings, the
// machine and the load average.
func (r *Report) Table() string {
	var b strings.Builder
	cols := []string{ColumnHeureka, ColumnEtcd, ColumnLimit}
	if r.System(ColumnEurekaServer) != nil {
		// Beside heureka, since it answers the same requests.
		cols = []string{ColumnHeureka, ColumnEurekaServer, ColumnEtcd, ColumnLimit}
		b.WriteString("| workload | heureka | eureka-server | etcd | limit | heureka/limit |\n|---|---|---|---|---|---|\n")
	} else {
		b.WriteString("| workload | heureka | etcd | limit | heureka/limit |\n|---|---|---|---|---|\n")
	}
	for _, row := range Rows {
		if row.ID == RowRenewSoak && r.Params.RenewSoak <= 0 {
			continue // not asked for
		}
		cells := []string{row.Title(r.Params)}
		for _, col := range cols {
			if col == ColumnLimit && !limitRows[row.ID] {
				cells = append(cells, "")
				continue
			}
			m, ok := r.cell(col, row.ID)
			if !ok {
				cells = append(cells, "—")
				continue
			}
			cells = append(cells, FormatCell(row.Kind, m))
		}
		ratio := ""
		if q := r.Ratio(row.ID); q > 0 {
			ratio = strconv.FormatFloat(q, 'f', 2, 64)
		}
		cells = append(cells, ratio)
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	b.WriteString("\n")
	for _, s := range r.Systems {
		switch {
		case s.NotRun != "":
			fmt.Fprintf(&b, "- %s: not run (%s)\n", s.Name, s.NotRun)
		default:
			v := ""
			if s.Version != "" {
				v = " " + s.Version
			}
			fmt.Fprintf(&b, "- %s%s: %s\n", s.Name, v, s.Settings)
		}
		for _, e := range s.Events {
			fmt.Fprintf(&b, "- %s, during the run: %s\n", s.Name, e)
		}
	}
	p := r.Params
	fmt.Fprintf(&b, "- workload: %s instances in %d apps, ~%d B metadata each; %s per timed phase; W6 up to %d samples per row; W8 %d instances with a %d s lease\n",
		group(int64(p.Instances)), p.Apps, p.MetadataBytes, fmtDur(p.Duration), p.Samples, p.CrashInstances, p.CrashLeaseSecs)
	m := r.Machine
	fmt.Fprintf(&b, "- machine: %d CPUs (%s), %s memory; load average %s at start, %s at end; run took %s\n",
		m.CPUs, m.Model, m.Memory, m.LoadAvgStart, m.LoadAvgEnd, r.Elapsed.Round(time.Second))
	return b.String()
}

// FormatCell renders one measurement for the table.
func FormatCell(k Kind, m Measurement) string {
	if m.NA != "" {
		return m.NA
	}
	var parts []string
	switch k {
	case KindRate:
		parts = append(parts, fmtRate(m.PerSec), "p99 "+fmtDur(m.P99))
		if m.BodyBytes > 0 {
			parts = append(parts, fmtBytes(m.BodyBytes))
		}
		if m.CPUPerOp > 0 {
			parts = append(parts, fmtCPU(m.CPUPerOp)+" CPU/op")
		}
		if m.MachineBusy > 0 {
			parts = append(parts, fmt.Sprintf("machine %d %% busy", int(math.Round(m.MachineBusy*100))))
		}
		if stolen := int(math.Round(m.MachineStolen * 100)); stolen > 0 {
			parts = append(parts, fmt.Sprintf("%d %% stolen", stolen))
		}
	case KindLatency:
		if m.Count == 0 {
			parts = append(parts, "no sample")
		} else {
			parts = append(parts, "p50 "+fmtDur(m.P50), "p99 "+fmtDur(m.P99), "n="+group(m.Count))
		}
		if m.Timeouts > 0 {
			parts = append(parts, group(m.Timeouts)+" timed out")
		}
	case KindMemory:
		var nodes []string
		for _, n := range m.Nodes {
			if n.Bytes < 0 {
				nodes = append(nodes, n.Node+" ?")
				continue
			}
			nodes = append(nodes, fmt.Sprintf("%s %.0f", n.Node, float64(n.Bytes)/(1<<20)))
		}
		src := ""
		if len(m.Nodes) > 0 && m.Nodes[0].Source != "rss" && m.Nodes[0].Source != "" {
			src = " (" + m.Nodes[0].Source + ")"
		}
		parts = append(parts, strings.Join(nodes, " / ")+" MiB"+src)
	}
	if m.Errors > 0 {
		parts = append(parts, group(m.Errors)+" errors")
	}
	if m.Note != "" {
		parts = append(parts, m.Note)
	}
	return strings.Join(parts, " · ")
}

// headline is the one figure of a cell the growth table compares: the
// rate, the p99 delay, or the largest node's memory.
func headline(k Kind, m Measurement) (float64, string, bool) {
	if m.NA != "" {
		return 0, "", false
	}
	switch k {
	case KindRate:
		return m.PerSec, fmtRate(m.PerSec), m.PerSec > 0
	case KindLatency:
		return float64(m.P99), "p99 " + fmtDur(m.P99), m.Count > 0
	case KindMemory:
		var top int64
		for _, n := range m.Nodes {
			top = max(top, n.Bytes)
		}
		return float64(top), fmt.Sprintf("%.0f MiB", float64(top)/(1<<20)), top > 0
	}
	return 0, "", false
}

// GrowthTable compares two reports of different sizes (normally 10,000 and
// 50,000 instances) cell by cell: the headline figure of each (rate, p99
// delay, largest node's memory) in a and in b, and b over a.
func GrowthTable(a, b *Report) string {
	var sb strings.Builder
	na, nb := group(int64(a.Params.Instances)), group(int64(b.Params.Instances))
	fmt.Fprintf(&sb, "| workload | heureka %s → %s | etcd %s → %s | limit %s → %s |\n|---|---|---|---|\n", na, nb, na, nb, na, nb)
	for _, row := range Rows {
		id := strings.TrimSuffix(strings.TrimSuffix(row.ID, "L"), "C")
		cells := []string{id + " " + row.Short}
		for _, col := range []string{ColumnHeureka, ColumnEtcd, ColumnLimit} {
			ma, ok1 := a.cell(col, row.ID)
			mb, ok2 := b.cell(col, row.ID)
			va, sa, g1 := headline(row.Kind, ma)
			vb, sb2, g2 := headline(row.Kind, mb)
			if !ok1 || !ok2 || !g1 || !g2 {
				cells = append(cells, "")
				continue
			}
			cells = append(cells, fmt.Sprintf("%s → %s (×%.2f)", sa, sb2, vb/va))
		}
		sb.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return sb.String()
}

// group writes n with thousands separators: 12345 → "12,345".
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func fmtRate(r float64) string {
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64) + "/s"
	}
	return group(int64(r+0.5)) + "/s"
}

// fmtDur renders a duration with two or three significant digits.
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case d <= 0:
		return "0 ms"
	case ms < 1:
		return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	case ms < 1000:
		return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
	case ms < 10000:
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
	default:
		return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s"
	}
}

// fmtCPU renders a CPU time per operation in microseconds.
func fmtCPU(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	if us < 10 {
		return strconv.FormatFloat(us, 'f', 1, 64) + " µs"
	}
	return group(int64(us+0.5)) + " µs"
}

func fmtBytes(n int64) string {
	switch {
	case n < 1<<10:
		return strconv.FormatInt(n, 10) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	default:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	}
}
