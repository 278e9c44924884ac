package store

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

func TestIsDiskFull(t *testing.T) {
	enospc := &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{enospc, true},
		{fmt.Errorf("commit: %w", enospc), true},
		{&os.PathError{Op: "write", Path: "j", Err: syscall.EDQUOT}, true},
		{fmt.Errorf("x: %w", ErrDiskFull), true},
		// raft's LogCache and bolt's file resize keep only the text.
		{fmt.Errorf("unable to store logs within log store, err: %q", enospc), true},
		{&os.PathError{Op: "write", Path: "raft.db", Err: syscall.EIO}, false},
		{ErrJournalFull, false},
	} {
		if got := IsDiskFull(c.err); got != c.want {
			t.Errorf("IsDiskFull(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// fullLog is a log store whose writes fail with ENOSPC while full is set.
type fullLog struct {
	raft.LogStore
	full *atomic.Bool
}

func (l *fullLog) StoreLogs(logs []*raft.Log) error {
	if l.full.Load() {
		return fmt.Errorf("commit: %w", &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC})
	}
	return l.LogStore.StoreLogs(logs)
}

func (l *fullLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// A log write that fails for lack of room starts the condition, even
// below raft's LogCache, which hands on only the error's text; writes that
// succeed meanwhile do not end it, the probe does once it can write.
func TestDiskWatch_LogFailureHoldsUntilProbeFindsRoom(t *testing.T) {
	var full, noRoom atomic.Bool
	w := NewDiskWatchProbe(func() error {
		if noRoom.Load() {
			return &os.PathError{Op: "write", Path: ProbeFile, Err: syscall.ENOSPC}
		}
		return nil
	})
	cache, err := raft.NewLogCache(16, WatchLog(&fullLog{LogStore: raft.NewInmemStore(), full: &full}, w))
	if err != nil {
		t.Fatal(err)
	}
	entry := func(i uint64) []*raft.Log { return []*raft.Log{{Index: i, Term: 1, Data: []byte("x")}} }
	if err := cache.StoreLogs(entry(1)); err != nil {
		t.Fatal(err)
	}
	if w.Err() != nil || w.State().Full {
		t.Fatalf("full before any failure: %v", w.Err())
	}

	full.Store(true)
	noRoom.Store(true)
	if err := cache.StoreLogs(entry(2)); err == nil {
		t.Fatal("a write to a full disk succeeded")
	}
	st := w.State()
	if !st.Full || st.Failures != 1 || st.Cause == "" {
		t.Fatalf("after a failed log write: %+v, want full with its cause", st)
	}
	if err := w.Err(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Err while full: %v, want ErrDiskFull", err)
	}
	if lasted, err := w.Probe(); lasted != 0 || err == nil {
		t.Fatalf("probe without room: %v %v, want its error", lasted, err)
	}

	full.Store(false) // a small write gets through, the disk is still full
	if err := cache.StoreLogs(entry(2)); err != nil {
		t.Fatal(err)
	}
	if !w.State().Full {
		t.Fatal("a successful write ended the condition; only the probe may")
	}
	noRoom.Store(false)
	if lasted, err := w.Probe(); err != nil || lasted <= 0 {
		t.Fatalf("probe with room: %v %v", lasted, err)
	}
	if st := w.State(); st.Full || w.Err() != nil || st.Failures != 1 {
		t.Fatalf("after the probe found room: %+v", st)
	}
}

// The real probe writes ProbeBytes in the directory and leaves nothing.
func TestDiskWatch_ProbeWritesAndRemoves(t *testing.T) {
	dir := t.TempDir()
	w := NewDiskWatch(dir)
	if lasted, err := w.Probe(); lasted != 0 || err != nil {
		t.Fatalf("probe of a disk not full: %v %v, want nothing done", lasted, err)
	}
	w.Check(&os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC})
	if lasted, err := w.Probe(); err != nil || lasted <= 0 {
		t.Fatalf("probe of a directory with room: %v %v", lasted, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ProbeFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("probe file left behind: %v", err)
	}
}

// A journal append that fails for lack of room is refused as ErrDiskFull,
// reported to the watch, and leaves nothing recorded.
func TestJournal_DiskFullAppendReported(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	w := NewDiskWatch(dir)
	j.SetDiskWatch(w)
	var full atomic.Bool
	writeFault = func(string, int) error {
		if full.Load() {
			return &os.PathError{Op: "write", Path: JournalFile, Err: syscall.ENOSPC}
		}
		return nil
	}
	defer func() { writeFault = nil }()
	if err := j.Append([]byte("kept")); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	if err := j.Append([]byte("refused")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append to a full disk: %v, want ErrDiskFull", err)
	}
	if !w.State().Full || j.Len() != 1 || j.Size() != 8+4 {
		t.Fatalf("after the refused append: full=%v, %d records, %d bytes", w.State().Full, j.Len(), j.Size())
	}
}

// An append the disk takes only part of (here the file size limit cuts
// the write short, as a full disk does) is cut off again: the next append
// follows the last whole record, and the journal opens with every record
// that was acknowledged. Left in place, the torn record would sit before
// good ones, which the next open reads as corruption.
func TestJournal_PartialAppendCutOff(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]byte("first")); err != nil {
		t.Fatal(err)
	}
	err = withFileSizeLimit(t, uint64(j.Size())+20, func() error { return j.Append(make([]byte, 100)) })
	if err == nil {
		t.Fatal("an append past the file size limit succeeded")
	}
	if err := j.Append([]byte("second")); err != nil {
		t.Fatalf("append after the failed one: %v", err)
	}
	j.Close()
	j, err = OpenJournal(dir)
	if err != nil {
		t.Fatalf("reopen after a partial append: %v", err)
	}
	defer j.Close()
	if got := j.Records(); len(got) != 2 || string(got[0]) != "first" || string(got[1]) != "second" {
		t.Fatalf("records after reopen: %q, want first and second", got)
	}
}

// Open wires the watch: the stores report to Store.Disk.
func TestStore_DiskWatchWired(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	if s.Disk == nil {
		t.Fatal("Store.Disk is nil")
	}
	var fail atomic.Bool
	fail.Store(true)
	writeFault = func(string, int) error {
		if fail.Load() {
			return &os.PathError{Op: "write", Path: LogFile, Err: syscall.ENOSPC}
		}
		return nil
	}
	defer func() { writeFault = nil }()
	err := s.Log.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("x")}})
	if err == nil || !s.Disk.State().Full {
		t.Fatalf("log write on a full disk: %v, watch full %v", err, s.Disk.State().Full)
	}
	sink, err := s.Snapshots.Create(raft.SnapshotVersionMax, 1, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatalf("create snapshot: %v", err)
	}
	if _, err := sink.Write([]byte("state")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("snapshot write on a full disk: %v, want ErrDiskFull", err)
	}
	_ = sink.Cancel()
	if got := s.Disk.State().Failures; got != 2 {
		t.Fatalf("failures reported: %d, want 2 (log, snapshot)", got)
	}
	if _, err := s.Disk.Probe(); err == nil || !s.Disk.State().Full {
		t.Fatalf("probe on a full disk: %v", err)
	}
	fail.Store(false)
	if _, err := s.Disk.Probe(); err != nil || s.Disk.State().Full {
		t.Fatalf("probe with room: %v, still full %v", err, s.Disk.State().Full)
	}
}

