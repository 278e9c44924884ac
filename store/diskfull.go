package store

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// ErrDiskFull marks a write that failed, or was refused, because the disk
// holding the data directory (or the user's quota on it) is full. It is a
// retryable condition: nothing was written, and writes resume once there
// is room again (DiskWatch).
var ErrDiskFull = errors.New("disk full")

// ProbeFile is the file DiskWatch's probe writes in the data directory and
// removes again.
const ProbeFile = ".disk-probe"

// ProbeBytes is how much the probe must be able to write before a disk
// that was full counts as having room again. More than one write needs:
// a log write on a full disk fails, and Raft steps its leader down on it,
// so letting writes through with barely any room would only make the
// leader flap. A renewal batch of 100,000 instances is about 4 MiB.
const ProbeBytes = 4 << 20

// probeBlock is what the probe writes at a time.
const probeBlock = 256 << 10

// The errno texts, for errors that reach us flattened into a string: bolt
// formats a failed file resize with %s.
var diskFullTexts = []string{syscall.ENOSPC.Error(), syscall.EDQUOT.Error()}

// IsDiskFull reports whether err says the disk or the quota is full:
// ErrDiskFull, ENOSPC or EDQUOT anywhere in its chain, or the text of one
// of those errnos where a layer flattened the error into a string.
func IsDiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrDiskFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	for _, text := range diskFullTexts {
		if strings.Contains(msg, text) {
			return true
		}
	}
	return false
}

// DiskWatch records whether the data directory's disk is full. Every write
// of the store (Raft's log, stable store and snapshots, the AP fallback
// journal) reports its failures to it (Check). The condition starts with
// the first write that fails for lack of room and holds until the probe
// (Probe) can write ProbeBytes again: a write that succeeds meanwhile does
// not end it, because on a full disk small writes still succeed where the
// log store reuses pages it already holds, while the next registration
// needs new ones.
//
// The methods of a nil *DiskWatch do nothing (Check only marks the error).
type DiskWatch struct {
	probe func() error
	// full mirrors !since.IsZero() for the check on every write (Err).
	full atomic.Bool

	mu    sync.Mutex
	since time.Time // zero while the disk has room
	cause error     // the write failure that started the condition
	// failures counts writes that failed for lack of room.
	failures atomic.Uint64
}

// NewDiskWatch returns a watch whose probe writes ProbeBytes to ProbeFile
// in dir. A probe file a crash left behind is removed.
func NewDiskWatch(dir string) *DiskWatch {
	_ = os.Remove(filepath.Join(dir, ProbeFile))
	return NewDiskWatchProbe(func() error { return probeDir(dir) })
}

// NewDiskWatchProbe returns a watch with its own probe, which returns nil
// when there is room (stores without a directory, tests).
func NewDiskWatchProbe(probe func() error) *DiskWatch {
	return &DiskWatch{probe: probe}
}

