package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// An interrupted lab stops where it is: it does not go on to play the
// remaining phases and modes, prints no report and exits non-zero.
func TestLab_InterruptStopsTheRun(t *testing.T) {
	bin, err := launch.Build(t.TempDir(), "heureka")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "lab", "--phase", "2s", "--modes", "ap,cp")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	var stderr strings.Builder
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
wait:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the lab ended before its first fault:\n%s", stderr.String())
			}
			stderr.WriteString(line + "\n")
			if strings.Contains(line, "[ap] partitioning") {
				break wait
			}
		case <-timeout:
			t.Fatalf("no fault within a minute:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for line := range lines {
		stderr.WriteString(line + "\n")
	}
	_ = cmd.Wait()
	took := time.Since(start)
	if code := cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("the interrupted lab exited 0 with a report:\n%s", stdout.String())
	}
	if strings.Contains(stderr.String(), "[cp] starting") || strings.Contains(stderr.String(), "[ap] healing") {
		t.Errorf("the interrupted lab went on playing:\n%s", stderr.String())
	}
	if took > 30*time.Second {
		t.Errorf("the interrupted lab took %v to stop", took)
	}
}

// A fault length that is not positive is a usage error, not five seconds.
func TestLab_PhaseMustBePositive(t *testing.T) {
	for _, phase := range []string{"-1s", "0s"} {
		if code := runLab([]string{"--modes", "ap", "--phase", phase}); code != 2 {
			t.Errorf("--phase %s: exit %d, want 2", phase, code)
		}
	}
}
