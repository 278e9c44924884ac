package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
)

// A bit flip in the length of a record that is followed by whole records
// is damage before the end: it must be refused (ErrDamaged,
// ErrJournalCorrupt). It is read as a torn tail instead: Open passes it,
// and OpenJournal cuts the file there, dropping every acknowledged record
// from the damaged one on, without a word.
func TestJournal_DamagedLengthIsNotATornTail(t *testing.T) {
	dir := nodeDir(t, 10)
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"first", "second", "third"} {
		if err := j.Append([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	path := filepath.Join(dir, JournalFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[1] ^= 0x01 // the first record's length, 5, becomes 65541: past the file's end
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := openAs(dir)
	if err == nil {
		s.Close()
		t.Errorf("Open passed a journal whose first record's length is damaged")
	} else if !errors.Is(err, ErrDamaged) {
		t.Errorf("Open: %v, want ErrDamaged", err)
	}
	j, err = OpenJournal(dir)
	if err == nil {
		defer j.Close()
		after, _ := os.ReadFile(path)
		t.Fatalf("OpenJournal read a damaged length as a torn tail: %d of 3 records kept, file cut from %d to %d bytes",
			j.Len(), len(data), len(after))
	}
	if !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("OpenJournal: %v, want ErrJournalCorrupt", err)
	}
}

// An empty node-id record is no record heureka writes (WriteFileAtomic
// writes the id and a newline, or nothing): it is damage, and must not let
// the directory of node n1 open as another node.
func TestOpen_EmptyNodeIDRecordIsDamage(t *testing.T) {
	dir := nodeDir(t, 10) // node n1's directory, with a log
	if err := os.Truncate(filepath.Join(dir, NodeIDFile), 0); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(dir)
	cfg.NodeID = "n9"
	s, err := Open(cfg, nil)
	if err == nil {
		s.Close()
		b, _ := os.ReadFile(filepath.Join(dir, NodeIDFile))
		t.Fatalf("n1's directory with an empty node-id record opened as n9 (record now %q)", b)
	}
}

// A stable store value of the wrong length (a damaged value size in its
// leaf element) passes the open-time check; reading it then panics in
// raft-boltdb's GetUint64 (binary.BigEndian.Uint64 on fewer than 8 bytes),
// first in HasState, which heureka serve calls right after Open.
func TestOpen_StableTermOfWrongLengthIsDamage(t *testing.T) {
	dir := nodeDir(t, 100)
	db, err := bbolt.Open(filepath.Join(dir, LogFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte("conf")).Put([]byte("CurrentTerm"), []byte{0, 0, 1})
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := openAs(dir)
	if err != nil {
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("open: %v, want ErrDamaged", err)
		}
		return // refused as damaged: what is wanted
	}
	defer s.Close()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("the damaged directory opened, then HasState panicked: %v", r)
		}
	}()
	if _, err := s.HasState(); err == nil {
		t.Fatalf("a 3-byte current term: open and HasState both succeeded")
	}
}
