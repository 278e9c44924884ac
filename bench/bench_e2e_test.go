package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/bench"
	"github.com/heureka-registry/heureka/e2e"
	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

func TestMain(m *testing.M) {
	code := m.Run()
	e2e.RemoveBinary()
	os.Exit(code)
}

// runBench runs `heureka bench args...` with a hard deadline and returns
// stdout, stderr and how long it took; it fails the test unless it exits 0.
func runBench(t *testing.T, deadline time.Duration, args ...string) (string, string, time.Duration) {
	t.Helper()
	return runBenchBin(t, e2e.Binary(t), deadline, args...)
}

// runBenchBin is runBench with a given heureka executable.
func runBenchBin(t *testing.T, bin string, deadline time.Duration, args ...string) (string, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("heureka bench %s: %v after %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, took, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String(), took
}

// checkStopped fails the test if a process the bench reported starting is
// still alive.
func checkStopped(t *testing.T, progress string) {
	t.Helper()
	pids := regexp.MustCompile(`pids \[([0-9 ]+)\]`).FindAllStringSubmatch(progress, -1)
	if len(pids) == 0 {
		t.Fatalf("progress names no pids:\n%s", progress)
	}
	for _, m := range pids {
		for _, f := range strings.Fields(m[1]) {
			pid, _ := strconv.Atoi(f)
			if _, err := os.Stat("/proc/" + f); err == nil {
				if b, _ := os.ReadFile("/proc/" + f + "/cmdline"); bytes.Contains(b, []byte("heureka")) || bytes.Contains(b, []byte("etcd")) {
					t.Errorf("process %d is still running after heureka bench exited: %q", pid, b)
				}
			}
		}
	}
}

// TestBenchCommand_LocalTiny runs the whole workload against a local
// 3-node heureka cluster at a tiny size (etcd disabled) and checks that
// every workload row is printed with a figure, that progress was shown,
// that every process was stopped, and that --compare reads the JSON back.
func TestBenchCommand_LocalTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "tiny.json")
	stdout, stderr, took := runBench(t, 2*time.Minute, "--local", "3", "--instances", "200", "--duration", "1s",
		"--samples", "30", "--crash-instances", "20", "--etcd", "none", "--tmp", dir, "--json-out", jsonPath,
		"--idle", "1s", "--idle-settle", "1s")
	t.Logf("heureka bench took %s\n%s", took.Round(time.Millisecond), stdout)
	if took > 60*time.Second {
		t.Errorf("tiny run took %s, want under 60 s", took)
	}
	var p bench.Params
	p.Instances, p.Writers, p.Renewers, p.FullReaders, p.Readers, p.CrashInstances = 200, 64, 64, 8, 32, 20
	p.Duration = time.Second
	for _, row := range bench.Rows {
		if row.ID == bench.RowRenewSoak {
			continue // not asked for, not in the table
		}
		title := row.Title(p)
		var line string
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(l, "| "+title+" |") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("no row %q in the table", title)
			continue
		}
		heureka := strings.TrimSpace(strings.Split(line, "|")[2])
		if heureka == "" || strings.Contains(heureka, "failed") || strings.Contains(heureka, "not run") || strings.Contains(heureka, "errors") {
			t.Errorf("row %s: heureka cell %q", row.ID, heureka)
		}
		if row.Kind == bench.KindLatency && strings.Contains(heureka, "no sample") {
			t.Errorf("row %s: no samples", row.ID)
		}
	}
	if !strings.Contains(stdout, "ms of CPU a second over the 3 nodes") {
		t.Errorf("W1 lacks the CPU at rest asked for with --idle:\n%s", stdout)
	}
	if !strings.Contains(stdout, "not run (disabled") {
		t.Errorf("the etcd column should say it was disabled:\n%s", stdout)
	}
	for _, want := range []string{"[heureka] W1 register", "[heureka] W8 crash detection", "[limit] W3 limit", "stopping the local cluster"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	checkStopped(t, stderr)

	var rep bench.Report
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if h := rep.System(bench.ColumnHeureka); h == nil || h.Rows[bench.RowRegister].Count != 200 {
		t.Fatalf("JSON report: heureka W1 %+v", h)
	}
	growth, _, _ := runBench(t, 30*time.Second, "--compare", jsonPath+","+jsonPath)
	if !strings.Contains(growth, "| W1 register |") || !strings.Contains(growth, "(×1.00)") {
		t.Errorf("--compare output:\n%s", growth)
	}
}

