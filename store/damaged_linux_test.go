package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// noPanic turns a panic into an error, and so a fault in a memory map of a
// file cut short under it, which would otherwise kill the process.
func TestNoPanic_FaultInMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mapped")
	if err := os.WriteFile(path, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, 8192, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var b byte
	err = noPanic("read", func() error { b = m[4096]; return nil })
	if !errors.Is(err, errPanicked) {
		t.Fatalf("read past the end of a mapped file: %v (byte %d), want errPanicked", err, b)
	}
	var nilMap map[string]int
	if err := noPanic("write", func() error { nilMap["x"] = 1; return nil }); !errors.Is(err, errPanicked) {
		t.Fatalf("panic: %v, want errPanicked", err)
	}
}

// BenchmarkOpenCheck is what the check of the log adds to a start, on a
// log of BENCH_LOG_ENTRIES entries (default 60,000: the threshold plus the
// trailing entries of a 200,000-instance node) of BENCH_LOG_ENTRY_BYTES
// (default 2 KiB): check is CheckLogFile alone, bolt what opening bolt
// costs anyway (its own walk of the file), open the whole Open. The cold
// variants first drop the file from the page cache (posix_fadvise), as
// after a machine's restart.
func BenchmarkOpenCheck(b *testing.B) {
	entries, size := envInt(b, "BENCH_LOG_ENTRIES", 60000), envInt(b, "BENCH_LOG_ENTRY_BYTES", 2048)
	dir := b.TempDir()
	s, err := Open(DefaultConfig(dir), nil)
	if err != nil {
		b.Fatal(err)
	}
	storeEntries(b, s, 1, uint64(entries), func(i uint64) []byte { return bytes.Repeat(entryData(i)[:8], size/8) })
	s.Close()
	path := filepath.Join(dir, LogFile)
	b.Logf("log of %d entries of %d bytes: %d MiB", entries, size, fileSize(b, path)>>20)
	dropCache := func(b *testing.B) {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			b.Skipf("fadvise: %v", err)
		}
	}
	run := map[string]func(b *testing.B){
		"check": func(b *testing.B) {
			if _, err := CheckLogFile(path); err != nil {
				b.Fatal(err)
			}
		},
		"bolt": func(b *testing.B) {
			db, err := raftboltdb.New(raftboltdb.Options{Path: path,
				BoltOptions: &bbolt.Options{NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}})
			if err != nil {
				b.Fatal(err)
			}
			db.Close()
		},
		"open": func(b *testing.B) {
			s, err := Open(DefaultConfig(dir), nil)
			if err != nil {
				b.Fatal(err)
			}
			s.Close()
		},
	}
	for _, name := range []string{"check", "bolt", "open"} {
		for _, cold := range []bool{false, true} {
			label := name
			if cold {
				label += "/cold"
			}
			b.Run(label, func(b *testing.B) {
				for b.Loop() {
					if cold {
						b.StopTimer()
						dropCache(b)
						b.StartTimer()
					}
					run[name](b)
				}
			})
		}
	}
}

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return n
	}
	return def
}
