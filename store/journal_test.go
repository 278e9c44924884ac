package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestJournal_AppendReopenDrop(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	recs := [][]byte{[]byte("one"), []byte("2"), bytes.Repeat([]byte{7}, 5000)}
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	j, err = OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Records(); len(got) != 3 || !bytes.Equal(got[2], recs[2]) {
		t.Fatalf("reopened: %d records", len(got))
	}
	if err := j.DropFirst(2); err != nil {
		t.Fatal(err)
	}
	// The journal appends to the file its path names after the rewrite:
	// a record appended (and acknowledged) then is there on the next open.
	held, err1 := j.f.Stat()
	named, err2 := os.Stat(j.path)
	if err1 != nil || err2 != nil || !os.SameFile(held, named) {
		t.Fatalf("after the rewrite the journal writes to another file than its path names (%v, %v)", err1, err2)
	}
	if err := j.Append([]byte("after")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, _ = OpenJournal(dir)
	if got := j.Records(); len(got) != 2 || !bytes.Equal(got[0], recs[2]) || string(got[1]) != "after" {
		t.Fatalf("after drop and append: %d records", len(got))
	}
	j.Close()
}

func TestJournal_TornTailIsCutCorruptionIsRefused(t *testing.T) {
	dir := t.TempDir()
	j, _ := OpenJournal(dir)
	_ = j.Append([]byte("kept"))
	_ = j.Append([]byte("torn"))
	j.Close()
	path := filepath.Join(dir, JournalFile)
	data, _ := os.ReadFile(path)
	_ = os.WriteFile(path, data[:len(data)-2], 0o644) // crash mid-append
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Records(); !reflect.DeepEqual(got, [][]byte{[]byte("kept")}) {
		t.Fatalf("torn tail: %q", got)
	}
	_ = j.Append([]byte("after"))
	j.Close()
	data, _ = os.ReadFile(path)
	data[9] ^= 0xff // flip a byte of the first record
	_ = os.WriteFile(path, data, 0o644)
	if _, err := OpenJournal(dir); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("corruption: %v", err)
	}
}

func FuzzReadJournal(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 'x'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ReadJournal(bytes.NewReader(data))
	})
}

func TestStore_OpenLockReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(DefaultConfig(dir), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(DefaultConfig(dir), nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	if has, err := s.HasState(); err != nil || has {
		t.Fatalf("fresh store has state: %v %v", has, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(DefaultConfig(dir), nil)
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	s.Close()
}

func TestJournal_LimitsRefuseWhenFull(t *testing.T) {
	j, err := OpenJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	j.SetLimits(2, 0)
	for i := 0; i < 2; i++ {
		if err := j.Append([]byte("rec")); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Append([]byte("rec")); !errors.Is(err, ErrJournalFull) {
		t.Fatalf("third append with a limit of 2 entries: %v, want ErrJournalFull", err)
	}
	if j.Len() != 2 || j.Size() != 2*(8+3) {
		t.Fatalf("refused append recorded something: %d entries, %d bytes", j.Len(), j.Size())
	}
	// Replaying frees room again.
	if err := j.DropFirst(1); err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]byte("rec")); err != nil {
		t.Fatalf("append after a drop: %v", err)
	}

	j.SetLimits(0, 3*(8+3)+5)
	if err := j.Append([]byte("rec")); err != nil {
		t.Fatalf("third record within the byte limit: %v", err)
	}
	if err := j.Append([]byte("r")); !errors.Is(err, ErrJournalFull) {
		t.Fatalf("record past the byte limit: %v, want ErrJournalFull", err)
	}
	j.Close()
	reopened, err := OpenJournal(filepath.Dir(j.f.Name()))
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if reopened.Len() != 3 {
		t.Fatalf("on disk after refusals: %d records, want 3", reopened.Len())
	}
}
