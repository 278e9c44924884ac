package e2e

import "syscall"

// sysProcAttr makes the kernel SIGKILL a node if the test process dies
// without running its cleanups (for example on a `go test -timeout` panic),
// so no heureka process outlives the test binary.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
