package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/raft"
)

// ErrDamaged is returned by Open (and OpenJournal) when a file of the data
// directory is damaged, or missing while the rest of the directory shows
// the node held state. The node must not start on what is left: an empty
// or unreadable log would make it a new, empty cluster, or crash it. The
// error names the file, what is wrong with it and the recovery.
var ErrDamaged = errors.New("data directory damaged")

// recovery is what the operator does about a damaged data directory
// (docs/operations.md, "A damaged data directory").
const recovery = "heureka does not start on a damaged data directory. To recover, wipe it " +
	"(delete everything in %s, or move it aside) and start the node again with the same --node-id " +
	"and --join <HTTP address of a running member>: the cluster sends it a snapshot of the registry " +
	"(docs/operations.md, \"A damaged data directory\"). A single-node cluster has no other copy: " +
	"start it on an empty directory and restore a backup (heureka snapshot restore)"

// damaged is the ErrDamaged error for file (a path inside dir): what is
// wrong with it (cause, which stays in the chain) and the recovery.
func damaged(dir, file string, cause error) error {
	return fmt.Errorf("%w: %s: %w. "+recovery, ErrDamaged, file, cause, dir)
}

// unreadable is the error for a file of dir that could not be read: a
// missing one is damage, anything else (permissions, I/O) is reported as
// it is, since wiping the directory would not cure it.
func unreadable(dir, file, what string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return damaged(dir, file, fmt.Errorf("%s is missing", what))
	}
	return fmt.Errorf("read %s %s: %w", what, file, err)
}

// errPanicked marks the error noPanic makes of a panic.
var errPanicked = errors.New("panicked")

// noPanic runs f and returns a panic inside it as an error (errPanicked)
// that starts with what. bbolt and Raft panic on data they cannot make
// sense of, and a page of bolt's memory map past the end of a truncated
// file is a fault that would kill the process: SetPanicOnFault makes it a
// panic this goroutine can recover. Panics in goroutines of their own
// (bbolt's open-time walk reports through one) are beyond reach:
// CheckLogFile runs first so that they do not happen.
func noPanic(what string, f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s %w: %v", what, errPanicked, r)
		}
	}()
	return f()
}

// heldState lists what in dir shows that a node ran on it and held state
// besides the log: the node id record, snapshots, a non-empty AP fallback
// journal. Empty when the directory is new.
func heldState(dir string) []string {
	var held []string
	if b, err := os.ReadFile(filepath.Join(dir, NodeIDFile)); err == nil && len(bytes.TrimSpace(b)) > 0 {
		held = append(held, NodeIDFile)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, SnapshotDir)); err == nil {
		n := 0
		for _, e := range entries {
			if e.IsDir() {
				n++
			}
		}
		if n > 0 {
			held = append(held, fmt.Sprintf("%d snapshot(s)", n))
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, JournalFile)); err == nil && fi.Size() > 0 {
		held = append(held, fmt.Sprintf("an AP fallback journal of %d bytes", fi.Size()))
	}
	return held
}

// snapshotFileMeta is hashicorp/raft's file snapshot meta.json in raft's
// own shape (its fileSnapshotMeta): a meta.json with any field raft cannot
// decode is refused here, since raft's List would skip that snapshot
// without a word and restore an older one.
type snapshotFileMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// newer orders snapshots as raft's file snapshot store does: by term, then
// index, then id.
func (m snapshotFileMeta) newer(o snapshotFileMeta) bool {
	if m.Term != o.Term {
		return m.Term > o.Term
	}
	if m.Index != o.Index {
		return m.Index > o.Index
	}
	return m.ID > o.ID
}

