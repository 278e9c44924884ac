package store

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// TestStore_FreelistNotWrittenLogKept: after the front of the log is cut
// (as after a snapshot), commits do not write bolt's freelist (its meta
// pages name no freelist page), and a reopened store still holds the rest
// of the log.
func TestStore_FreelistNotWrittenLogKept(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(DefaultConfig(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("x"), 1024)
	for i := uint64(1); i <= 2000; i += 100 {
		var logs []*raft.Log
		for j := i; j < i+100; j++ {
			logs = append(logs, &raft.Log{Index: j, Term: 1, Type: raft.LogCommand, Data: data})
		}
		if err := s.Log.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
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
