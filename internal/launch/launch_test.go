package launch

import (
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFreeAddrBelowEphemeralAndNeverTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		if p < portLow || p >= portHigh || seen[addr] {
			t.Fatalf("FreeAddr gave %s (seen before: %v)", addr, seen[addr])
		}
		seen[addr] = true
	}
}

func TestEnvDropsPrefixes(t *testing.T) {
	t.Setenv("HEUREKA_LAUNCH_TEST", "x")
	env := Env([]string{"EXTRA=1"}, "HEUREKA_")
	for _, kv := range env {
		if strings.HasPrefix(kv, "HEUREKA_") {
			t.Fatalf("Env kept %s", kv)
		}
	}
	if env[len(env)-1] != "EXTRA=1" {
		t.Fatalf("Env did not append the extra variable: %v", env[len(env)-1])
	}
}

// TestProcStopsByPIDAndStartsAgain: a child that ignores nothing exits on
// SIGTERM, its output lands in the log (both runs, appended), and a Proc
// starts again with the same arguments.
func TestProcStopsByPIDAndStartsAgain(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh: %v", err)
	}
	logPath := filepath.Join(t.TempDir(), "p.log")
	lines := make(chan string, 4)
	p := &Proc{Name: "p", LogPath: logPath, Bin: sh, Argv: []string{"-c", "echo hello; exec sleep 30"},
		OnLine: func(l string) { lines <- l }}
	for run := 1; run <= 2; run++ {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if p.PID() <= 0 || !p.Running() {
			t.Fatalf("run %d: pid %d, running %v", run, p.PID(), p.Running())
		}
		if err := p.Start(); err == nil {
			t.Fatalf("run %d: a second Start of a running process succeeded", run)
		}
		select {
		case l := <-lines:
			if l != "hello" {
				t.Fatalf("run %d: OnLine saw %q", run, l)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: no output line", run)
		}
		if _, killed := p.Stop(10 * time.Second); killed || p.Running() {
			t.Fatalf("run %d: SIGTERM did not end the process (killed %v)", run, killed)
		}
	}
	if log := p.LogTail(10); strings.Count(log, "\nhello") != 2 || !strings.Contains(log, "run 2 of p") {
		t.Fatalf("log:\n%s", log)
	}
}
