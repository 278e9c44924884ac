package launch

import (
	"net"
	"os"
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
		// 21700–21899 is the container tests' fixed block (e2e/compose).
		if p < portLow || p >= portHigh || (p >= 21700 && p < 21900) || seen[addr] {
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

// TestEurekaServerArgv checks the command line a peer gets: JVM options
// before -jar, the address, the empty-registry wait off, the host name only
// when Named, the peers as one defaultZone, and the extra properties last
// (Spring takes the last of a repeated property).
func TestEurekaServerArgv(t *testing.T) {
	es := EurekaServer{Jar: "es.jar", JVMArgs: []string{"-Xmx1g"}, Host: "127.0.0.2", Port: "20001",
		Peers: []string{"http://127.0.0.1:20000/eureka/", "http://127.0.0.3:20002/eureka/"}, Properties: []string{"--x=1"}}
	want := "-Xmx1g -jar es.jar --server.port=20001 --server.address=127.0.0.2 " + NoEmptyRegistryWait +
		" --eureka.client.service-url.defaultZone=http://127.0.0.1:20000/eureka/,http://127.0.0.3:20002/eureka/ --x=1"
	if got := strings.Join(es.Argv(), " "); got != want {
		t.Errorf("Argv:\n got %s\nwant %s", got, want)
	}
	es.Named, es.Peers = true, nil
	if got := strings.Join(es.Argv(), " "); !strings.Contains(got, " --eureka.instance.hostname=127.0.0.2 --eureka.instance.ip-address=127.0.0.2 --x=1") ||
		strings.Contains(got, "defaultZone") {
		t.Errorf("Argv, named without peers: %s", got)
	}
	if es.URL() != "http://127.0.0.2:20001" {
		t.Errorf("URL = %s", es.URL())
	}
}

// TestWaitEurekaServerStopsWhenTheProcessExits checks that the wait gives
// up at once, naming the last error, when the process is gone.
func TestWaitEurekaServerStopsWhenTheProcessExits(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = WaitEurekaServer(t.Context(), "http://"+addr, time.Minute, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "exited before it served") || time.Since(start) > 10*time.Second {
		t.Fatalf("WaitEurekaServer = %v after %v, want an early 'exited' error", err, time.Since(start))
	}
}

// TestPortHeldElsewhereIsSkipped: a port whose lock file another process
// holds is not handed out, and is once it lets go. A second open file
// stands for the other process: flock locks conflict between open files,
// in one process as in two.
func TestPortHeldElsewhereIsSkipped(t *testing.T) {
	var port int
	var other *os.File
	for p := portHigh - 1; other == nil && p > portHigh-100; p-- {
		if lock, ok := lockPort(p); ok {
			if lock == nil {
				t.Fatalf("no lock file could be made under %s", os.TempDir())
			}
			port, other = p, lock
		}
	}
	if other == nil {
		t.Fatal("every one of 99 ports held by other processes")
	}
	if lock, ok := lockPort(port); ok {
		lock.Close()
		other.Close()
		t.Fatalf("port %d handed out while another holds its lock", port)
	}
	other.Close()
	lock, ok := lockPort(port)
	if !ok || lock == nil {
		t.Fatalf("port %d not handed out after the other let go", port)
	}
	lock.Close()
}