// failingStores is an in-memory log that fails StoreLogs while full is set.
type failingStores struct {
	*raft.InmemStore
	full bool
}

func (f *failingStores) StoreLogs(logs []*raft.Log) error {
	if f.full {
		return fmt.Errorf("write raft log: %w", syscall.ENOSPC)
	}
	return f.InmemStore.StoreLogs(logs)
}

// A follower's truncation and the append that replaces it are one step: a
// failed append leaves the suffix raft still counts as its log, and a
// successful one leaves exactly the new entries. A deletion of the log's
// start (compaction) happens at once.
func TestWatchLog_TruncationWaitsForTheAppend(t *testing.T) {
	under := &failingStores{InmemStore: raft.NewInmemStore()}
	logs := WatchLog(under, NewDiskWatchProbe(func() error { return nil }))
	entries := func(from, to, term uint64) []*raft.Log {
		var out []*raft.Log
		for i := from; i <= to; i++ {
			out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte{byte(i)}})
		}
		return out
	}
	lastTerm := func(idx uint64) uint64 {
		var l raft.Log
		if err := logs.GetLog(idx, &l); err != nil {
			return 0
		}
		return l.Term
	}
	if err := logs.StoreLogs(entries(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	// raft's conflict handling: delete 6..10, store the leader's 6..7.
	if err := logs.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	under.full = true
	if err := logs.StoreLogs(entries(6, 7, 2)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if last, _ := logs.LastIndex(); last != 10 || lastTerm(8) != 1 {
		t.Fatalf("after a failed append: last index %d, entry 8 of term %d; want the old suffix (10, term 1)", last, lastTerm(8))
	}
	under.full = false
	if err := logs.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	if err := logs.StoreLogs(entries(6, 7, 2)); err != nil {
		t.Fatal(err)
	}
	if last, _ := logs.LastIndex(); last != 7 || lastTerm(7) != 2 || lastTerm(8) != 0 {
		t.Fatalf("after the append: last index %d, entry 7 of term %d, entry 8 of term %d; want 7, 2, none", last, lastTerm(7), lastTerm(8))
	}
	// Compaction deletes the start at once.
	if err := logs.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	if first, _ := logs.FirstIndex(); first != 4 {
		t.Fatalf("first index after compaction: %d, want 4", first)
	}
}

// A journal trim that the disk refuses (here the file size limit, as a
// full disk) changes nothing: every record is still in the file and in
// memory. Cut in place, it truncated the file first and lost the records
// not replayed yet when the rewrite failed.
func TestJournal_FailedTrimKeepsEveryRecord(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"one", "two", "three"} {
		if err := j.Append([]byte(r + strings.Repeat(".", 100))); err != nil {
			t.Fatal(err)
		}
	}
	err = withFileSizeLimit(t, 50, func() error { return j.DropFirst(1) })
	if err == nil {
		t.Fatal("a trim past the file size limit succeeded")
	}
	if j.Len() != 3 {
		t.Fatalf("after the failed trim: %d records in memory, want 3", j.Len())
	}
	j.Close() // as if the node stopped now
	if j, err = OpenJournal(dir); err != nil {
		t.Fatal(err)
	}
	if j.Len() != 3 {
		t.Fatalf("after the failed trim: %d records in the file, want 3", j.Len())
	}
	if err := j.DropFirst(1); err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]byte("four")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, err = OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	got := j.Records()
	if len(got) != 3 || !strings.HasPrefix(string(got[0]), "two") || string(got[2]) != "four" {
		t.Fatalf("records after reopen: %d, want two, three, four", len(got))
	}
}

// withFileSizeLimit runs fn with the process's file size limit at limit
// bytes: past it a write gets EFBIG (SIGXFSZ ignored) after the bytes that
// still fit, as on a full disk. It skips the test where limits cannot be
// set.
func withFileSizeLimit(t *testing.T, limit uint64, fn func() error) error {
	t.Helper()
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skipf("file size limit: %v", err)
	}
	lim := old
	lim.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("file size limit: %v", err)
	}
	err := fn()
	if rerr := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	return err
}
