package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// openTemp opens a store in a new directory and returns it with the
// directory.
func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(DefaultConfig(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// appendEntries stores entries from..to, data(i) the body of entry i, in
// batches of 100 as a leader appends them, stopping at the first error.
func appendEntries(s *Store, from, to uint64, data func(uint64) []byte) error {
	for i := from; i <= to; i += 100 {
		var logs []*raft.Log
		for j := i; j < i+100 && j <= to; j++ {
			logs = append(logs, &raft.Log{Index: j, Term: 1, Type: raft.LogCommand, Data: data(j)})
		}
		if err := s.Log.StoreLogs(logs); err != nil {
			return err
		}
	}
	return nil
}

// storeEntries is appendEntries failing the test on error.
func storeEntries(t testing.TB, s *Store, from, to uint64, data func(uint64) []byte) {
	t.Helper()
	if err := appendEntries(s, from, to, data); err != nil {
		t.Fatal(err)
	}
}

// snapshotAt stores a Raft snapshot of index in s, as Raft does before it
// cuts the log up to it: Open refuses a log that starts past the newest
// snapshot.
func snapshotAt(t testing.TB, s *Store, index uint64) {
	t.Helper()
	sink, err := s.Snapshots.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("registry at " + strconv.FormatUint(index, 10))); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStore_FreelistNotWrittenLogKept: after the front of the log is cut
// (as after a snapshot), commits do not write bolt's freelist (its meta
// pages name no freelist page), and a reopened store still holds the rest
// of the log.
func TestStore_FreelistNotWrittenLogKept(t *testing.T) {
	s, dir := openTemp(t)
	data := bytes.Repeat([]byte("x"), 1024)
	storeEntries(t, s, 1, 2000, func(uint64) []byte { return data })
	snapshotAt(t, s, 1500)
	if err := s.Log.DeleteRange(1, 1500); err != nil {
		t.Fatal(err)
	}
	if err := s.Log.StoreLogs([]*raft.Log{{Index: 2001, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// bolt's meta pages are the file's first two pages: a 16-byte page
	// header, then magic, version, page size, flags (4 bytes each), the
	// root bucket (16 bytes) and the freelist's page id, all ones when
	// the freelist is not written.
	raw, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(binary.LittleEndian.Uint32(raw[16+8:]))
	for m := range 2 {
		meta := raw[m*pageSize+16:]
		if magic := binary.LittleEndian.Uint32(meta); magic != 0xED0CDAED {
			t.Fatalf("meta page %d: magic %x, not a bolt file", m, magic)
		}
		if fl := binary.LittleEndian.Uint64(meta[32:]); fl != ^uint64(0) {
			t.Fatalf("meta page %d names freelist page %d: the freelist is written", m, fl)
		}
	}

	s, err = Open(DefaultConfig(dir), nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	first, _ := s.Log.FirstIndex()
	last, _ := s.Log.LastIndex()
	if first != 1501 || last != 2001 {
		t.Fatalf("reopened log holds %d..%d, want 1501..2001", first, last)
	}
	var l raft.Log
	if err := s.Log.GetLog(1800, &l); err != nil || !bytes.Equal(l.Data, data) {
		t.Fatalf("entry 1800 after reopen: %v", err)
	}
}

// TestStore_BoundToItsNodeID checks that a data directory opened for a node
// id refuses another id afterwards (and releases its lock when it does),
// that the same id opens it again, and that a directory without a recorded
// id adopts the first one it is opened with.
func TestStore_BoundToItsNodeID(t *testing.T) {
	dir := t.TempDir()
	open := func(id string) (*Store, error) {
		cfg := DefaultConfig(dir)
		cfg.NodeID = id
		return Open(cfg, nil)
	}
	s, err := open("") // a directory from before ids were recorded
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, id := range []string{"n3", "n3"} {
		s, err := open(id)
		if err != nil {
			t.Fatalf("open as %s: %v", id, err)
		}
		s.Close()
	}
	if _, err := open("n9"); !errors.Is(err, ErrOtherNode) || !strings.Contains(err.Error(), "--node-id n3") {
		t.Fatalf("open n3's directory as n9: %v, want ErrOtherNode naming n3", err)
	}
	s, err = open("n3") // the refused open let go of the lock
	if err != nil {
		t.Fatalf("open as n3 after the refusal: %v", err)
	}
	s.Close()
}
