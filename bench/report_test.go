package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func sampleReport(instances int, scale float64) *Report {
	p := Params{Instances: instances, Apps: 500, MetadataBytes: 1024, Writers: 64, Renewers: 64, FullReaders: 8,
		Readers: 32, Duration: 5 * time.Second, Samples: 300, CrashInstances: 100, CrashLeaseSecs: 2}
	h := &System{Name: ColumnHeureka, Settings: "3 local nodes", Events: []string{"Raft term went from 2 to 3 (a leader election)"}}
	h.Set(RowRegister, Measurement{PerSec: 2000 * scale, P99: 40 * time.Millisecond, CPUPerOp: 450 * time.Microsecond,
		DriverCPUPerOp: 90 * time.Microsecond, MachineBusy: 0.964, MachineStolen: 0.254})
	h.Set(RowRenew, Measurement{PerSec: 9000 * scale, P99: 5 * time.Millisecond})
	h.Set(RowFull, Measurement{PerSec: 300 * scale, P99: 80 * time.Millisecond, BodyBytes: 3 << 20})
	h.Set(RowFullLinear, NotApplicable("— (no linearizable read)"))
	h.Set(RowDelta, Measurement{PerSec: 12345.6, P99: 1500 * time.Microsecond, BodyBytes: 9000, Note: "holds 20 instances"})
	h.Set(RowPropagation, Measurement{Count: 300, P50: 800 * time.Microsecond, P99: 12 * time.Millisecond})
	h.Set(RowMemory, Measurement{Nodes: []NodeMemory{{"n1", 100 << 20, "rss"}, {"n2", 120 << 20, "rss"}, {"n3", -1, "rss"}}})
	h.Set(RowCrash, Measurement{Count: 98, Timeouts: 2, P50: 2500 * time.Millisecond, P99: 3900 * time.Millisecond})
	lim := &System{Name: ColumnLimit}
	lim.Set(RowRenew, Measurement{PerSec: 10000, P99: 4 * time.Millisecond})
	lim.Set(RowFull, Measurement{PerSec: 400, P99: 50 * time.Millisecond, BodyBytes: 3 << 20})
	lim.Set(RowDelta, Measurement{PerSec: 20000, P99: time.Millisecond})
	e := &System{Name: ColumnEtcd, NotRun: "etcd not installed"}
	return &Report{Format: reportFormat, Params: p, Systems: []*System{h, e, lim},
		Machine: Machine{CPUs: 2, Model: "Test CPU", Memory: "4.0 GiB", LoadAvgStart: "0.5 0.4 0.3", LoadAvgEnd: "1.0 0.8 0.6"},
		Elapsed: 200 * time.Second}
}

func TestTable_RowsColumnsAndRatios(t *testing.T) {
	out := sampleReport(10000, 1).Table()
	lines := strings.Split(out, "\n")
	if lines[0] != "| workload | heureka | etcd | limit | heureka/limit |" {
		t.Fatalf("header %q", lines[0])
	}
	var rows []string
	for _, l := range lines[2:] {
		if !strings.HasPrefix(l, "| ") {
			break
		}
		rows = append(rows, l)
		if n := strings.Count(l, " | ") + 1; n != 5 {
			t.Errorf("row has %d cells, want 5: %s", n, l)
		}
	}
	// W2S is left out: the report did not run it.
	if len(rows) != len(Rows)-1 {
		t.Fatalf("%d rows, want one per workload run (%d):\n%s", len(rows), len(Rows)-1, out)
	}
	for i, want := range []string{"W1 register 10,000 instances (64 writers)", "W2 renew", "W3 full registry from a follower",
		"W3 full registry, linearizable", "W3 full registry from a follower while 50 changes/s", "W4 delta", "W5 one app",
		"W5 one app, linearizable", "W5 one app from a follower while 50 changes/s", "W6 propagation: ack",
		"W6 propagation as clients", "W6 propagation to a blocking read", "W7 RSS", "W8 crash detection: 100 instances"} {
		if !strings.HasPrefix(rows[i], "| "+want) {
			t.Errorf("row %d = %q, want it to start with %q", i, rows[i], want)
		}
	}
	for _, want := range []string{
		"| 2,000/s · p99 40 ms · 450 µs CPU/op · machine 96 % busy · 25 % stolen |", // W1 heureka
		"| 300/s · p99 80 ms · 3.0 MiB |",                                           // W3 heureka, with the body size
		"| 400/s · p99 50 ms · 3.0 MiB | 0.75 |",                                    // W3 limit and the ratio
		"| 10,000/s · p99 4.0 ms | 0.90 |",                                          // W2 limit and the ratio
		"12,346/s · p99 1.5 ms · 8.8 KiB · holds 20 instances",                      // W4 note
		"| 20,000/s · p99 1.0 ms | 0.62 |",                                          // W4 ratio
		"not run (etcd not installed)",                                              // the etcd column
		"p50 0.80 ms · p99 12 ms · n=300",                                           // W6
		"n1 100 / n2 120 / n3 ? MiB",                                                // W7
		"p50 2.50 s · p99 3.90 s · n=98 · 2 timed out",                              // W8
		"— (no linearizable read)",                                                  // W3L heureka
		"- etcd: not run (etcd not installed)",
		"- heureka, during the run: Raft term went from 2 to 3 (a leader election)",
		"- machine: 2 CPUs (Test CPU), 4.0 GiB memory; load average 0.5 0.4 0.3 at start, 1.0 0.8 0.6 at end; run took 3m20s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Rows without a read figure have no limit cell and no ratio.
	if !strings.HasSuffix(rows[0], "|  |  |") {
		t.Errorf("W1 row should end with empty limit and ratio cells: %q", rows[0])
	}
}

// A report that ran the sustained renewals has their row, with the
// limit's cell and the ratio.
func TestTable_SustainedRenewals(t *testing.T) {
	r := sampleReport(10000, 1)
	r.Params.RenewSoak = 5 * time.Minute
	r.System(ColumnHeureka).Set(RowRenewSoak, Measurement{PerSec: 27000, P99: 9 * time.Millisecond, Note: "self-preservation off at all 48 polls after the first minute"})
	r.System(ColumnLimit).Set(RowRenewSoak, Measurement{PerSec: 30000, P99: 3 * time.Millisecond})
	out := r.Table()
	want := "| W2S renew every instance in turn (64 clients over all nodes, 300.0 s; the limit for a tenth of that, in turns between heureka's) | 27,000/s · p99 9.0 ms · self-preservation off at all 48 polls after the first minute | not run (etcd not installed) | 30,000/s · p99 3.0 ms | 0.90 |"
	if !strings.Contains(out, want) {
		t.Errorf("table lacks %q:\n%s", want, out)
	}
}

func TestGrowthTable(t *testing.T) {
	a, b := sampleReport(10000, 1), sampleReport(50000, 0.5)
	out := GrowthTable(a, b)
	for _, want := range []string{
		"| workload | heureka 10,000 → 50,000 | etcd 10,000 → 50,000 | limit 10,000 → 50,000 |",
		"| W1 register | 2,000/s → 1,000/s (×0.50) |  |  |",
		"| W3 full registry | 300/s → 150/s (×0.50) |  | 400/s → 400/s (×1.00) |",
		"| W7 RSS, largest node | 120 MiB → 120 MiB (×1.00) |",
		"| W3 full registry, linearizable |  |  |  |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("growth table lacks %q:\n%s", want, out)
		}
	}
}

