//go:build linux

package compose

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// dialInNetns opens a TCP connection to addr from inside the network
// namespace of process pid (a container's): the way to reach a container
// that docker network disconnect cut off from the host. The socket is
// created while this thread sits in that namespace and keeps it after the
// thread returns to its own. Needs root.
func dialInNetns(ctx context.Context, pid int, addr string) (net.Conn, error) {
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("open netns of pid %d: %w", pid, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("open own netns: %w", err)
	}
	defer self.Close()
	if err := setns(target); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	var d net.Dialer
	conn, dialErr := d.DialContext(ctx, "tcp", addr)
	if err := setns(self); err != nil {
		// The thread is stuck in the container's namespace: it stays
		// locked, so Go ends it with this goroutine instead of reusing it.
		if conn != nil {
			conn.Close()
		}
		return nil, fmt.Errorf("return from the container's netns: %w", err)
	}
	runtime.UnlockOSThread()
	return conn, dialErr
}

func setns(f *os.File) error {
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns: %w", err)
	}
	return nil
}
