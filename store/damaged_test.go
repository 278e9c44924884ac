package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// openAs opens dir as node n1.
func openAs(dir string) (*Store, error) {
	cfg := DefaultConfig(dir)
	cfg.NodeID = "n1"
	return Open(cfg, nil)
}

// nodeDir makes a data directory of node n1 whose log holds entries
// 1..n of entryData, and returns it closed.
func nodeDir(t *testing.T, n uint64) string {
	t.Helper()
	dir := t.TempDir()
	s, err := openAs(dir)
	if err != nil {
		t.Fatal(err)
	}
	storeEntries(t, s, 1, n, entryData)
	if err := s.Stable.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// wantDamaged checks that opening dir is refused as damaged, with a
// message naming file and the recovery, and that the refusal changed
// nothing in the directory.
func wantDamaged(t *testing.T, dir, file string, what ...string) {
	t.Helper()
	before := listDir(t, dir)
	s, err := openAs(dir)
	if err == nil {
		s.Close()
		t.Fatalf("open succeeded, want ErrDamaged")
	}
	msg := err.Error()
	t.Log(msg)
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("open: %v, want ErrDamaged", err)
	}
	for _, want := range append([]string{filepath.Join(dir, file), "wipe it", "--join", "sends it a snapshot"}, what...) {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not say %q: %s", want, msg)
		}
	}
	if after := listDir(t, dir); after != before {
		t.Errorf("the refused open changed the directory:\nbefore %s\nafter  %s", before, after)
	}
	// The refusal let go of the lock: a second try gets the same answer.
	if _, err := openAs(dir); !errors.Is(err, ErrDamaged) {
		t.Fatalf("second open: %v, want ErrDamaged again", err)
	}
}

// listDir describes the files under dir with their sizes (the lock file,
// which every open rewrites, left out).
func listDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() == LockFile {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b.WriteString(rel + "=" + strings.TrimSpace(fi.Mode().Type().String()))
		if !d.IsDir() {
			b.WriteString(":" + strconv.FormatInt(fi.Size(), 10))
		}
		b.WriteString(" ")
		return nil
	})
	return b.String()
}

// overwrite writes data into the file at path at off.
func overwrite(t *testing.T, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// inUse checks the log file as Open does and returns which pages bolt
// uses: damage to free pages is harmless and goes unseen, so a test that
// damages pages must hit a page in use.
func inUse(t *testing.T, path string) func(off, n int64) bool {
	t.Helper()
	c, err := CheckLogFile(path)
	if err != nil {
		t.Fatalf("the undamaged log does not pass the check: %v", err)
	}
	return c.InUse
}

// reached reports whether any page of [off, off+n) of the log file is in
// use (inUse).
func reached(t *testing.T, path string, off, n int64) bool {
	t.Helper()
	return inUse(t, path)(off, n)
}

// The four ways the issue found a log damaged, and a few more: each is
// refused with a message naming raft.db and the recovery, never a panic,
// never a new empty log.
func TestOpen_DamagedLogRefused(t *testing.T) {
	rnd := rand.New(rand.NewPCG(26, 3))
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		says   []string
	}{
		{"truncated to 0 bytes", func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}, []string{"empty (0 bytes)", "node-id"}},
		{"deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, []string{"missing", "node-id"}},
		{"truncated to half", func(t *testing.T, path string) {
			if err := os.Truncate(path, fileSize(t, path)/2); err != nil {
				t.Fatal(err)
			}
		}, []string{"truncated"}},
		{"4 KiB of random bytes in the middle", func(t *testing.T, path string) {
			junk := make([]byte, 4096)
			for i := range junk {
				junk[i] = byte(rnd.UintN(256))
			}
			mid := fileSize(t, path) / 2
			if !reached(t, path, mid, int64(len(junk))) {
				t.Fatal("test setup: the middle of the log is free pages")
			}
			overwrite(t, path, mid, junk)
		}, nil},
		{"64 KiB of zeros in the middle", func(t *testing.T, path string) {
			mid := fileSize(t, path) / 2
			if !reached(t, path, mid, 64<<10) {
				t.Fatal("test setup: the middle of the log is free pages")
			}
			overwrite(t, path, mid, make([]byte, 64<<10))
		}, nil},
		{"4 KiB of random bytes in the middle, off a page boundary", func(t *testing.T, path string) {
			junk := make([]byte, 4096)
			for i := range junk {
				junk[i] = byte(rnd.UintN(256))
			}
			mid := fileSize(t, path)/2 + 1000
			if !reached(t, path, mid, int64(len(junk))) {
				t.Fatal("test setup: the middle of the log is free pages")
			}
			overwrite(t, path, mid, junk)
		}, nil},
		{"both meta pages zeroed", func(t *testing.T, path string) {
			overwrite(t, path, 0, make([]byte, 2*4096))
		}, []string{"invalid database"}},
		{"a gap in the log", func(t *testing.T, path string) {
			db, err := bbolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bbolt.Tx) error {
				return tx.Bucket(logsBucket).Delete(uint64Key(1234))
			}); err != nil {
				t.Fatal(err)
			}
		}, []string{"log entries 1234..1234 are missing, and there is no snapshot"}},
		{"an entry that does not decode", func(t *testing.T, path string) {
			db, err := bbolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bbolt.Tx) error {
				return tx.Bucket(logsBucket).Put(uint64Key(777), []byte{0xc1, 0xc1, 0xc1})
			}); err != nil {
				t.Fatal(err)
			}
		}, []string{"log entry 777"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := nodeDir(t, 3000)
			c.damage(t, filepath.Join(dir, LogFile))
			wantDamaged(t, dir, LogFile, c.says...)
		})
	}
}