// Check records the outcome of a write and returns err, marked with
// ErrDiskFull when it says the disk is full.
func (w *DiskWatch) Check(err error) error {
	if !IsDiskFull(err) {
		return err
	}
	cause := err
	if !errors.Is(err, ErrDiskFull) {
		err = fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	if w == nil {
		return err
	}
	w.failures.Add(1)
	w.mu.Lock()
	if w.since.IsZero() {
		w.since, w.cause = time.Now(), cause
		w.full.Store(true)
	}
	w.mu.Unlock()
	return err
}

// DiskState is what a DiskWatch knows, for /v1/status.
type DiskState struct {
	// Full is set while the disk has no room (since Since).
	Full  bool
	Since time.Time
	// Cause is the write failure that started the condition.
	Cause string
	// Failures counts writes that failed for lack of room since start.
	Failures uint64
}

// State returns the watch's state.
func (w *DiskWatch) State() DiskState {
	if w == nil {
		return DiskState{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	st := DiskState{Full: !w.since.IsZero(), Since: w.since, Failures: w.failures.Load()}
	if w.cause != nil {
		st.Cause = w.cause.Error()
	}
	return st
}

// Err returns an error wrapping ErrDiskFull while the disk is full, nil
// otherwise: callers refuse writes with it rather than fail them on the
// disk.
func (w *DiskWatch) Err() error {
	if w == nil || !w.full.Load() {
		return nil
	}
	st := w.State()
	if !st.Full {
		return nil
	}
	var lasted string
	if d := time.Since(st.Since); d >= time.Second {
		lasted = " for " + d.Round(time.Second).String()
	}
	return fmt.Errorf("%w: no room to write in the data directory%s (%s); writes resume by themselves once space is freed",
		ErrDiskFull, lasted, st.Cause)
}

// Probe, while the disk is full, tries whether there is room again and
// ends the condition if so. It returns how long the condition lasted when
// it ended it (0 otherwise), and the probe's error while there is still no
// room.
func (w *DiskWatch) Probe() (time.Duration, error) {
	if w == nil || !w.State().Full {
		return 0, nil
	}
	failures := w.failures.Load()
	if err := w.probe(); err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failures.Load() != failures {
		return 0, errors.New("disk probe: a write failed for lack of room meanwhile")
	}
	lasted := time.Since(w.since)
	w.since, w.cause = time.Time{}, nil
	w.full.Store(false)
	return lasted, nil
}

// probeDir writes ProbeBytes to ProbeFile in dir, syncs it and removes it.
// The bytes are random, in a block larger than the extents a compressing
// file system compresses one by one, so that it has to find room for all
// of them.
func probeDir(dir string) error {
	if err := fault("disk probe", ProbeBytes); err != nil {
		return fmt.Errorf("disk probe: %w", err)
	}
	path := filepath.Join(dir, ProbeFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("disk probe: %w", err)
	}
	defer os.Remove(path)
	buf := make([]byte, probeBlock)
	_, _ = rand.NewChaCha8([32]byte{}).Read(buf) // never fails
	for written := 0; written < ProbeBytes && err == nil; written += len(buf) {
		_, err = f.Write(buf)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("disk probe: %w", err)
	}
	return nil
}

// writeFault, when set, fails writes as a full disk would; what names the
// write and n is how many bytes it carries. Only binaries built with the
// diskfault tag set it (fault_diskfault.go), for the system tests on
// machines where no small file system can be mounted.
var writeFault func(what string, n int) error

// fault returns writeFault's verdict on a write, nil in production builds.
func fault(what string, n int) error {
	if writeFault == nil {
		return nil
	}
	return writeFault(what, n)
}

// WatchLog returns logs with the outcome of every write reported to w. It
// sits below the cache of recent entries (logCache), which caches only what
// the store took.
//
// It also makes a follower's truncation and the append that follows it one
// step. hashicorp/raft, on a follower whose log conflicts with the
// leader's, deletes its log's suffix and then stores the leader's entries;
// when that store fails (a full disk) it returns with its idea of the last
// entry left at the deleted suffix's end (a TODO in its appendEntries), and
// later appends can leave a gap that stops the node applying for good. So
// a suffix deletion is held until the next StoreLogs, which writes the new
// entries over it first and deletes what is left of it after: a failed
// append leaves the log as raft believes it is.
func WatchLog(logs raft.LogStore, w *DiskWatch) raft.LogStore {
	return &watchedLog{LogStore: logs, w: w}
}

type watchedLog struct {
	raft.LogStore
	w *DiskWatch

	mu sync.Mutex
	// cutFrom..cutTo is a suffix raft asked to delete, held for the next
	// StoreLogs (0, 0: none).
	cutFrom, cutTo uint64
}

// StoreLog implements raft.LogStore.
func (l *watchedLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs implements raft.LogStore.
func (l *watchedLog) StoreLogs(logs []*raft.Log) error {
	if writeFault != nil {
		n := 0
		for _, log := range logs {
			n += len(log.Data)
		}
		if err := fault("store logs", n); err != nil {
			l.takeCut()
			return l.w.Check(err)
		}
	}
	from, to := l.takeCut()
	if to != 0 && (len(logs) == 0 || logs[0].Index > from) {
		// Not the append that replaces the suffix: delete it as asked.
		if err := l.w.Check(l.LogStore.DeleteRange(from, to)); err != nil {
			return err
		}
		to = 0
	}
	if err := l.w.Check(l.LogStore.StoreLogs(logs)); err != nil {
		return err // the held suffix stays: raft still counts it as its log
	}
	if last := logs[len(logs)-1].Index; to != 0 && last < to {
		return l.w.Check(l.LogStore.DeleteRange(last+1, to))
	}
	return nil
}

// takeCut returns and forgets the held suffix deletion.
func (l *watchedLog) takeCut() (from, to uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from, to = l.cutFrom, l.cutTo
	l.cutFrom, l.cutTo = 0, 0
	return from, to
}

// DeleteRange implements raft.LogStore: bolt needs new pages to record
// what it frees. A deletion of the log's suffix (not its start) is held for
// the append that replaces it (see WatchLog).
func (l *watchedLog) DeleteRange(lo, hi uint64) error {
	first, ferr := l.LogStore.FirstIndex()
	last, lerr := l.LogStore.LastIndex()
	if ferr == nil && lerr == nil && lo > first && hi >= last {
		l.mu.Lock()
		l.cutFrom, l.cutTo = lo, hi
		l.mu.Unlock()
		return nil
	}
	return l.w.Check(l.LogStore.DeleteRange(lo, hi))
}

// WatchStable returns s with the outcome of every write reported to w.
// raft panics when it cannot record a new term, so this one only makes
// the cause visible.
func WatchStable(s raft.StableStore, w *DiskWatch) raft.StableStore {
	return &watchedStable{StableStore: s, w: w}
}

type watchedStable struct {
	raft.StableStore
	w *DiskWatch
}

// Set implements raft.StableStore.
func (s *watchedStable) Set(k, v []byte) error { return s.w.Check(s.StableStore.Set(k, v)) }

// SetUint64 implements raft.StableStore.
func (s *watchedStable) SetUint64(k []byte, v uint64) error {
	return s.w.Check(s.StableStore.SetUint64(k, v))
}

// WatchSnapshots returns s with the outcome of every snapshot written
// reported to w.
func WatchSnapshots(s raft.SnapshotStore, w *DiskWatch) raft.SnapshotStore {
	return &watchedSnapshots{SnapshotStore: s, w: w}
}

type watchedSnapshots struct {
	raft.SnapshotStore
	w *DiskWatch
}

// Create implements raft.SnapshotStore.
func (s *watchedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, s.w.Check(err)
	}
	return &watchedSink{SnapshotSink: sink, w: s.w}, nil
}

type watchedSink struct {
	raft.SnapshotSink
	w *DiskWatch
}

// Write implements io.Writer.
func (s *watchedSink) Write(p []byte) (int, error) {
	if err := fault("write snapshot", len(p)); err != nil {
		return 0, s.w.Check(err)
	}
	n, err := s.SnapshotSink.Write(p)
	return n, s.w.Check(err)
}

// Close implements io.Closer: the file snapshot store flushes and syncs
// here.
func (s *watchedSink) Close() error { return s.w.Check(s.SnapshotSink.Close()) }

var _ io.WriteCloser = (*watchedSink)(nil)
