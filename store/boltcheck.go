package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// CheckLogFile reads the log file at path (a bolt database written by
// raft-boltdb) on its own, with bounds checked reads, as Open does before
// bbolt opens it. It takes no lock: for tools and tests, on a directory no
// node is running on.
//
// bbolt trusts its file: it reads pages through a memory map and follows
// the page ids and offsets it finds there. With NoFreelistSync it also
// walks every page reachable from the root when it opens, and reports what
// that walk finds wrong by panicking in a goroutine of its own, where no
// recover can reach; a page id past the end of a truncated file is a fault
// in the mapping, fatal to the process. So a damaged log made heureka crash
// with a Go panic (exit 2) instead of saying what is wrong. CheckLogFile
// makes the same walk as bbolt (the valid meta page with the highest
// transaction id, then every branch and leaf page of every bucket: page
// ids below the high-water mark, each page where its header says and
// reached once, of a branch or leaf type, keys in order within their
// parents' bounds) and adds what bbolt takes for granted: the file holds
// every page the meta page counts, and every element, key and value lies
// within its page. Past that it decodes each Raft log entry, checks that it
// is stored under its own index, and notes where indexes are missing (an
// undecodable entry, or a missing one Raft needs, is a panic inside Raft
// once it applies it).
//
// Only reachable pages are read: bbolt keeps no checksum of data pages, so
// damage confined to free pages goes unseen, and is harmless. Entries'
// command bytes have no checksum either; damage there that still decodes
// is not seen.
func CheckLogFile(path string) (LogCheck, error) {
	f, err := os.Open(path)
	if err != nil {
		return LogCheck{}, fmt.Errorf("open: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return LogCheck{}, fmt.Errorf("stat: %w", err)
	}
	w := &boltWalk{r: f, size: fi.Size()}
	if err := w.run(); err != nil {
		return LogCheck{}, err
	}
	w.info.PageSize, w.info.inUse = w.ps, w.seen
	return w.info, nil
}

// LogCheck is what CheckLogFile found in a log file.
type LogCheck struct {
	// FirstIndex and LastIndex are the log's first and last entries (0
	// when it holds none); Entries how many it holds.
	FirstIndex, LastIndex uint64
	Entries               int
	// GapFrom..GapTo is the last run of indexes missing between them (0,
	// 0: none).
	GapFrom, GapTo uint64
	// Pages is how many pages were read, PageSize their size.
	Pages    int
	PageSize int
	// inUse has a bit per page the walk reached.
	inUse []uint64
}

// InUse reports whether bytes [off, off+n) of the file touch a page bolt
// uses: one the check reads. The other pages are free (or past the last
// page) and may hold anything; damage there harms nothing.
func (c LogCheck) InUse(off, n int64) bool {
	if c.PageSize == 0 || n <= 0 || off < 0 {
		return false
	}
	for p := off / int64(c.PageSize); p <= (off+n-1)/int64(c.PageSize) && p < int64(len(c.inUse))*64; p++ {
		if c.inUse[p/64]&(1<<(p%64)) != 0 {
			return true
		}
	}
	return false
}

// bbolt's on-disk format (go.etcd.io/bbolt, page.go and db.go), version 2.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltPageHeader  = 16 // id u64, flags u16, count u16, overflow u32
	boltElementSize = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	boltMetaSize    = 64 // magic, version, pageSize, flags u32; root, sequence, freelist, pgid, txid, checksum u64
	boltBucketSize  = 16 // a bucket's value: root u64, sequence u64
	boltNoFreelist  = ^uint64(0)
	// Page types.
	boltBranch   = 0x01
	boltLeaf     = 0x02
	boltMeta     = 0x04
	boltFreelist = 0x10
	// A leaf element that is a bucket.
	boltBucketLeaf = 0x01
	// maxTreeDepth bounds the walk: bolt's trees are a few levels deep, a
	// deeper one is a loop of damaged page ids.
	maxTreeDepth = 64
)

