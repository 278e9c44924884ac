package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process and its restarts. Set the exported fields
// before Start; they are read again by every Start.
type Proc struct {
	// Name labels the process in errors and in its log.
	Name string
	// LogPath is the file stdout and stderr of every run are appended to.
	LogPath string
	// Bin is the program, Argv its arguments (without the program name).
	Bin  string
	Argv []string
	// Env is the process's environment; nil inherits the parent's.
	Env []string
	// OnLine, if set, is called with every output line as well (from one
	// goroutine per run), for callers that watch what a process prints.
	OnLine func(line string)

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current run has exited
	exit   int           // exit code of the last run (-1 when killed by a signal)
	paused bool
	runs   int
}

// StartProc starts bin with argv and env (nil: inherited), its output
// appended to logPath.
func StartProc(name, bin string, argv, env []string, logPath string) (*Proc, error) {
	p := &Proc{Name: name, LogPath: logPath, Bin: bin, Argv: argv, Env: env}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Start launches the process (again, if it ran before). It fails if the
// process is running.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("%s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	if err := os.MkdirAll(filepath.Dir(p.LogPath), 0o755); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.runs++
	fmt.Fprintf(logf, "==== run %d of %s at %s: %s %s\n", p.runs, p.Name,
		time.Now().Format(time.RFC3339Nano), p.Bin, strings.Join(p.Argv, " "))
	cmd := exec.Command(p.Bin, p.Argv...)
	cmd.Env = p.Env
	cmd.SysProcAttr = SysProcAttr()
	var out io.ReadCloser
	if p.OnLine != nil {
		if out, err = cmd.StdoutPipe(); err != nil {
			logf.Close()
			return fmt.Errorf("start %s: %w", p.Name, err)
		}
		cmd.Stderr = cmd.Stdout
	} else {
		cmd.Stdout, cmd.Stderr = logf, logf
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.paused = cmd, done, false
	go func(onLine func(string)) {
		if out != nil {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 4<<20)
			for sc.Scan() {
				fmt.Fprintln(logf, sc.Text())
				onLine(sc.Text())
			}
		}
		_ = cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.exit = cmd.ProcessState.ExitCode()
		p.mu.Unlock()
		close(done)
	}(p.OnLine)
	return nil
}

// PID is the process id of the current (or last) run, 0 if none.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process has been started and not yet exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.done)
}

// Paused reports whether the process is stopped with SIGSTOP.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// ExitCode is the exit code of the last run that exited (-1 when it was
// killed by a signal).
func (p *Proc) ExitCode() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Done returns a channel closed when the current run exits.
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Signal sends sig to the running process's PID.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.done) {
		return errors.New("not running")
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}

// Kill sends SIGKILL and waits until the process has exited.
func (p *Proc) Kill() {
	if p.Signal(syscall.SIGKILL) == nil {
		<-p.Done()
	}
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// Stop sends SIGTERM (resuming a paused process first), waits up to grace
// for the process to exit, then sends SIGKILL. It returns the exit code and
// whether the process had to be killed.
func (p *Proc) Stop(grace time.Duration) (code int, killed bool) {
	if !p.Running() {
		return p.ExitCode(), false
	}
	if p.Paused() {
		p.Resume()
	}
	done := p.Done()
	if p.Signal(syscall.SIGTERM) != nil {
		<-done
		return p.ExitCode(), false
	}
	select {
	case <-done:
		return p.ExitCode(), false
	case <-time.After(grace):
		p.Kill()
		return p.ExitCode(), true
	}
}

// Pause stops the process with SIGSTOP; it keeps its sockets but answers nothing.
func (p *Proc) Pause() {
	if p.Signal(syscall.SIGSTOP) == nil {
		p.mu.Lock()
		p.paused = true
		p.mu.Unlock()
	}
}

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() {
	_ = p.Signal(syscall.SIGCONT)
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// LogTail returns the last n lines of the process's log.
func (p *Proc) LogTail(n int) string { return TailFile(p.LogPath, n) }

// Env is the current environment without the variables whose names start
// with one of drop, plus extra (KEY=value): a child's settings are then only
// what its caller gives it.
func Env(extra []string, drop ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !hasAnyPrefix(kv, drop) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// CopyFile copies the file src to dst, created with perm or truncated.
func CopyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TailFile returns the last n lines of the file at path.
func TailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	ring := make([]string, 0, n)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if len(ring) == n {
			ring = ring[1:]
		}
		ring = append(ring, sc.Text())
	}
	return strings.Join(ring, "\n")
}

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