func uint64Key(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

// A new directory, and one holding only an empty log file (a first start
// that stopped before bolt wrote its first pages), starts as a new node;
// the node id is recorded once the log is in place.
func TestOpen_NewDirectoryStarts(t *testing.T) {
	for _, name := range []string{"empty directory", "empty log file"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if name == "empty log file" {
				if err := os.WriteFile(filepath.Join(dir, LogFile), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			s, err := openAs(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if has, err := s.HasState(); err != nil || has {
				t.Fatalf("new directory: HasState %v, %v", has, err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, NodeIDFile)); err != nil || string(b) != "n1\n" {
				t.Fatalf("node id record: %q, %v", b, err)
			}
		})
	}
}

// Garbage in pages bolt does not use (free after a cut) harms nothing:
// the node opens and holds every entry.
func TestOpen_DamageInFreePagesIgnored(t *testing.T) {
	dir := t.TempDir()
	s, err := openAs(dir)
	if err != nil {
		t.Fatal(err)
	}
	storeEntries(t, s, 1, 3000, entryData)
	snapshotAt(t, s, 2500)
	if err := s.Log.DeleteRange(1, 2000); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, LogFile)
	damaged := 0
	used := inUse(t, path)
	for off := int64(2 * 4096); off < fileSize(t, path); off += 4096 {
		if !used(off, 4096) {
			overwrite(t, path, off, bytes.Repeat([]byte{0xa5}, 4096))
			damaged++
		}
	}
	if damaged < 100 {
		t.Fatalf("test setup: only %d free pages after the cut", damaged)
	}
	if s, err = openAs(dir); err != nil {
		t.Fatalf("open with garbage in %d free pages: %v", damaged, err)
	}
	defer s.Close()
	for i := uint64(2001); i <= 3000; i++ {
		var l raft.Log
		if err := s.Log.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, entryData(i)) {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
}

// A snapshot Raft would fail to restore (and silently skip, for an older
// one or none) is refused, as is a log that starts past the newest
// snapshot.
func TestOpen_DamagedSnapshotRefused(t *testing.T) {
	cases := []struct {
		name   string
		file   string // what the message names, inside the snapshot's directory ("" for the log)
		damage func(t *testing.T, snap string)
	}{
		{"state fails its CRC", "state.bin", func(t *testing.T, snap string) {
			overwrite(t, filepath.Join(snap, "state.bin"), 3, []byte("XX"))
		}},
		{"state truncated", "state.bin", func(t *testing.T, snap string) {
			if err := os.Truncate(filepath.Join(snap, "state.bin"), 4); err != nil {
				t.Fatal(err)
			}
		}},
		{"state deleted", "state.bin", func(t *testing.T, snap string) {
			if err := os.Remove(filepath.Join(snap, "state.bin")); err != nil {
				t.Fatal(err)
			}
		}},
		{"meta zeroed", "meta.json", func(t *testing.T, snap string) {
			path := filepath.Join(snap, "meta.json")
			overwrite(t, path, 0, make([]byte, fileSize(t, path)))
		}},
		{"meta with a field raft cannot read", "meta.json", func(t *testing.T, snap string) {
			// The check once read only the fields it compares: raft's
			// List then skipped this snapshot and restored the older one.
			path := filepath.Join(snap, "meta.json")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damaged := bytes.Replace(b, []byte(`"ConfigurationIndex":1`), []byte(`"ConfigurationIndex":"1"`), 1)
			if bytes.Equal(damaged, b) {
				t.Fatalf("test setup: meta.json is %s", b)
			}
			if err := os.WriteFile(path, damaged, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"meta truncated to 0 bytes", "meta.json", func(t *testing.T, snap string) {
			if err := os.Truncate(filepath.Join(snap, "meta.json"), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"snapshot deleted", "", func(t *testing.T, snap string) {
			if err := os.RemoveAll(snap); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openAs(dir)
			if err != nil {
				t.Fatal(err)
			}
			storeEntries(t, s, 1, 3000, entryData)
			snapshotAt(t, s, 1000)
			snapshotAt(t, s, 2500)
			if err := s.Log.DeleteRange(1, 2000); err != nil {
				t.Fatal(err)
			}
			s.Close()
			snaps, err := s.Snapshots.List()
			if err != nil || len(snaps) != 2 {
				t.Fatalf("snapshots: %v, %v", snaps, err)
			}
			newest := filepath.Join(dir, SnapshotDir, snaps[0].ID)
			c.damage(t, newest)
			if c.file == "" {
				// The older snapshot ends before the log begins: entries
				// 1001..2000 are in neither.
				wantDamaged(t, dir, LogFile, "entries 1001..2000 are missing", "ends at 1000")
				return
			}
			wantDamaged(t, dir, filepath.Join(SnapshotDir, snaps[0].ID, c.file))
		})
	}
}

// A journal damaged before its end is refused; zeros at its end are a
// torn append, cut off as before; a journal that holds writes beside a
// lost log counts as state held.
func TestOpen_DamagedJournalRefused(t *testing.T) {
	journal := func(t *testing.T, dir string) string {
		t.Helper()
		j, err := OpenJournal(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			if err := j.Append(bytes.Repeat([]byte{byte(i)}, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		j.Close()
		return filepath.Join(dir, JournalFile)
	}
	t.Run("random bytes in the middle", func(t *testing.T) {
		dir := nodeDir(t, 100)
		path := journal(t, dir)
		junk := make([]byte, 4096)
		rnd := rand.New(rand.NewPCG(26, 4))
		for i := range junk {
			junk[i] = byte(rnd.UintN(256))
		}
		overwrite(t, path, fileSize(t, path)/2, junk)
		wantDamaged(t, dir, JournalFile, "journal corrupt")
	})
	t.Run("zeros in the middle", func(t *testing.T) {
		dir := nodeDir(t, 100)
		path := journal(t, dir)
		overwrite(t, path, fileSize(t, path)/2, make([]byte, 64<<10))
		wantDamaged(t, dir, JournalFile, "journal corrupt")
	})
	t.Run("beside a lost log", func(t *testing.T) {
		dir := nodeDir(t, 100)
		journal(t, dir)
		os.Remove(filepath.Join(dir, NodeIDFile))
		if err := os.Truncate(filepath.Join(dir, LogFile), 0); err != nil {
			t.Fatal(err)
		}
		wantDamaged(t, dir, LogFile, "an AP fallback journal of")
	})
	t.Run("zeros at the end", func(t *testing.T) {
		dir := nodeDir(t, 100)
		path := journal(t, dir)
		overwrite(t, path, fileSize(t, path), make([]byte, 8192))
		s, err := openAs(dir)
		if err != nil {
			t.Fatalf("open with a torn append of zeros: %v", err)
		}
		s.Close()
		j, err := OpenJournal(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		if j.Len() != 200 {
			t.Fatalf("%d records after the torn append, want 200", j.Len())
		}
	})
}

// Raft leaves the log's old entries when it installs a snapshot a leader
// sent (a wiped node that bootstrapped from --initial-cluster holds entry
// 1, then the snapshot, then what follows it): entries missing below the
// snapshot are no damage. Missing above it, they are.
func TestOpen_GapBelowSnapshot(t *testing.T) {
	build := func(t *testing.T, snap uint64, missing uint64) string {
		dir := t.TempDir()
		s, err := openAs(dir)
		if err != nil {
			t.Fatal(err)
		}
		storeEntries(t, s, 1, 1, entryData)
		snapshotAt(t, s, snap)
		storeEntries(t, s, 352, 400, entryData)
		if missing > 0 {
			if err := s.Log.DeleteRange(missing, missing); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		return dir
	}
	s, err := openAs(build(t, 351, 0))
	if err != nil {
		t.Fatalf("entry 1, a snapshot at 351, entries 352..400: %v", err)
	}
	s.Close()
	wantDamaged(t, build(t, 351, 380), LogFile, "log entries 380..380 are missing", "ends at 351")
	wantDamaged(t, build(t, 300, 0), LogFile, "log entries 301..351 are missing", "ends at 300")
}