// logsBucket is raft-boltdb's bucket of log entries (raft-boltdb/v2,
// bolt_store.go).
var logsBucket = []byte("logs")

type boltMetaPage struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) are in use or free
	txid     uint64
}

// boltWalk is one check of a bolt file.
type boltWalk struct {
	r    io.ReaderAt
	size int64
	ps   int
	meta boltMetaPage
	// seen has a bit per page id reached.
	seen []uint64
	// bufs holds a page buffer per tree depth: a branch page stays in
	// its buffer while its children are read.
	bufs  [][]byte
	dec   *codec.Decoder
	entry raft.Log
	info  LogCheck
}

func (w *boltWalk) run() error {
	if err := w.readMeta(); err != nil {
		return err
	}
	if need := int64(w.meta.pgid) * int64(w.ps); w.size < need {
		return fmt.Errorf("truncated: %d bytes, but its meta page counts %d pages of %d bytes (%d bytes)",
			w.size, w.meta.pgid, w.ps, need)
	}
	w.seen = make([]uint64, (w.meta.pgid+63)/64)
	w.mark(0, 1) // the meta pages
	if w.meta.freelist != boltNoFreelist {
		if err := w.checkFreelist(); err != nil {
			return err
		}
	}
	w.dec = codec.NewDecoderBytes(nil, &codec.MsgpackHandle{})
	if err := w.walkBucket(w.meta.root, nil, 0, bucketRoot); err != nil {
		return err
	}
	return nil
}

// readMeta picks the meta page bbolt would: the valid one with the highest
// transaction id. The page size comes from the first valid one, as bbolt's
// getPageSize finds it.
func (w *boltWalk) readMeta() error {
	m0, err0 := w.metaAt(0)
	if err0 == nil {
		w.ps = int(m0.pageSize)
	} else {
		// Page 0 is damaged: look for page 1 at each page size bolt
		// supports, as bbolt does.
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= w.size-1024 {
				break
			}
			if m1, err := w.metaAt(pos); err == nil && int64(m1.pageSize) == pos {
				w.ps = int(m1.pageSize)
				break
			}
		}
	}
	if w.ps == 0 {
		if w.size < boltPageHeader+boltMetaSize {
			return fmt.Errorf("not a log file: %d bytes, too short for bolt's meta page", w.size)
		}
		return fmt.Errorf("not a log file, or both meta pages are damaged (invalid database)")
	}
	m1, err1 := w.metaAt(int64(w.ps))
	switch {
	case err0 == nil && (err1 != nil || m0.txid >= m1.txid):
		w.meta = m0
	case err1 == nil:
		w.meta = m1
	}
	if w.meta.pageSize != uint32(w.ps) {
		return fmt.Errorf("the meta pages disagree on the page size (%d and %d)", m0.pageSize, m1.pageSize)
	}
	if w.meta.pgid < 3 || w.meta.root < 2 || w.meta.root >= w.meta.pgid {
		return fmt.Errorf("meta page names root page %d of %d pages", w.meta.root, w.meta.pgid)
	}
	return nil
}

// metaAt reads and validates the meta page at offset off.
func (w *boltWalk) metaAt(off int64) (boltMetaPage, error) {
	var buf [boltPageHeader + boltMetaSize]byte
	if _, err := w.r.ReadAt(buf[:], off); err != nil {
		return boltMetaPage{}, err
	}
	b := buf[boltPageHeader:]
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != boltMagic || le.Uint32(b[4:]) != boltVersion {
		return boltMetaPage{}, errors.New("no bolt meta page")
	}
	h := fnv.New64a()
	h.Write(b[:56])
	if h.Sum64() != le.Uint64(b[56:]) {
		return boltMetaPage{}, errors.New("meta page checksum")
	}
	m := boltMetaPage{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]),
		pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}
	if m.pageSize < 1024 || m.pageSize > 1<<24 || m.pageSize&(m.pageSize-1) != 0 {
		return boltMetaPage{}, fmt.Errorf("page size %d", m.pageSize)
	}
	return m, nil
}

