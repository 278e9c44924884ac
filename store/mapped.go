package store

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// mappedLog is the bolt store behind a lock that lets it give back the
// pages of its memory map after the front of the log is cut.
//
// bolt reads through a read-only shared mapping of the whole file, and
// every page it has read stays mapped, counted in the node's resident
// memory (as file-backed pages), until the mapping goes. Cutting the log
// after a snapshot reads every page it frees, so after a registration burst
// the mapping holds the whole log the burst wrote: about 100 MiB per node
// at 50,000 instances, 190-270 MiB at 200,000, for pages that are free. Once the cut is done,
// mappedLog tells the kernel it no longer needs the mapping's pages
// (madvise MADV_DONTNEED): the page table entries go, the data stays in
// the file and the page cache, and the next read of a page maps it again.
//
// bolt moves its mapping (munmap and mmap) only inside its own calls, when
// a commit grows the file. Every call into bolt holds mu for reading and
// the release holds it for writing, so the range released is the live
// mapping of the log file and nothing else can have been mapped there.
//
// Between cuts, bolt reads back the pages it appends to, and the leader
// reads entries a lagging follower needs through the mapping (past Raft's
// cache of recent entries); those pages would stay until the next cut,
// which at 200,000 instances comes 50,000 entries or more later: the
// mapping is also released after every releaseEvery entries stored.
//
// Every call also maps pages between those releases, and a few calls map
// a lot: bolt rewrites the log's last leaf at every append, copying the
// values already in it out of the mapping, so the appends after a batch of
// renewals (hundreds of KiB) read it back; and where the page cache holds
// what one large write put there as one large folio (ext4 on Linux 6.18),
// a fault maps more than the page bolt needs, even once bolt reuses those
// pages for small leaves. One append after the renewals left 1-2.5 MiB
// mapped (TestStore_QuietLogReleasesMappedPages), until the next release:
// on a quiet node, for good. So the mapping is also released quietAfter
// the first call since the last release.
type mappedLog struct {
	mu   sync.RWMutex
	bolt *raftboltdb.BoltStore
	path string // the log file's resolved path, as /proc/self/maps names it
	log  hclog.Logger
	// stored counts the entries stored since the last release.
	stored atomic.Int64
	// quietAfter is the package's, when the log was opened.
	quietAfter time.Duration
	// pending is set while a release quietAfter a call is due.
	pending atomic.Bool
	// closed is set, under mu, once bolt is closed: a release due then
	// has nothing to do.
	closed bool
}

// quietAfter is how long after the first call into bolt since the last
// release the mapping is released again: at most one release (0.1 ms) a
// second however busy the log, and a node that goes quiet holds none of
// the log's pages a second later. A variable for the tests that check
// which pages are mapped, which take longer than that.
var quietAfter = time.Second

// releaseEvery is how many entries stored between releases of the
// mapping. bolt reads back each page it appends to, so the pages of the
// entries stored since the last release are resident: about 1 MiB of 1 KiB
// registrations, and 4-5 MiB of batched renewals at 2,048 entries. A
// release takes 0.1 ms with 512 entries of 1 KiB mapped
// (BenchmarkRelease), during which no entry is stored: 0.2 µs per entry.
const releaseEvery = 512

func newMappedLog(bolt *raftboltdb.BoltStore, path string, log hclog.Logger) *mappedLog {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return &mappedLog{bolt: bolt, path: path, log: log, quietAfter: quietAfter}
}

// FirstIndex implements raft.LogStore.
func (m *mappedLog) FirstIndex() (uint64, error) {
	defer m.enter()()
	return m.bolt.FirstIndex()
}

// LastIndex implements raft.LogStore.
func (m *mappedLog) LastIndex() (uint64, error) {
	defer m.enter()()
	return m.bolt.LastIndex()
}

// GetLog implements raft.LogStore.
func (m *mappedLog) GetLog(idx uint64, l *raft.Log) error {
	defer m.enter()()
	return m.bolt.GetLog(idx, l)
}

