package e2e

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// springApp is the Spring client app (e2e/springclient) as a test runs it
// on 127.0.0.1: its process, its base URL and the last GET /state read.
type springApp struct {
	*Proc
	t    *testing.T
	base string
	last springState
}

// startSpringApp starts jar (the Spring client's) with the small-machine
// JVM options on a free loopback port, with props (--name=value Spring
// properties) added, and names its log if the test fails.
func startSpringApp(t *testing.T, name, java, jar string, props ...string) *springApp {
	t.Helper()
	addr := FreeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	args := append(slices.Clone(jvmArgs), "-jar", jar,
		"--server.port="+port, "--server.address=127.0.0.1", "--spring.main.banner-mode=off")
	a := &springApp{Proc: StartProc(t, name, exec.Command(java, append(args, props...)...)), t: t, base: "http://" + addr}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("spring client log: %s", a.LogPath)
		}
	})
	return a
}

// state reads GET /state; on an error it returns the last state read.
func (a *springApp) state() springState {
	if s, err := springStateOf(a.base); err == nil {
		a.last = s
	}
	return a.last
}

// failf ends the test with the message, the last state read and the tail
// of the app's log.
func (a *springApp) failf(format string, args ...any) {
	a.t.Helper()
	a.t.Fatalf(format+"\nstate: %+v\nclient log tail:\n%s", append(args, a.last, a.Tail(40))...)
}
