package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// JournalFile is the AP fallback journal inside the data directory.
const JournalFile = "fallback.journal"

// maxJournalRecord bounds one record, so a corrupt length cannot make the
// reader allocate without limit.
const maxJournalRecord = 16 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrJournalCorrupt reports a record that fails its checksum before the
// end of the file (a torn last record is not corruption: it is dropped).
var ErrJournalCorrupt = errors.New("journal corrupt")

// ErrJournalFull is returned by Append when the record would take the
// journal past its limits (SetLimits): the write is refused, not recorded.
var ErrJournalFull = errors.New("journal full")

// Journal is an append-only file of records, each a 4-byte length, a
// 4-byte CRC-32C and the bytes, synced on every append. It holds the writes
// a node accepted in AP fallback until they are replayed through Raft.
type Journal struct {
	mu      sync.Mutex
	path    string // the journal's name; f's own name is a temporary one after a rewrite
	f       *os.File
	records [][]byte
	size    int64
	// maxEntries and maxBytes bound the journal (0: no bound); a partition
	// that lasts must not fill the disk.
	maxEntries int
	maxBytes   int64
	// disk hears of every append's outcome (SetDiskWatch); nil: nobody.
	disk *DiskWatch
}

// SetDiskWatch makes the journal report its appends' failures for lack of
// room to w: it lives in the data directory, on the same disk as the log.
func (j *Journal) SetDiskWatch(w *DiskWatch) {
	j.mu.Lock()
	j.disk = w
	j.mu.Unlock()
}

// SetLimits bounds the journal to maxEntries records and maxBytes bytes on
// disk; 0 leaves that dimension unbounded. Records already held are kept
// even when they exceed the new limits; only new appends are refused.
func (j *Journal) SetLimits(maxEntries int, maxBytes int64) {
	j.mu.Lock()
	j.maxEntries, j.maxBytes = maxEntries, maxBytes
	j.mu.Unlock()
}

// OpenJournal opens (creating if needed) the journal in dir and reads its
// records. A torn record at the end, from a crash mid-append, is cut off;
// a damaged one before the end is refused with ErrDamaged (and
// ErrJournalCorrupt): the writes after it would be lost without a word.
func OpenJournal(dir string) (*Journal, error) {
	path := filepath.Join(dir, JournalFile)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// Appends are synced, the new file's name must be too: writes
		// acknowledged into a journal the directory forgot would be lost.
		if err := syncDir(dir); err != nil {
			f.Close()
			return nil, fmt.Errorf("sync data directory after creating the journal: %w", err)
		}
	}
	records, good, err := readJournal(f)
	if err != nil {
		f.Close()
		return nil, damaged(dir, path, fmt.Errorf("the AP fallback journal is damaged: %w", err))
	}
	if err := f.Truncate(good); err != nil {
		f.Close()
		return nil, fmt.Errorf("truncate torn journal tail: %w", err)
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek journal: %w", err)
	}
	return &Journal{path: path, f: f, records: records, size: good}, nil
}

// readJournal returns the records and the offset after the last whole one.
func readJournal(r io.Reader) ([][]byte, int64, error) {
	br := bufio.NewReader(r)
	var out [][]byte
	var off int64
	for {
		var head [8]byte
		if _, err := io.ReadFull(br, head[:]); err != nil {
			return out, off, nil // end, or a torn header
		}
		n := binary.BigEndian.Uint32(head[:4])
		if n == 0 {
			// Append writes no empty record. Zeros are how a file looks
			// that grew before its data reached the disk: a torn append
			// when nothing but zeros follows, damage when data does.
			if allZeros(head[:]) && zerosToEnd(br) {
				return out, off, nil
			}
			return nil, 0, fmt.Errorf("%w: an empty record at offset %d", ErrJournalCorrupt, off)
		}
		if n > maxJournalRecord {
			return nil, 0, fmt.Errorf("%w: record of %d bytes at offset %d", ErrJournalCorrupt, n, off)
		}
		rec := make([]byte, n)
		if got, err := io.ReadFull(br, rec); err != nil {
			// The file ends inside the record: a torn append, unless its
			// length is what is damaged and a whole record follows the
			// header (its bytes match the header's checksum). Cutting the
			// file there would drop that record, and every one after it.
			if holdsWholeRecord(rec[:got], binary.BigEndian.Uint32(head[4:])) {
				return nil, 0, fmt.Errorf("%w: the record at offset %d says %d bytes, but %d bytes after it are a whole record",
					ErrJournalCorrupt, off, n, got)
			}
			return out, off, nil // torn body
		}
		if crc32.Checksum(rec, crcTable) != binary.BigEndian.Uint32(head[4:]) {
			// A bad checksum on the last record is a torn write; earlier it
			// is corruption.
			if _, err := br.Peek(1); err == io.EOF {
				return out, off, nil
			}
			return nil, 0, fmt.Errorf("%w: bad checksum at offset %d", ErrJournalCorrupt, off)
		}
		out = append(out, rec)
		off += 8 + int64(n)
	}
}

