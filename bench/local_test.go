package bench

import (
	"os"
	"testing"
	"time"
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
	m.measure(func() {
		deadline := time.Now().Add(200 * time.Millisecond)
		for x := 0; time.Now().Before(deadline); x++ {
			_ = x * x
		}
	})
	if m.seconds < 0.05 || m.seconds > 5 {
		t.Fatalf("busy loop of 200 ms measured as %.3f CPU-seconds", m.seconds)
	}
	if got := m.perOp(10); got < 5*time.Millisecond {
		t.Fatalf("perOp(10) = %s", got)
	}
	if newCPUMeter(nil).perOp(10) != 0 {
		t.Fatal("a meter without processes must report 0")
	}
}
