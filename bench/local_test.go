package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/runtime/memlimit"
	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

func TestProcReaders_OwnProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if rss := RSS(os.Getpid()); rss <= 0 {
		t.Fatalf("RSS of this process = %d", rss)
	}
	if RSS(-1) != -1 || cpuSeconds(nil) != -1 || cpuSeconds([]int{0}) != -1 {
		t.Fatal("unknown processes must read as -1")
	}
	m := newCPUMeter([]int{os.Getpid()})
	// Spin until this process has used 0.1 CPU-seconds (by /proc) rather
	// than for a wall-clock time: on a loaded machine 200 ms of wall time
	// may hold far less CPU.
	m.measure(func() {
		start, deadline := cpuSeconds([]int{os.Getpid()}), time.Now().Add(30*time.Second)
		for x := 0; cpuSeconds([]int{os.Getpid()})-start < 0.1 && time.Now().Before(deadline); x++ {
			for i := 0; i < 1e5; i++ {
				x = x*31 + i
			}
		}
	})
	if m.seconds < 0.05 || m.seconds > 30 {
		t.Fatalf("a busy loop of 0.1 CPU-seconds measured as %.3f CPU-seconds", m.seconds)
	}
	if got := m.perOp(10); got < 5*time.Millisecond {
		t.Fatalf("perOp(10) = %s", got)
	}
	// The busy loop ran in the bench's own process, the driver's place.
	driver, busy := m.machine(10)
	if driver < 5*time.Millisecond || busy <= 0 || busy > 1 {
		t.Fatalf("machine(10) = driver %s a write, machine %.3f busy; want about 10 ms, and a fraction", driver, busy)
	}
	if st := m.stolenShare(); st < 0 || st > busy {
		t.Fatalf("stolen share %.3f of a phase %.3f busy: steal is part of busy time", st, busy)
	}
	if d, b := (&cpuMeter{}).machine(10); d != 0 || b != 0 {
		t.Fatal("a meter that measured nothing must report no machine figures")
	}
	if newCPUMeter(nil).perOp(10) != 0 {
		t.Fatal("a meter without processes must report 0")
	}
}

// TestSettle_WaitsUntilTheNodesAreQuiet: settle returns for an idle
// process after a quiet second, the idle return of its heap and another
// quiet second, and for processes spinning on the cores only once they
// stopped (after 3 s here) and the idle return passed.
func TestSettle_WaitsUntilTheNodesAreQuiet(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	start := func(script string) *exec.Cmd {
		t.Helper()
		c := exec.Command("sh", "-c", script)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}
	settleFor := func(pids ...int) time.Duration {
		r := &heurekaRun{s: &Suite{}, t: &HeurekaTarget{PIDs: pids}}
		began := time.Now()
		r.settle(context.Background(), RowRenewSoak)
		return time.Since(began)
	}
	// An idle process settles after a quiet second, the idle return of
	// its heap (2 s for any heap this small) and another quiet second.
	idle := start("exec sleep 60")
	returnAfter := memlimit.IdleReturnAfter(uint64(RSS(idle.Process.Pid)))
	if took := settleFor(idle.Process.Pid); took < returnAfter || took > returnAfter+4*time.Second {
		t.Fatalf("an idle process took %s to settle, its idle return %s", took, returnAfter)
	}
	// Three spinners, as three nodes, so that even on a loaded machine
	// they get more than quietCPU between them.
	var pids []int
	for range 3 {
		busy := start("while :; do :; done")
		pids = append(pids, busy.Process.Pid)
		time.AfterFunc(3*time.Second, func() { _ = busy.Process.Kill() })
	}
	// A killed child stays a zombie until reaped, and a zombie uses no CPU.
	if took := settleFor(pids...); took < 3*time.Second+returnAfter || took > 25*time.Second {
		t.Fatalf("processes spinning for 3 s settled after %s", took)
	}
}

// TestLocal_KeepLogs: a local cluster's logs are copied out under the
// cluster directory's name before Stop removes the directory, so two
// clusters of one run keep both, and what a process wrote up to its stop
// is in the copy.
func TestLocal_KeepLogs(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "logs")
	cluster := func(name, said string) *Local {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		l := &Local{dir: dir}
		for _, n := range []string{"n1", "n2"} {
			p := &launch.Proc{Name: n, LogPath: filepath.Join(dir, n+".log")}
			if err := os.WriteFile(p.LogPath, []byte(said+" "+n+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			l.Procs = append(l.Procs, p)
		}
		return l
	}
	for _, c := range []struct{ name, said string }{{"heureka-bench-1", "first"}, {"heureka-bench-2", "second"}} {
		l := cluster(c.name, c.said)
		kept, err := l.KeepLogs(keep)
		if err != nil {
			t.Fatal(err)
		}
		l.Stop()
		if len(kept) != 2 {
			t.Fatalf("kept %v, want one file a process", kept)
		}
		if _, err := os.Stat(l.dir); !os.IsNotExist(err) {
			t.Fatalf("Stop left the cluster directory: %v", err)
		}
	}
	for _, want := range []struct{ file, text string }{
		{"heureka-bench-1-n1.log", "first n1\n"}, {"heureka-bench-1-n2.log", "first n2\n"},
		{"heureka-bench-2-n1.log", "second n1\n"}, {"heureka-bench-2-n2.log", "second n2\n"},
	} {
		got, err := os.ReadFile(filepath.Join(keep, want.file))
		if err != nil || string(got) != want.text {
			t.Fatalf("%s = %q, %v; want %q", want.file, got, err, want.text)
		}
	}
	// A process whose log is gone is reported, not skipped in silence.
	l := cluster("heureka-bench-3", "third")
	if err := os.Remove(l.Procs[1].LogPath); err != nil {
		t.Fatal(err)
	}
	if _, err := l.KeepLogs(keep); err == nil || !strings.Contains(err.Error(), "n2") {
		t.Fatalf("a missing log: err = %v, want one naming n2", err)
	}
	l.Stop()
}