// mark records pages id..id+overflow as reached, and reports whether one
// of them was reached before.
func (w *boltWalk) mark(id, overflow uint64) bool {
	twice := false
	for p := id; p <= id+overflow; p++ {
		bit := uint64(1) << (p % 64)
		twice = twice || w.seen[p/64]&bit != 0
		w.seen[p/64] |= bit
	}
	return twice
}

// readPage reads page id, with its overflow pages, into the buffer of the
// given depth, and checks its header: a page that exists, where its header
// says, of the wanted type (want: a mask of types), reached once.
func (w *boltWalk) readPage(id uint64, depth int, want uint16) ([]byte, error) {
	if id < 2 || id >= w.meta.pgid {
		return nil, fmt.Errorf("a reference to page %d, outside pages 2..%d", id, w.meta.pgid-1)
	}
	for len(w.bufs) <= depth {
		w.bufs = append(w.bufs, make([]byte, w.ps))
	}
	buf := w.bufs[depth][:w.ps]
	if _, err := w.r.ReadAt(buf, int64(id)*int64(w.ps)); err != nil {
		return nil, fmt.Errorf("read page %d: %w", id, err)
	}
	le := binary.LittleEndian
	hid, flags, overflow := le.Uint64(buf[0:]), le.Uint16(buf[8:]), uint64(le.Uint32(buf[12:]))
	if hid != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, hid)
	}
	if flags&want == 0 || flags&(flags-1) != 0 {
		return nil, fmt.Errorf("page %d has type %#x, not a %s page", id, flags, pageTypes(want))
	}
	if id+overflow >= w.meta.pgid {
		return nil, fmt.Errorf("page %d runs %d pages past the last page %d", id, overflow, w.meta.pgid-1)
	}
	if w.mark(id, overflow) {
		return nil, fmt.Errorf("page %d is reached twice", id)
	}
	w.info.Pages += 1 + int(overflow)
	if overflow > 0 {
		n := (1 + int(overflow)) * w.ps
		if cap(w.bufs[depth]) < n {
			grown := make([]byte, n)
			copy(grown, buf)
			w.bufs[depth] = grown
		}
		buf = w.bufs[depth][:n]
		if _, err := w.r.ReadAt(buf[w.ps:], int64(id+1)*int64(w.ps)); err != nil {
			return nil, fmt.Errorf("read page %d: %w", id, err)
		}
	}
	return buf, nil
}

func pageTypes(mask uint16) string {
	switch mask {
	case boltBranch | boltLeaf:
		return "branch or leaf"
	case boltFreelist:
		return "freelist"
	}
	return "leaf"
}

// checkFreelist checks the freelist page an older version of the file may
// still name (bbolt reads it at open instead of walking the file).
func (w *boltWalk) checkFreelist() error {
	buf, err := w.readPage(w.meta.freelist, 0, boltFreelist)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	le := binary.LittleEndian
	count, start := uint64(le.Uint16(buf[10:])), uint64(boltPageHeader)
	if count == 0xFFFF { // the count overflows into the first element
		count, start = le.Uint64(buf[boltPageHeader:]), boltPageHeader+8
	}
	if count > uint64(len(buf)-int(start))/8 {
		return fmt.Errorf("freelist page %d lists %d pages, more than it holds", w.meta.freelist, count)
	}
	for i := range count {
		if id := le.Uint64(buf[start+8*i:]); id < 2 || id >= w.meta.pgid {
			return fmt.Errorf("freelist page %d lists page %d, outside pages 2..%d", w.meta.freelist, id, w.meta.pgid-1)
		}
	}
	return nil
}

// bucketKind says what a bucket's values are.
type bucketKind int

