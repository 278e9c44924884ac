package launch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Build compiles this module's ./cmd/heureka into dir/name with the given
// build tags and returns the binary's path. It must run inside the module
// (as tests do): it asks `go env GOMOD` where the module is.
func Build(dir, name string, tags ...string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module (go env GOMOD is empty)")
	}
	bin := filepath.Join(dir, name)
	args := []string{"build"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "-o", bin, "github.com/heureka-registry/heureka/cmd/heureka")
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

var (
	portMu sync.Mutex
	// usedPort holds every address this process handed out, with the file
	// whose lock keeps the port from other processes (nil where no lock
	// file could be made). Kept referenced, the files stay open, and so
	// locked, for the life of the process.
	usedPort = map[string]*os.File{}
)

// Ports come from below Linux's ephemeral range (32768–60999): a port picked
// there may be taken by some outgoing connection's local end while its node
// is down, and a node that restarts must bind the same port again. Ports
// below portLow are for fixed assignments: the container tests publish their
// projects on 21700–21899, and a random port of a test running beside them
// in another package must not take one of those first.
const (
	portLow  = 22000
	portHigh = 32000
)

// portLockDir is the directory, under the system's temporary directory,
// where FreeAddr keeps a lock file for every port it hands out.
const portLockDir = "heureka-test-ports"

// FreeAddr returns a loopback address "127.0.0.1:P" with P in [22000, 32000)
// that was free a moment ago: it picks a random port, checks it by listening
// on it, and closes the listener. A port is never handed out twice on one
// machine while the process that got it runs: besides its own record, each
// process holds a lock on a file for each of its ports (portLockDir), and
// skips ports another process holds. Without that, a port whose node a test
// had stopped looked free to a test of another package running beside it,
// which took it (the node could not start again) or probed it while the
// first test watched it.
func FreeAddr() (string, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		port := portLow + rand.IntN(portHigh-portLow)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if _, used := usedPort[addr]; used {
			continue
		}
		lock, ok := lockPort(port)
		if !ok {
			continue // another process's
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if lock != nil {
				lock.Close()
			}
			continue // taken: try another
		}
		l.Close()
		usedPort[addr] = lock
		return addr, nil
	}
	return "", errors.New("no free loopback port found below the ephemeral range")
}

// lockPort takes a lock on port's file and returns the file, which holds
// the lock until closed; ok is false when another process holds it. Where
// no lock file can be made, the listen check alone decides (nil, true).
func lockPort(port int) (lock *os.File, ok bool) {
	dir := filepath.Join(os.TempDir(), portLockDir)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, !errors.Is(err, syscall.EWOULDBLOCK)
	}
	return f, true
}