// checkSnapshots checks the finished snapshots in dir/snapshots and
// returns the newest (the zero value when there is none). Raft restores
// the newest one whose meta.json it can read and whose state passes its
// CRC, and silently goes on to an older one, or none, when that fails; a
// node would then start from an older registry, or an empty one with a
// log that does not begin at 1. So every snapshot's meta.json must decode
// and its state.bin have the size meta.json says, and the newest one's
// state must pass the CRC. Unfinished snapshots (".tmp") are left to raft,
// which ignores them.
func checkSnapshots(dir string) (snapshotFileMeta, error) {
	root := filepath.Join(dir, SnapshotDir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return snapshotFileMeta{}, nil
	}
	if err != nil {
		return snapshotFileMeta{}, fmt.Errorf("read snapshots: %w", err)
	}
	var newest snapshotFileMeta
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		metaPath := filepath.Join(root, e.Name(), "meta.json")
		b, err := os.ReadFile(metaPath)
		if err != nil {
			return snapshotFileMeta{}, unreadable(dir, metaPath, "the snapshot's meta.json", err)
		}
		var m snapshotFileMeta
		if err := json.Unmarshal(b, &m); err != nil || m.ID != e.Name() || len(m.CRC) == 0 {
			if err == nil {
				err = fmt.Errorf("id %q, a %d-byte CRC", m.ID, len(m.CRC))
			}
			return snapshotFileMeta{}, damaged(dir, metaPath, fmt.Errorf("snapshot meta does not decode: %w", err))
		}
		if m.Version < raft.SnapshotVersionMin || m.Version > raft.SnapshotVersionMax {
			return snapshotFileMeta{}, damaged(dir, metaPath, fmt.Errorf("snapshot version %d, not one Raft reads", m.Version))
		}
		statePath := filepath.Join(root, e.Name(), "state.bin")
		fi, err := os.Stat(statePath)
		if err != nil {
			return snapshotFileMeta{}, unreadable(dir, statePath, "the snapshot's state", err)
		}
		if fi.Size() != m.Size {
			return snapshotFileMeta{}, damaged(dir, statePath,
				fmt.Errorf("snapshot state of %d bytes, its meta.json says %d", fi.Size(), m.Size))
		}
		if newest.ID == "" || m.newer(newest) {
			newest = m
		}
	}
	if newest.ID == "" {
		return newest, nil
	}
	statePath := filepath.Join(root, newest.ID, "state.bin")
	sum, err := crc64File(statePath)
	if err != nil {
		return snapshotFileMeta{}, unreadable(dir, statePath, "the snapshot's state", err)
	}
	if !bytes.Equal(sum, newest.CRC) {
		return snapshotFileMeta{}, damaged(dir, statePath,
			fmt.Errorf("snapshot state fails its CRC (%x, meta.json says %x)", sum, newest.CRC))
	}
	return newest, nil
}

// crc64File is the CRC-64 (ECMA) of a file, as raft's file snapshot store
// computes it.
func crc64File(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// checkDir checks the data directory before bolt opens the log: the log
// file, the snapshots and the journal, and that together they make a
// whole Raft state. It returns what it found in the log.
func checkDir(dir string) (LogCheck, error) {
	info, err := checkLog(dir)
	if err != nil {
		return LogCheck{}, err
	}
	snap, err := checkSnapshots(dir)
	if err != nil {
		return LogCheck{}, err
	}
	if err := checkContinuity(info, snap); err != nil {
		return LogCheck{}, damaged(dir, filepath.Join(dir, LogFile), err)
	}
	if err := checkJournal(dir); err != nil {
		return LogCheck{}, err
	}
	return info, nil
}

// checkContinuity checks that the log holds every entry after the newest
// snapshot (after index 0 without one), as Raft needs them: a log that
// starts later, or misses entries past the snapshot, lost them (or the
// snapshot that held them), and Raft would panic when it reached the gap.
// Entries missing below the snapshot are no damage: Raft leaves the log's
// old entries where they were when it installs a snapshot a leader sent,
// and never reads them again.
func checkContinuity(info LogCheck, snap snapshotFileMeta) error {
	if info.Entries == 0 || info.LastIndex <= snap.Index {
		return nil
	}
	from, to := uint64(1), info.FirstIndex-1 // missing before the log
	if info.GapTo > 0 {
		from, to = info.GapFrom, info.GapTo
	}
	if to <= snap.Index {
		return nil
	}
	from = max(from, snap.Index+1)
	if snap.ID == "" {
		return fmt.Errorf("log entries %d..%d are missing, and there is no snapshot of them (the log holds %d..%d)",
			from, to, info.FirstIndex, info.LastIndex)
	}
	return fmt.Errorf("log entries %d..%d are missing, and the newest snapshot (%s) ends at %d (the log holds %d..%d)",
		from, to, snap.ID, snap.Index, info.FirstIndex, info.LastIndex)
}

// checkLog checks the log file, if there is one with anything in it.
func checkLog(dir string) (LogCheck, error) {
	path := filepath.Join(dir, LogFile)
	fi, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return LogCheck{}, fmt.Errorf("stat log store: %w", err)
	}
	if err != nil || fi.Size() == 0 {
		// bolt makes a new, empty log of a missing or empty file: right
		// for a new directory, a silent new cluster for one that held
		// state.
		held := heldState(dir)
		if len(held) == 0 {
			return LogCheck{}, nil
		}
		what := "missing"
		if err == nil {
			what = "empty (0 bytes)"
		}
		return LogCheck{}, damaged(dir, path, fmt.Errorf("the log store is %s, but the directory holds %s: the node's Raft log is lost",
			what, strings.Join(held, ", ")))
	}
	var info LogCheck
	if err := noPanic("check", func() (err error) { info, err = CheckLogFile(path); return err }); err != nil {
		return LogCheck{}, damaged(dir, path, fmt.Errorf("the log store is damaged: %w", err))
	}
	return info, nil
}

// checkJournal reads the AP fallback journal, if there is one, without
// changing it: OpenJournal would refuse it later, when the node is half
// started.
func checkJournal(dir string) error {
	path := filepath.Join(dir, JournalFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return unreadable(dir, path, "the AP fallback journal", err)
	}
	defer f.Close()
	if _, _, err := readJournal(f); err != nil {
		return damaged(dir, path, fmt.Errorf("the AP fallback journal is damaged: %w", err))
	}
	return nil
}
