//go:build diskfault

package store

import (
	"os"
	"syscall"
)

// FaultDiskFullEnv, in a binary built with the diskfault tag, names a file:
// while it exists, the store's writes fail with ENOSPC as on a full disk.
// The system tests use it where they cannot mount a small file system of
// their own; production builds hold none of this.
//
// What fails is what fails on a real full disk: log writes carrying
// commands, the AP fallback journal, snapshots and the disk probe. Log
// writes without data (raft's no-op and barrier entries) and the stable
// store keep working, as they do there, where bolt reuses pages it already
// holds for them (and raft panics when it cannot record its term).
const FaultDiskFullEnv = "HEUREKA_FAULT_DISK_FULL"

func init() {
	path := os.Getenv(FaultDiskFullEnv)
	if path == "" {
		return
	}
	writeFault = func(what string, n int) error {
		if n == 0 {
			return nil
		}
		if _, err := os.Stat(path); err != nil {
			return nil
		}
		return &os.PathError{Op: what, Path: path, Err: syscall.ENOSPC}
	}
}