func TestReport_JSONRoundTrip(t *testing.T) {
	r := sampleReport(10000, 1)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Table() != r.Table() {
		t.Fatalf("table changed across JSON:\n%s\n---\n%s", r.Table(), back.Table())
	}
}

func TestFormatting(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4321: "-4,321"} {
		if got := group(in); got != want {
			t.Errorf("group(%d) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[time.Duration]string{0: "0 ms", 420 * time.Microsecond: "0.42 ms", 4200 * time.Microsecond: "4.2 ms",
		42 * time.Millisecond: "42 ms", 4200 * time.Millisecond: "4.20 s", 42 * time.Second: "42.0 s"} {
		if got := fmtDur(in); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[float64]string{4.25: "4.2/s", 12.5: "13/s", 12345.4: "12,345/s"} {
		if got := fmtRate(in); got != want {
			t.Errorf("fmtRate(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[int64]string{512: "512 B", 2048: "2.0 KiB", 3 << 20: "3.0 MiB"} {
		if got := fmtBytes(in); got != want {
			t.Errorf("fmtBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestTable_EurekaServerColumn: a report with an eureka-server system gets
// its column beside heureka's; one without keeps the four-column table.
func TestTable_EurekaServerColumn(t *testing.T) {
	r := sampleReport(10000, 1)
	if strings.Contains(r.Table(), "eureka-server") {
		t.Fatal("eureka-server column without an eureka-server system")
	}
	es := &System{Name: ColumnEurekaServer, Settings: "3 local peers"}
	es.Set(RowRegister, Measurement{PerSec: 383, P99: time.Second})
	r.Systems = append(r.Systems, es)
	tab := r.Table()
	if !strings.HasPrefix(tab, "| workload | heureka | eureka-server | etcd | limit | heureka/limit |") {
		t.Fatalf("header: %s", tab[:strings.IndexByte(tab, '\n')])
	}
	if !strings.Contains(tab, "383/s") || !strings.Contains(tab, "- eureka-server: 3 local peers") {
		t.Fatalf("eureka-server cells or settings missing:\n%s", tab)
	}
}

// The W2S note judges the renewals by the threshold of the interval the
// fleet declares, and says which declared intervals the lowest minute would
// have kept above it: the same renewals carry a fleet declaring 60 s, not
// one declaring 30 s, and both notes name the same shortest interval.
func TestLeaseWatch_NoteSaysWhichFleetTheRenewalsCarry(t *testing.T) {
	watch := func(threshold int64) leaseWatch {
		return leaseWatch{polls: 60, judged: 48, lowest: 1162908, threshold: threshold,
			leaders: map[string]bool{"n1": true}, fewest: 1000000, most: 1000000}
	}
	for _, tc := range []struct {
		interval  int
		threshold int64
		judged    string
	}{
		{60, 850000, "renewals above the self-preservation threshold at all 48 polls after the first minute (lowest 1,162,908/min against 850,000)"},
		{30, 1700000, "renewals UNDER the self-preservation threshold at 48 of 48 polls after the first minute (lowest 1,162,908/min against 1,700,000)"},
	} {
		w := watch(tc.threshold)
		if tc.interval == 30 {
			w.under = 48
		}
		note := w.String(Workload{LeaseSecs: 3600, RenewalSecs: tc.interval})
		for _, want := range []string{tc.judged, "the lowest minute would keep a fleet renewing every 44 s or more above it",
			"0 evicted", fmt.Sprintf("(lease 3600 s, renewal interval %d s)", tc.interval)} {
			if !strings.Contains(note, want) {
				t.Errorf("interval %d s: note lacks %q:\n%s", tc.interval, want, note)
			}
		}
	}
}
