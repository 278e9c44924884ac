package store

import "syscall"

// dropPages tells the kernel the process no longer needs the resident
// pages of [addr, addr+n), a read-only shared file mapping: they leave the
// process's page tables and are read from the file again when next used.
func dropPages(addr, n uintptr) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, addr, n, syscall.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}
