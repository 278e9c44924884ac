package store

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// mappedRSS is the resident size in bytes of this process's mappings of
// the file at path (/proc/self/smaps).
func mappedRSS(t *testing.T, path string) int64 {
	t.Helper()
	path, _ = filepath.EvalSymlinks(path)
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	var total int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok {
			var kb int64
			if in {
				fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
				total += kb << 10
			}
			continue
		}
		if fields := strings.Fields(line); len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && fields[5] == path
		}
	}
	return total
}

// openMapped opens a store in a new directory, on Linux only (where the
// mapping is released).
func openMapped(t *testing.T) (*Store, string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("mapped pages are released on Linux only")
	}
	return openTemp(t)
}

// keepMapped stops the release a second after the log is used for the
// rest of the test, for tests that check pages are still mapped.
func keepMapped(t *testing.T) {
	old := quietAfter
	quietAfter = time.Hour
	t.Cleanup(func() { quietAfter = old })
}

// readThroughMapping reads entries 1..n from bolt itself (past the log
// cache), which maps their pages, and checks they are mapped.
func readThroughMapping(t *testing.T, s *Store, path string, n uint64) {
	t.Helper()
	for i := uint64(1); i <= n; i++ {
		var l raft.Log
		if err := s.mapped.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
	}
	if got := mappedRSS(t, path); got < int64(n)<<10 {
		t.Fatalf("only %d KiB of the log mapped after reading %d entries of 1 KiB", got>>10, n)
	}
}

func entryData(i uint64) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%08d", i)), 128) }

// TestStore_CutReleasesMappedPages: cutting the front of the log gives back
// the mapped pages bolt read (the node's file-backed resident memory), and
// what is left of the log still reads back whole, before and after a
// reopen.
func TestStore_CutReleasesMappedPages(t *testing.T) {
	keepMapped(t)
	s, dir := openMapped(t)
	defer func() { s.Close() }()
	var err error
	storeEntries(t, s, 1, 4000, entryData)
	path := filepath.Join(dir, LogFile)
	// Opening walks every page in use (bolt's freelist is rebuilt): they
	// are given back too.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(DefaultConfig(dir), nil); err != nil {
		t.Fatal(err)
	}
	if got := mappedRSS(t, path); got > 256<<10 {
		t.Fatalf("%d KiB of the log mapped right after opening it", got>>10)
	}
	readThroughMapping(t, s, path, 4000)
	before := mappedRSS(t, path)
	snapshotAt(t, s, 3900)
	if err := s.Log.DeleteRange(1, 3900); err != nil {
		t.Fatal(err)
	}
	after := mappedRSS(t, path)
	if after > 256<<10 {
		t.Fatalf("%d KiB of the log still mapped after the cut (%d KiB before)", after>>10, before>>10)
	}
	check := func() {
		t.Helper()
		for i := uint64(3901); i <= 4000; i++ {
			var l raft.Log
			if err := s.Log.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, entryData(i)) {
				t.Fatalf("entry %d after the release: %v", i, err)
			}
		}
	}
	check()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(DefaultConfig(dir), nil); err != nil {
		t.Fatal(err)
	}
	check()
}

// TestStore_ReleaseWhileTheFileGrows: appends that grow the file (bolt
// then moves its mapping) race with cuts that release the mapping; every
// entry kept reads back whole.
func TestStore_ReleaseWhileTheFileGrows(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	const last = 6000
	var wg sync.WaitGroup
	var appendErr error
	wg.Go(func() { // t.Fatal belongs to the test's goroutine: the error is checked after Wait
		appendErr = appendEntries(s, 1, last, entryData)
	})
	for k := 0; k < 200; k++ {
		first, _ := s.Log.FirstIndex()
		lastIdx, _ := s.Log.LastIndex()
		if lastIdx > first+500 {
			if err := s.Log.DeleteRange(first, lastIdx-500); err != nil {
				t.Fatal(err)
			}
		}
		for i := max(first, lastIdx-400); i <= lastIdx && i > 0; i += 37 {
			var l raft.Log
			if err := s.Log.GetLog(i, &l); err == nil && !bytes.Equal(l.Data, entryData(i)) {
				t.Fatalf("entry %d reads back wrong", i)
			}
		}
	}
	wg.Wait()
	if appendErr != nil {
		t.Fatal(appendErr)
	}
	first, _ := s.Log.FirstIndex()
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.Log.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, entryData(i)) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
}

