package e2e

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// Proc is an external client process (a JVM, a Python interpreter) a test
// drives: a launch.Proc whose output is kept in a log file and in memory,
// stopped by its PID (SIGTERM, then SIGKILL after a grace period) when the
// test ends.
type Proc struct {
	*launch.Proc

	mu    sync.Mutex
	lines []string
}

// StartProc starts cmd (built by exec.Command; only its program, arguments
// and environment are used) with its stdout and stderr collected line by line.
func StartProc(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	if cmd.Err != nil {
		t.Fatalf("%s: %v", name, cmd.Err)
	}
	p := &Proc{}
	p.Proc = &launch.Proc{Name: name, LogPath: filepath.Join(t.TempDir(), name+".log"),
		Bin: cmd.Path, Argv: cmd.Args[1:], Env: cmd.Env, OnLine: p.add}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return p
}

func (p *Proc) add(line string) {
	p.mu.Lock()
	p.lines = append(p.lines, line)
	p.mu.Unlock()
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
	_, killed := p.Proc.Stop(grace)
	return !killed
}

// newRawRequest builds a request without the defaults TryDo adds (no
// Accept, no Content-Type).
func newRawRequest(method, url, body string) (*http.Request, error) {
	return http.NewRequest(method, url, strings.NewReader(body))
}
