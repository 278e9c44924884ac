package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is an external client process (a JVM, a Python interpreter) a test
// drives: its output is kept in a log file and in memory, and it is stopped
// by its PID (SIGTERM, then SIGKILL after a grace period) when the test ends.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}

	mu    sync.Mutex
	lines []string
}

// StartProc starts cmd with its stdout and stderr collected line by line.
func StartProc(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, LogPath: filepath.Join(t.TempDir(), name+".log"), cmd: cmd, done: make(chan struct{})}
	logf, err := os.Create(p.LogPath)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
		}
		cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return p
}

// Lines returns a copy of the output so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// LastLine returns the last output line starting with prefix, or "".
func (p *Proc) LastLine(prefix string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(p.lines[i], prefix) {
			return p.lines[i]
		}
	}
	return ""
}

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Tail returns the last n output lines joined, for failure messages.
func (p *Proc) Tail(n int) string {
	l := p.Lines()
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// Stop sends SIGTERM, waits up to grace for a clean exit (clients cancel
// their registration then), and kills the process after that. It reports
// whether the process exited within the grace period.
func (p *Proc) Stop(grace time.Duration) bool {
	if !p.Running() {
		return true
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return false
	}
}

// newRawRequest builds a request without the defaults TryDo adds (no
// Accept, no Content-Type).
func newRawRequest(method, url, body string) (*http.Request, error) {
	return http.NewRequest(method, url, strings.NewReader(body))
}
