package launch

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	portMu   sync.Mutex
	usedPort = map[string]bool{}
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

// FreeAddr returns a loopback address "127.0.0.1:P" with P in [22000, 32000)
// that was free a moment ago: it picks a random port, checks it by listening
// on it, and closes the listener. A port is never handed out twice in one
// process.
func FreeAddr() (string, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", portLow+rand.IntN(portHigh-portLow))
		if usedPort[addr] {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: try another
		}
		l.Close()
		usedPort[addr] = true
		return addr, nil
	}
	return "", errors.New("no free loopback port found below the ephemeral range")
}