// TestStore_StoringReleasesMappedPages: pages read between cuts (a leader
// reading entries for a lagging follower) are given back after every
// releaseEvery entries stored, without a cut.
func TestStore_StoringReleasesMappedPages(t *testing.T) {
	keepMapped(t)
	s, dir := openMapped(t)
	path := filepath.Join(dir, LogFile)
	// The file reaches its size first: bolt moves its mapping when the
	// file outgrows it, which also drops the mapped pages.
	small := func(i uint64) []byte { return []byte{byte(i)} }
	storeEntries(t, s, 1, 4000, entryData)
	storeEntries(t, s, 4001, 4000+2*releaseEvery, small)
	// Room for as many again. Straight to the mapped log: through s.Log a
	// deletion of the log's end waits for the append that replaces it
	// (WatchLog), and would free its pages only after the reads below.
	if err := s.mapped.DeleteRange(4001, 4000+2*releaseEvery); err != nil {
		t.Fatal(err)
	}
	readThroughMapping(t, s, path, 4000)
	next := uint64(4001 + 2*releaseEvery)
	storeEntries(t, s, next, next+releaseEvery-2, small)
	if got := mappedRSS(t, path); got < 4<<20 {
		t.Fatalf("released before %d entries were stored (%d KiB mapped)", releaseEvery, got>>10)
	}
	storeEntries(t, s, next+releaseEvery-1, next+releaseEvery-1, small)
	if got := mappedRSS(t, path); got > 256<<10 {
		t.Fatalf("%d KiB of the log still mapped after %d entries stored", got>>10, releaseEvery)
	}
}

// BenchmarkRelease is one release of the log's mapping with releaseEvery
// entries of 1 KiB (about 1 MiB of pages) mapped, the pages read again
// each time.
func BenchmarkRelease(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	storeEntries(b, s, 1, releaseEvery, entryData)
	var l raft.Log
	for b.Loop() {
		b.StopTimer()
		for i := uint64(1); i <= releaseEvery; i++ {
			_ = s.mapped.GetLog(i, &l)
		}
		b.StartTimer()
		if _, err := s.mapped.release(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStore_QuietLogReleasesMappedPages: the pages the last calls mapped
// (here appends after large entries, which read those entries back and
// map the large page-cache folios their writes left) are given back
// shortly after the log goes quiet, with no further store or cut.
func TestStore_QuietLogReleasesMappedPages(t *testing.T) {
	keepMapped(t)
	s, dir := openMapped(t)
	defer s.Close()
	path := filepath.Join(dir, LogFile)
	large := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, 400<<10) }
	small := func(i uint64) []byte { return []byte{byte(i)} }
	storeEntries(t, s, 1, 100, small)
	storeEntries(t, s, 101, 101, large)
	storeEntries(t, s, 102, 102, large)
	storeEntries(t, s, 103, 103, large)
	storeEntries(t, s, 104, 104, small)
	storeEntries(t, s, 105, 105, small)
	if _, err := s.Log.FirstIndex(); err != nil {
		t.Fatal(err)
	}
	before := mappedRSS(t, path)
	if before < 512<<10 {
		t.Fatalf("only %d KiB of the log mapped after the appends", before>>10)
	}
	// From now on, releases are due a second after the log is used (the
	// hour-long one already due is passed over).
	s.mapped.quietAfter = time.Second
	s.mapped.pending.Store(false)
	if _, err := s.Log.LastIndex(); err != nil {
		t.Fatal(err)
	}
	got := before
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got = mappedRSS(t, path); got <= 64<<10 {
			return
		}
	}
	t.Fatalf("%d KiB of the log still mapped %s after the last call (%d KiB right after it)", got>>10, 5*time.Second, before>>10)
}