const (
	bucketRoot  bucketKind = iota // the file's root: raft-boltdb's buckets
	bucketLogs                    // Raft log entries by index
	bucketOther                   // anything else (the stable store's keys)
)

// walkBucket walks the tree of the bucket whose root is page root, or,
// with root 0, the inline bucket whose page is inline.
func (w *boltWalk) walkBucket(root uint64, inline []byte, depth int, kind bucketKind) error {
	if depth > maxTreeDepth {
		return fmt.Errorf("buckets nested deeper than %d levels", maxTreeDepth)
	}
	if root == 0 {
		if len(inline) < boltPageHeader || binary.LittleEndian.Uint16(inline[8:])&boltLeaf == 0 {
			return fmt.Errorf("an inline bucket that holds no leaf")
		}
		_, err := w.walkLeaf(0, inline, depth, kind, nil, nil)
		return err
	}
	_, err := w.walkPage(root, depth, kind, nil, nil)
	return err
}

// walkPage reads page id and the tree below it. Every key must be at
// least lo and below hi (nil: unbounded), as bbolt's search assumes. It
// returns the subtree's last key.
func (w *boltWalk) walkPage(id uint64, depth int, kind bucketKind, lo, hi []byte) ([]byte, error) {
	if depth > maxTreeDepth {
		return nil, fmt.Errorf("a tree deeper than %d levels at page %d", maxTreeDepth, id)
	}
	buf, err := w.readPage(id, depth, boltBranch|boltLeaf)
	if err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint16(buf[8:])&boltLeaf != 0 {
		return w.walkLeaf(id, buf, depth, kind, lo, hi)
	}
	le := binary.LittleEndian
	count := int(le.Uint16(buf[10:]))
	if count == 0 || boltPageHeader+count*boltElementSize > len(buf) {
		return nil, fmt.Errorf("branch page %d has %d elements, which do not fit it", id, count)
	}
	var last []byte
	runMin := lo
	for i := range count {
		key, child, err := branchElement(buf, i)
		if err != nil {
			return nil, fmt.Errorf("branch page %d element %d: %v", id, i, err)
		}
		if err := keyInOrder(key, runMin, hi, i == 0); err != nil {
			return nil, fmt.Errorf("branch page %d element %d: %v", id, i, err)
		}
		next := hi
		if i+1 < count {
			if next, _, err = branchElement(buf, i+1); err != nil {
				return nil, fmt.Errorf("branch page %d element %d: %v", id, i+1, err)
			}
		}
		// The children below use the buffers of deeper levels; buf (and
		// so key and next) stays as it is.
		if last, err = w.walkPage(child, depth+1, kind, key, next); err != nil {
			return nil, err
		}
		runMin = last
	}
	return last, nil
}

// branchElement returns the key and child page of element i of a branch page.
func branchElement(buf []byte, i int) ([]byte, uint64, error) {
	le := binary.LittleEndian
	off := boltPageHeader + i*boltElementSize
	pos, ksize := uint64(le.Uint32(buf[off:])), uint64(le.Uint32(buf[off+4:]))
	start := uint64(off) + pos
	if start+ksize > uint64(len(buf)) {
		return nil, 0, fmt.Errorf("key of %d bytes at %d runs past the page", ksize, start)
	}
	return buf[start : start+ksize], le.Uint64(buf[off+8:]), nil
}

// keyInOrder checks a key against the one before it on its page (or, for
// a page's first key, the lower bound from its parent) and the parent's
// upper bound, as bbolt's own check does.
func keyInOrder(key, prev, hi []byte, first bool) error {
	if prev != nil && (bytes.Compare(key, prev) < 0 || !first && bytes.Equal(key, prev)) {
		return fmt.Errorf("key %x out of order after %x", key, prev)
	}
	if hi != nil && bytes.Compare(key, hi) >= 0 {
		return fmt.Errorf("key %x not below its parent's next key %x", key, hi)
	}
	return nil
}

