package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReplaceSummary_OnlyBetweenMarkers(t *testing.T) {
	before := "# Benchmarks\n\nIntro, with `code` and a | pipe |.\n\n" + SummaryBegin + "\n"
	after := SummaryEnd + "\n\n## Topic\n\nThe rest, untouched.\n<!-- another comment -->\n"
	doc := before + "\nold table\n| a | b |\n\n" + after

	got, err := ReplaceSection(doc, "| new | table |\n|---|---|\n", SummaryMarkers)
	if err != nil {
		t.Fatal(err)
	}
	want := before + "\n| new | table |\n|---|---|\n\n" + after
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	// Again: the same result, nothing piles up.
	again, err := ReplaceSection(got, "| new | table |\n|---|---|\n", SummaryMarkers)
	if err != nil || again != got {
		t.Fatalf("second rewrite changed the page (err %v):\n%s", err, again)
	}
	// The marker lines are found by their prefix; their own text is kept.
	custom := strings.Replace(doc, SummaryBegin, SummaryBeginPrefix+" hand-written note -->", 1)
	got, err = ReplaceSection(custom, "T", SummaryMarkers)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, SummaryBeginPrefix+" hand-written note -->\n\nT\n\n"+SummaryEnd) {
		t.Fatalf("custom begin marker not kept:\n%s", got)
	}
	// An empty section between adjacent markers.
	got, err = ReplaceSection("a\n"+SummaryBegin+"\n"+SummaryEnd+"\nb\n", "T", SummaryMarkers)
	if err != nil || got != "a\n"+SummaryBegin+"\n\nT\n\n"+SummaryEnd+"\nb\n" {
		t.Fatalf("adjacent markers: %q, %v", got, err)
	}
}

func TestReplaceSummary_RefusesBadMarkers(t *testing.T) {
	for name, doc := range map[string]string{
		"no markers":   "# Benchmarks\n",
		"no end":       SummaryBegin + "\nx\n",
		"no begin":     "x\n" + SummaryEnd + "\n",
		"end first":    SummaryEnd + "\n" + SummaryBegin + "\n",
		"two begins":   SummaryBegin + "\n" + SummaryBegin + "\n" + SummaryEnd + "\n",
		"two ends":     SummaryBegin + "\n" + SummaryEnd + "\n" + SummaryEnd + "\n",
		"begin inline": "text " + SummaryBegin + "\n" + SummaryEnd + "\n",
	} {
		if got, err := ReplaceSection(doc, "T", SummaryMarkers); err == nil {
			t.Errorf("%s: no error; got %q", name, got)
		}
	}
}

func TestRewriteSummary_File(t *testing.T) {
	p := filepath.Join(t.TempDir(), "B.md")
	doc := "top\n" + SummaryBegin + "\nold\n" + SummaryEnd + "\nbottom\n"
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RewriteSection(p, "new", SummaryMarkers); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "top\n"+SummaryBegin+"\n\nnew\n\n"+SummaryEnd+"\nbottom\n" {
		t.Fatalf("file now %q", b)
	}
	if err := os.WriteFile(p, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RewriteSection(p, "new", SummaryMarkers); err == nil {
		t.Fatal("a file without markers was rewritten")
	}
	if b, _ := os.ReadFile(p); string(b) != "no markers\n" {
		t.Fatalf("a refused rewrite changed the file: %q", b)
	}
}

func TestSummaryTable(t *testing.T) {
	a, b := sampleReport(10000, 1), sampleReport(50000, 0.5)
	es := &System{Name: ColumnEurekaServer}
	es.Set(RowRegister, Measurement{PerSec: 500})
	es.Set(RowFull, Measurement{PerSec: 30})
	es.Set(RowPropBlock, Measurement{Count: 300, P99: 1200 * time.Millisecond})
	es.Set(RowRestart, NotApplicable("needs nodes the bench started (--local)"))
	a.Systems = append(a.Systems, es)
	b.Systems = append(b.Systems, &System{Name: ColumnEurekaServer, Rows: map[string]Measurement{RowRegister: NotApplicable(BudgetNote(25 * time.Minute))}})
	h := a.System(ColumnHeureka)
	h.Set(RowRestart, Measurement{Count: 3, P50: 2 * time.Second, P99: 2400 * time.Millisecond, Max: 2500 * time.Millisecond})
	h.Set(RowPropBlock, Measurement{Count: 300, P99: 9 * time.Millisecond})
	info := SummaryInfo{Date: time.Date(2026, 12, 2, 6, 10, 0, 0, time.UTC), Commit: "abc1234", Command: "heureka bench --summary BENCHMARKS.md"}
	out := SummaryTable([]*Report{a, b}, info)

	for _, want := range []string{
		"Measured 2026-12-02 06:10 UTC from commit `abc1234` with `heureka bench --summary BENCHMARKS.md` on 2 CPUs (Test CPU)",
		"10,000 0.5 0.4 0.3 → 1.0 0.8 0.6 (3 min 20 s);",
		"| instances | system | register | renew | full registry | delta | one app | blocking read p99 | RSS, largest node | restart, slowest node |",
		"| 10,000 | heureka | 2,000/s | 9,000/s | 300/s | 12,346/s | — | 9.0 ms | 120 MiB | 2.50 s |",
		"|  | eureka-server | 500/s (×4.00) | — | 30/s (×10.0) | — | — | 1.20 s | — | n/a¹ |",
		"|  | etcd | n/a² |  |  |  |  |  |  |  |",
		"|  | limit |  | 10,000/s (×0.90) | 400/s (×0.75) | 20,000/s (×0.62) | — |  |  |  |",
		"| 50,000 | heureka | 1,000/s | 4,500/s | 150/s |",
		"¹ eureka-server: needs nodes the bench started (--local)",
		"etcd: not run (etcd not installed)",
		"eureka-server: " + BudgetNote(25*time.Minute),
		"- heureka at 10,000, during the run: Raft term went from 2 to 3 (a leader election)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	// One row per system and size, and a row's cells match the header's.
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| instances") {
			rows++
			// Every column but the sustained renewals, which no size ran.
			if n := strings.Count(l, "|"); n != len(summaryColumns)+2 {
				t.Errorf("row with %d bars: %s", n, l)
			}
		}
	}
	if rows != 8 {
		t.Errorf("%d rows, want 8 (4 systems × 2 sizes):\n%s", rows, out)
	}
}