// TestBenchCommand_SummaryTiny runs `heureka bench --summary` at one tiny
// size (heureka and the limit only; several sizes are TestSummaryTable's)
// against a page with text around the markers: the table lands between
// them with its date, commit and command, every column not run says why,
// the rest of the page is unchanged, and --summary-from writes the same
// table from the kept report.
func TestBenchCommand_SummaryTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "PAGE.md")
	before := "# Page\n\nHand-written intro.\n\n" + bench.SummaryBegin + "\nold table\n"
	after := bench.SummaryEnd + "\n\n## Topic\n\nHand-written rest.\n"
	if err := os.WriteFile(page, []byte(before+after), 0o644); err != nil {
		t.Fatal(err)
	}
	reports := filepath.Join(dir, "reports")
	_, stderr, _ := runBench(t, 2*time.Minute, "--summary", page, "--summary-sizes", "150", "--etcd", "none",
		"--eureka-server", "none", "--duration", "300ms", "--samples", "10", "--crash-instances", "5",
		"--tmp", dir, "--json-out", reports)
	checkStopped(t, stderr)
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	begin := strings.Index(got, bench.SummaryBegin)
	end := strings.Index(got, bench.SummaryEnd)
	if !strings.HasPrefix(got, strings.TrimSuffix(before, "old table\n")) || !strings.HasSuffix(got, after) || begin < 0 || end < begin {
		t.Fatalf("the page outside the markers changed:\n%s", got)
	}
	table := got[begin+len(bench.SummaryBegin) : end]
	for _, re := range []string{`Measured 20\d\d-\d\d-\d\d \d\d:\d\d UTC from commit `, "with `heureka bench --summary ",
		`(?m)^\| 150 \| heureka \| [0-9,]+/s \|`, `(?m)^\|  \| limit \|  \| [0-9,]+/s \(×`,
		`etcd: not run \(disabled`} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("summary lacks %s:\n%s", re, table)
		}
	}
	if strings.Contains(table, "old table") {
		t.Errorf("the old table is still there:\n%s", table)
	}
	again, _, _ := runBench(t, 30*time.Second, "--summary", page, "--summary-from", filepath.Join(reports, "150.json"))
	if strings.TrimSpace(again) != strings.TrimSpace(table) {
		t.Errorf("--summary-from wrote another table:\n%s\nwant:\n%s", again, table)
	}
}

