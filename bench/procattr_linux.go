package bench

import "syscall"

// sysProcAttr makes the kernel SIGKILL a child if the bench dies without
// stopping it, so no node outlives `heureka bench`.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