func TestWithoutHosts(t *testing.T) {
	for in, want := range map[string]string{
		`failed: Get "http://127.0.0.2:20724/eureka/apps/delta": context deadline exceeded`:  `failed: Get "/eureka/apps/delta": context deadline exceeded`,
		`Post "http://127.0.0.2:20724/eureka/apps/X": dial tcp 127.0.0.2:20724: i/o timeout`: `Post "/eureka/apps/X": dial tcp: i/o timeout`,
		`no delta read`: `no delta read`,
	} {
		if got := withoutHosts(in); got != want {
			t.Errorf("withoutHosts(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestColumnBudget_CancelsAndMarks(t *testing.T) {
	var seen []time.Duration
	slow := func(ctx context.Context) error {
		dl, _ := ctx.Deadline()
		seen = append(seen, time.Until(dl))
		<-ctx.Done()
		return ctx.Err()
	}
	c := &column{name: ColumnEurekaServer, steps: []step{func(context.Context) error { return nil }, slow}, budget: 50 * time.Millisecond}
	if out, err := c.run(context.Background(), 0); out || err != nil {
		t.Fatalf("a quick step: out %v, err %v", out, err)
	}
	if out, _ := c.run(context.Background(), 1); !out {
		t.Fatal("a step that outlasts the budget did not spend it")
	}
	if len(seen) != 1 || seen[0] > 50*time.Millisecond {
		t.Fatalf("the step's deadline was %v away, want within the budget", seen)
	}
	sys := &System{Name: ColumnEurekaServer}
	sys.Set(RowRegister, Measurement{PerSec: 100})
	sys.Set(RowFull, NotApplicable("failed: "+context.DeadlineExceeded.Error()))
	markBudgetSpent(sys, 25*time.Minute)
	if sys.Rows[RowRegister].PerSec != 100 {
		t.Error("a row measured before the bound ran out was overwritten")
	}
	for _, row := range []string{RowFull, RowDelta, RowRestart} {
		if got := sys.Rows[row].NA; got != BudgetNote(25*time.Minute) {
			t.Errorf("row %s says %q, want the bound's note", row, got)
		}
	}
	if len(sys.Events) != 1 || !strings.Contains(sys.Events[0], "25 min") {
		t.Errorf("events %q", sys.Events)
	}
}

func TestWithoutDirs(t *testing.T) {
	for in, want := range map[string]string{
		"heureka bench --scale /tmp/x/PAGE.md --json-out /tmp/x/reports": "heureka bench --scale PAGE.md --json-out reports",
		"heureka bench --summary BENCHMARKS.md --tmp=/var/tmp/b":         "heureka bench --summary BENCHMARKS.md --tmp=b",
		"heureka bench --summary-sizes 10000":                            "heureka bench --summary-sizes 10000",
	} {
		if got := withoutDirs(in); got != want {
			t.Errorf("withoutDirs(%q) = %q, want %q", in, got, want)
		}
	}
}