// walkLeaf checks the elements of leaf page id (0: an inline bucket's page)
// held in buf, and walks the buckets it holds. It returns the last key.
func (w *boltWalk) walkLeaf(id uint64, buf []byte, depth int, kind bucketKind, lo, hi []byte) ([]byte, error) {
	le := binary.LittleEndian
	count := int(le.Uint16(buf[10:]))
	if boltPageHeader+count*boltElementSize > len(buf) {
		return nil, fmt.Errorf("leaf page %d has %d elements, which do not fit it", id, count)
	}
	var key []byte
	prev := lo
	for i := range count {
		off := boltPageHeader + i*boltElementSize
		flags := le.Uint32(buf[off:])
		pos, ksize, vsize := uint64(le.Uint32(buf[off+4:])), uint64(le.Uint32(buf[off+8:])), uint64(le.Uint32(buf[off+12:]))
		start := uint64(off) + pos
		if start+ksize+vsize > uint64(len(buf)) {
			return nil, fmt.Errorf("leaf page %d element %d: %d bytes of key and value at %d run past the page", id, i, ksize+vsize, start)
		}
		key = buf[start : start+ksize]
		value := buf[start+ksize : start+ksize+vsize]
		if err := keyInOrder(key, prev, hi, i == 0); err != nil {
			return nil, fmt.Errorf("leaf page %d element %d: %v", id, i, err)
		}
		prev = key
		if err := w.leafValue(id, i, flags, key, value, depth, kind); err != nil {
			return nil, err
		}
	}
	return key, nil
}

// leafValue checks one key and value of a leaf according to the bucket
// it is in. Only the log's entries are raft-boltdb's business; any other
// bucket (raft-boltdb makes one more, the stable store's) is checked for
// its structure alone.
func (w *boltWalk) leafValue(id uint64, i int, flags uint32, key, value []byte, depth int, kind bucketKind) error {
	if flags&boltBucketLeaf == 0 {
		if kind == bucketLogs {
			return w.logEntry(id, i, key, value)
		}
		return nil
	}
	if kind == bucketLogs {
		return fmt.Errorf("leaf page %d element %d: a bucket %x among the log's entries", id, i, key)
	}
	if len(value) < boltBucketSize {
		return fmt.Errorf("leaf page %d element %d: bucket %q has a value of %d bytes", id, i, key, len(value))
	}
	child := bucketOther
	if kind == bucketRoot && bytes.Equal(key, logsBucket) {
		child = bucketLogs
	}
	return w.walkBucket(binary.LittleEndian.Uint64(value), value[boltBucketSize:], depth+1, child)
}

// logEntry checks one Raft log entry: stored under its own index, decodable,
// and right after the one before.
func (w *boltWalk) logEntry(id uint64, i int, key, value []byte) error {
	if len(key) != 8 {
		return fmt.Errorf("leaf page %d element %d: a log key of %d bytes", id, i, len(key))
	}
	idx := binary.BigEndian.Uint64(key)
	// One entry is decoded over the last, so that its command's bytes
	// reuse the last one's buffer.
	l := &w.entry
	*l = raft.Log{Data: l.Data[:0]}
	w.dec.ResetBytes(value)
	if err := w.dec.Decode(l); err != nil {
		return fmt.Errorf("log entry %d (page %d) does not decode: %v", idx, id, err)
	}
	if l.Index != idx {
		return fmt.Errorf("log entry %d (page %d) holds entry %d", idx, id, l.Index)
	}
	if w.info.Entries > 0 && idx != w.info.LastIndex+1 {
		// Not damage in itself: Raft leaves entries below a snapshot it
		// installed, which it never reads again (checkDir decides).
		w.info.GapFrom, w.info.GapTo = w.info.LastIndex+1, idx-1
	}
	if w.info.Entries == 0 {
		w.info.FirstIndex = idx
	}
	w.info.LastIndex = idx
	w.info.Entries++
	return nil
}