// TestBenchCommand_ScaleTiny runs `heureka bench --scale` at two tiny
// sizes: the table lands between the page's bench-scale markers (the
// summary's markers on the same page are left alone), with a row per size,
// heureka and the limit only, and each size's instances spread 20 to an
// application.
func TestBenchCommand_ScaleTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3-node clusters")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "PAGE.md")
	summary := bench.SummaryBegin + "\nthe summary, untouched\n" + bench.SummaryEnd + "\n"
	begin, end := bench.ScaleBeginPrefix+" -->", bench.ScaleEndPrefix+" -->"
	if err := os.WriteFile(page, []byte("# Page\n\n"+summary+"\n"+begin+"\nold\n"+end+"\nrest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reports := filepath.Join(dir, "reports")
	_, stderr, _ := runBench(t, 3*time.Minute, "--scale", page, "--summary-sizes", "100,200", "--duration", "300ms",
		"--samples", "10", "--crash-instances", "5", "--renew-soak", "2s", "--tmp", dir, "--json-out", reports)
	checkStopped(t, stderr)
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.Contains(got, summary) || !strings.HasSuffix(got, end+"\nrest\n") {
		t.Fatalf("the page outside the scale markers changed:\n%s", got)
	}
	table := got[strings.Index(got, begin)+len(begin) : strings.Index(got, end)]
	for _, re := range []string{"with `heureka bench --scale ", `(?m)^\| 100 \| heureka \| [0-9,]+/s \|`,
		`(?m)^\| 200 \| heureka \| [0-9,]+/s \| [0-9,]+/s \| [0-9,]+/s \|`, `(?m)^\|  \| limit \|  \| [0-9,.]+/s \(×[0-9.]+\) \| [0-9,.]+/s \(×`,
		`\| renew \| renew, sustained \|`} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("scale table lacks %s:\n%s", re, table)
		}
	}
	if strings.Contains(table, "old") || strings.Contains(table, "| etcd |") || strings.Contains(table, "| eureka-server |") {
		t.Errorf("the scale table has the old text or a column it should not run:\n%s", table)
	}
	for _, n := range []int{100, 200} {
		raw, err := os.ReadFile(filepath.Join(reports, strconv.Itoa(n)+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep bench.Report
		if err := json.Unmarshal(raw, &rep); err != nil {
			t.Fatal(err)
		}
		// --renew-soak applies to every size when given.
		// The scale table's fleet declares bench.ScaleRenewalSecs.
		if m := rep.System(bench.ColumnHeureka).Rows[bench.RowRenewSoak]; m.PerSec <= 0 || !strings.Contains(m.Note, "0 evicted; the leader held "+strconv.Itoa(n)+" instances at every poll") ||
			!strings.Contains(m.Note, fmt.Sprintf("renewal interval %d s)", bench.ScaleRenewalSecs)) {
			t.Errorf("%d instances: sustained renewals %+v", n, m)
		}
		if rep.Params.Instances != n || rep.Params.Apps != n/bench.ScaleInstancesPerApp {
			t.Errorf("%d instances: report says %d instances in %d apps, want %d apps", n, rep.Params.Instances, rep.Params.Apps, n/bench.ScaleInstancesPerApp)
		}
	}
}

// TestBenchCommand_EtcdTiny runs the etcd column alone at a tiny size; it
// is skipped where etcd is not installed (apt-get install etcd-server).
func TestBenchCommand_EtcdTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		if os.Getenv("HEUREKA_REQUIRE_TOOLS") == "1" {
			t.Fatal("etcd is not installed, and make test requires it (make deps installs Debian's etcd-server)")
		}
		t.Skip("etcd not installed (apt-get install etcd-server; make deps does it)")
	}
	dir := t.TempDir()
	stdout, stderr, took := runBenchBin(t, etcdClientBinary(t), 2*time.Minute, "--etcd", "local", "--instances", "200", "--duration", "1s",
		"--samples", "30", "--crash-instances", "20", "--tmp", dir)
	t.Logf("heureka bench took %s\n%s", took.Round(time.Millisecond), stdout)
	for _, want := range []string{"not run (no target", "N/A (no delta read", "lease TTL 2 s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "failed") || strings.Contains(stdout, "errors") {
		t.Errorf("a cell failed:\n%s", stdout)
	}
	checkStopped(t, stderr)
}

// etcdClientBinary builds heureka with the etcd client (build tag
// etcdclient), which the default build leaves out.
func etcdClientBinary(t *testing.T) string {
	t.Helper()
	bin, err := launch.Build(t.TempDir(), "heureka-etcdclient", "etcdclient")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestBenchCommand_EtcdNeedsTheTag checks that the default build refuses the
// etcd column with a pointer to the build that has it.
func TestBenchCommand_EtcdNeedsTheTag(t *testing.T) {
	out, err := exec.Command(e2e.Binary(t), "bench", "--etcd", "local").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "-tags etcdclient") {
		t.Errorf("heureka bench --etcd local: %v, want exit code 2 naming -tags etcdclient; output:\n%s", err, out)
	}
}

func TestBenchCommand_BadFlags(t *testing.T) {
	bin := e2e.Binary(t)
	for _, args := range [][]string{{"bench", "--etcd", "maybe"}, {"bench", "--local", "3", "--targets", "http://x"}, {"bench", "--nope"}} {
		err := exec.Command(bin, args...).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("heureka %s: %v, want exit code 2", strings.Join(args, " "), err)
		}
	}
}
