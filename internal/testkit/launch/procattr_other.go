//go:build !linux

package launch

import "syscall"

// SysProcAttr has nothing to add outside Linux.
func SysProcAttr() *syscall.SysProcAttr { return nil }