// holdsWholeRecord reports whether a non-empty prefix of b has the CRC-32C
// sum. One pass over b: a record is at most maxJournalRecord bytes, and
// only a journal whose last record is cut short is read this way.
func holdsWholeRecord(b []byte, sum uint32) bool {
	crc := uint32(0)
	for i := range b {
		if crc = crc32.Update(crc, crcTable, b[i:i+1]); crc == sum {
			return true
		}
	}
	return false
}

// allZeros reports whether b holds nothing but zero bytes.
func allZeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// zerosToEnd reads r to its end and reports whether it held nothing but
// zero bytes.
func zerosToEnd(r io.Reader) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if !allZeros(buf[:n]) {
			return false
		}
		if err != nil {
			return err == io.EOF
		}
	}
}

// ReadJournal decodes journal bytes (for tools, tests and fuzzing).
func ReadJournal(r io.Reader) ([][]byte, error) {
	recs, _, err := readJournal(r)
	return recs, err
}

// Append adds a record and syncs it to disk before returning. It refuses
// with ErrJournalFull when the record would exceed the limits, and refuses
// an empty record.
func (j *Journal) Append(rec []byte) error {
	if len(rec) == 0 {
		// On disk an empty record is indistinguishable from zeros.
		return errors.New("empty journal record")
	}
	if len(rec) > maxJournalRecord {
		return fmt.Errorf("journal record of %d bytes is too large", len(rec))
	}
	buf := appendFrame(make([]byte, 0, frameLen(len(rec))), rec)
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.room(len(buf)); err != nil {
		return err
	}
	if err := fault("append journal", len(rec)); err != nil {
		return j.disk.Check(fmt.Errorf("append journal: %w", err))
	}
	if _, err := j.f.Write(buf); err != nil {
		return j.disk.Check(j.cutBack(fmt.Errorf("append journal: %w", err)))
	}
	if err := j.f.Sync(); err != nil {
		return j.disk.Check(j.cutBack(fmt.Errorf("sync journal: %w", err)))
	}
	j.records = append(j.records, append([]byte(nil), rec...))
	j.size += int64(len(buf))
	return nil
}

// Room reports, with Append's ErrJournalFull, when a record of n bytes
// would not fit the journal's limits now: a caller that must act before
// the append (and undo nothing after it) asks first.
func (j *Journal) Room(n int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.room(frameLen(n))
}

// room is Room for a frame of n bytes; j.mu must be held.
func (j *Journal) room(n int) error {
	if j.maxEntries > 0 && len(j.records) >= j.maxEntries {
		return fmt.Errorf("%w: %d of %d entries", ErrJournalFull, len(j.records), j.maxEntries)
	}
	if j.maxBytes > 0 && j.size+int64(n) > j.maxBytes {
		return fmt.Errorf("%w: %d bytes held, %d more exceed the limit of %d", ErrJournalFull, j.size, n, j.maxBytes)
	}
	return nil
}

// cutBack removes what a failed append left after the last whole record
// and returns err. A full disk takes part of a record: left in place, the
// next append would follow it, and on the next open that torn record would
// sit before good ones, which reads as corruption. A record that failed
// its sync is cut too: it was not acknowledged, so it must not be
// replayed. j.mu must be held.
func (j *Journal) cutBack(err error) error {
	if terr := j.f.Truncate(j.size); terr != nil {
		return fmt.Errorf("%w (and cutting the failed append off failed: %v)", err, terr)
	}
	if _, serr := j.f.Seek(j.size, io.SeekStart); serr != nil {
		return fmt.Errorf("%w (and seeking past the last record failed: %v)", err, serr)
	}
	return err
}

// Records returns the records in append order.
func (j *Journal) Records() [][]byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([][]byte(nil), j.records...)
}

// Len is the number of records; Size their bytes on disk.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.records)
}

// Size is the journal's size on disk.
func (j *Journal) Size() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size
}

// DropFirst removes the first n records (after they were replayed) by
// rewriting the file.
func (j *Journal) DropFirst(n int) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	n = min(n, len(j.records))
	if n == 0 {
		return nil
	}
	rest := j.records[n:]
	var buf []byte
	for _, rec := range rest {
		buf = appendFrame(buf, rec)
	}
	// A new file renamed over the old one: cut in place, a failed rewrite
	// (a full disk) left the records not replayed yet neither in the file
	// nor anywhere else once the node stopped. The journal appends to the
	// very file it renamed, kept open: a handle opened again after the
	// rename could fail, and appends then synced to the old, unlinked
	// file would be acknowledged and lost.
	f, err := replaceFile(j.path, buf)
	if f == nil {
		return j.disk.Check(fmt.Errorf("rewrite journal: %w", err))
	}
	_ = j.f.Close()
	j.f = f
	j.records = append([][]byte(nil), rest...)
	j.size = int64(len(buf))
	if err != nil {
		// The rename may not outlive a crash: the records dropped would
		// then be replayed again, which replay allows (at least once).
		return j.disk.Check(fmt.Errorf("rewrite journal: sync its directory: %w", err))
	}
	return nil
}

// Close closes the file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}

// frameLen is the size on disk of a record of n bytes (appendFrame).
func frameLen(n int) int { return 8 + n }

// appendFrame appends rec to dst as the journal stores it: its length and
// CRC-32C, 4 bytes each, big-endian, then its bytes.
func appendFrame(dst, rec []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(rec)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(rec, crcTable))
	return append(dst, rec...)
}