// StoreLog implements raft.LogStore.
func (m *mappedLog) StoreLog(l *raft.Log) error { return m.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore.
func (m *mappedLog) StoreLogs(logs []*raft.Log) error {
	exit := m.enter()
	err := m.bolt.StoreLogs(logs)
	exit()
	if err == nil && m.stored.Add(int64(len(logs))) >= releaseEvery {
		m.releaseLogged("stored", 0, 0)
	}
	return err
}

// DeleteRange implements raft.LogStore; once the range is gone, the pages
// the cut read are released from the mapping.
func (m *mappedLog) DeleteRange(lo, hi uint64) error {
	exit := m.enter()
	err := m.bolt.DeleteRange(lo, hi)
	exit()
	if err != nil {
		return err
	}
	m.releaseLogged("cut", lo, hi)
	return nil
}

// releaseLogged releases the mapping and logs the outcome: only memory is
// at stake, the log itself is intact either way.
func (m *mappedLog) releaseLogged(after string, lo, hi uint64) {
	if n, err := m.release(); err != nil {
		m.log.Warn("release the log's mapped pages", "after", after, "error", err)
	} else {
		m.log.Debug("released the log's mapped pages", "after", after, "mapped_bytes", n, "deleted_from", lo, "deleted_to", hi)
	}
}

// enter begins a call into bolt: it schedules the quiet release (used)
// and holds mu for reading until the returned exit is called.
func (m *mappedLog) enter() (exit func()) {
	m.used()
	m.mu.RLock()
	return m.mu.RUnlock
}

// used schedules a release quietAfter now unless one is due already.
func (m *mappedLog) used() {
	if m.pending.CompareAndSwap(false, true) {
		time.AfterFunc(m.quietAfter, func() {
			m.pending.Store(false)
			// Once a second: only a failure is worth a line.
			if _, err := m.release(); err != nil {
				m.log.Warn("release the log's mapped pages", "after", "quiet", "error", err)
			}
		})
	}
}

// Set implements raft.StableStore.
func (m *mappedLog) Set(k, v []byte) error {
	defer m.enter()()
	return m.bolt.Set(k, v)
}

// Get implements raft.StableStore.
func (m *mappedLog) Get(k []byte) ([]byte, error) {
	defer m.enter()()
	return m.bolt.Get(k)
}

// SetUint64 implements raft.StableStore.
func (m *mappedLog) SetUint64(k []byte, v uint64) error {
	defer m.enter()()
	return m.bolt.SetUint64(k, v)
}

// GetUint64 implements raft.StableStore.
func (m *mappedLog) GetUint64(k []byte) (uint64, error) {
	defer m.enter()()
	return m.bolt.GetUint64(k)
}

// Close closes bolt, after any release under way.
func (m *mappedLog) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return m.bolt.Close()
}

// release drops the resident pages of every mapping of the log file and
// returns the bytes mapped; no bolt call runs meanwhile.
func (m *mappedLog) release() (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stored.Store(0)
	if m.closed {
		return 0, nil
	}
	ranges, err := mappingsOf(m.path)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, r := range ranges {
		if err := dropPages(r[0], r[1]-r[0]); err != nil {
			return total, fmt.Errorf("release %x-%x: %w", r[0], r[1], err)
		}
		total += int64(r[1] - r[0])
	}
	return total, nil
}

// mappingsOf returns the address ranges [start, end) at which this process
// maps the file at path, from /proc/self/maps.
func mappingsOf(path string) ([][2]uintptr, error) {
	f, err := os.Open("/proc/self/maps")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // not Linux: nothing to release (dropPages does nothing there)
	}
	if err != nil {
		return nil, fmt.Errorf("read memory maps: %w", err)
	}
	defer f.Close()
	var out [][2]uintptr
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.SplitN(sc.Text(), " ", 6)
		if len(fields) < 6 || strings.TrimLeft(fields[5], " ") != path {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			return nil, fmt.Errorf("memory maps: bad range %q", fields[0])
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("memory maps: bad range %q", fields[0])
		}
		out = append(out, [2]uintptr{uintptr(start), uintptr(end)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read memory maps: %w", err)
	}
	return out, nil
}
