package launch

import "syscall"

// SysProcAttr makes the kernel SIGKILL a child if its parent dies without
// stopping it (for example on a `go test -timeout` panic), so no process
// outlives the test binary or the tool that started it.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
