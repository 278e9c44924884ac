package cache

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"io"
	"runtime"
	"sync"
	"weak"
)

// Gzip from shared pieces. Documents are built from segments that other
// documents and earlier builds share (one per application and format: the
// full registry, the application's own document, its VIPs and, after a
// registration burst, the delta hold the same fragment). Each segment is
// deflated on its own and ended with a sync flush, which leaves the
// compressed stream byte-aligned and independent of what came before, so
// the compressed form of a segment (its piece) is made once and shared by
// every gzip document holding the segment: a document's gzip form is a
// header, its segments' pieces in turn and a trailer whose CRC-32 is
// combined from the pieces' own, an ordinary one-member gzip stream that
// is written piece by piece and never copied into one buffer.
//
// The piece store finds a segment's piece. It holds its pieces weakly: a
// piece lives while some document holding it does (a document keeps its
// pieces), and leaves the store when the last such document is collected,
// so the store never holds more than the documents alive use.

// storedMax is the size up to which a segment is written as a stored
// (uncompressed) block of its own document instead of a shared piece:
// separators, prefixes and suffixes are a few bytes, which a stored block
// carries for 5 bytes more, where a compressed piece costs a flate
// writer's flush and an entry in the store.
const storedMax = 128

var (
	// gzipHeader is a gzip member header: deflate, no name, no time,
	// unknown OS.
	gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	// finalBlock is an empty final stored block: it ends the deflate
	// stream after the last segment's sync flush.
	finalBlock = []byte{1, 0, 0, 0xff, 0xff}
)

// piece is one segment deflated and sync-flushed, with the segment's
// CRC-32, its length and the operator that shifts a CRC past it (for
// combining).
type piece struct {
	z     []byte
	crc   uint32
	shift uint32
	n     int
}

// segKey names a segment by its first byte and length: segments are never
// modified, and a weak pointer names one object for as long as it lives
// (and never another after it is collected), so a key cannot come to name
// other bytes.
type segKey struct {
	p weak.Pointer[byte]
	n int
}

// pieceStore finds the pieces of segments that documents alive hold.
type pieceStore struct {
	mu sync.Mutex
	m  map[segKey]weak.Pointer[piece]
}

func newPieceStore() *pieceStore {
	return &pieceStore{m: map[segKey]weak.Pointer[piece]{}}
}

// len returns the number of entries (tests).
func (s *pieceStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// get returns seg's piece, from the store when a document alive holds
// one, else deflating seg and storing the result. s nil stores nothing.
func (s *pieceStore) get(seg []byte) *piece {
	if s == nil {
		return deflate(seg)
	}
	k := segKey{weak.Make(&seg[0]), len(seg)}
	s.mu.Lock()
	p := s.m[k].Value()
	s.mu.Unlock()
	if p != nil {
		return p
	}
	p = deflate(seg) // outside the lock: builds of other documents go on
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.m[k].Value(); q != nil {
		return q // a concurrent build stored one first: share that
	}
	w := weak.Make(p)
	s.m[k] = w
	runtime.AddCleanup(p, s.forget, storeEntry{k, w})
	return p
}

type storeEntry struct {
	k segKey
	w weak.Pointer[piece]
}

// forget removes a collected piece's entry, unless a newer piece of the
// same segment took its place.
func (s *pieceStore) forget(e storeEntry) {
	s.mu.Lock()
	if s.m[e.k] == e.w {
		delete(s.m, e.k)
	}
	s.mu.Unlock()
}

var flaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // BestSpeed is a valid level: no error
	return w
}}

// deflate makes seg's piece.
func deflate(seg []byte) *piece {
	var buf bytes.Buffer
	buf.Grow(len(seg)/4 + 64)
	fw := flaters.Get().(*flate.Writer)
	fw.Reset(&buf)
	_, _ = fw.Write(seg) // writes to a bytes.Buffer do not fail
	_ = fw.Flush()
	fw.Reset(nil)
	flaters.Put(fw)
	// Exact size: the piece lives as long as the documents holding it.
	return &piece{z: bytes.Clone(buf.Bytes()), crc: crc32.ChecksumIEEE(seg), shift: crcShift(len(seg)), n: len(seg)}
}

// gzDoc is a document's gzip form.
type gzDoc struct {
	// parts are written in turn: the header with the first stored blocks,
	// the pieces and the stored blocks between them, the final block and
	// the trailer.
	parts [][]byte
	// held keeps the shared pieces alive while the document is.
	held []*piece
	n    int
}

// gzipSegments assembles the gzip form of the concatenation of segments,
// taking the pieces of the larger segments from store.
func gzipSegments(segments [][]byte, store *pieceStore) *gzDoc {
	d := &gzDoc{parts: make([][]byte, 0, len(segments)/2+3)}
	// own gathers the bytes of this document only (header, stored blocks,
	// trailer) between two pieces.
	own := append(make([]byte, 0, 64), gzipHeader...)
	var crc, total uint32 // gzip keeps the length modulo 2^32
	for _, seg := range segments {
		switch {
		case len(seg) == 0:
			continue
		case len(seg) <= storedMax:
			// A non-final stored block: header bits 000, padded to the byte.
			own = append(own, 0)
			own = binary.LittleEndian.AppendUint16(own, uint16(len(seg)))
			own = binary.LittleEndian.AppendUint16(own, ^uint16(len(seg)))
			own = append(own, seg...)
			crc = crc32.Update(crc, crc32.IEEETable, seg)
		default:
			p := store.get(seg)
			if len(own) > 0 {
				d.parts = append(d.parts, own)
				own = make([]byte, 0, 64)
			}
			d.parts = append(d.parts, p.z)
			d.held = append(d.held, p)
			crc = crcMul(p.shift, crc) ^ p.crc
		}
		total += uint32(len(seg))
	}
	own = append(own, finalBlock...)
	own = binary.LittleEndian.AppendUint32(own, crc)
	own = binary.LittleEndian.AppendUint32(own, total)
	d.parts = append(d.parts, own)
	for _, p := range d.parts {
		d.n += len(p)
	}
	return d
}

// joinParts returns parts, of n bytes in all, as one new slice.
func joinParts(parts [][]byte, n int) []byte {
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// writeParts writes parts to w in turn.
func writeParts(w io.Writer, parts [][]byte) (int64, error) {
	var n int64
	for _, p := range parts {
		m, err := w.Write(p)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// CRC-32 (IEEE, reflected) arithmetic modulo its polynomial, for combining
// the CRCs of concatenated pieces: crc(A·B) = x^(8·len B) · crc(A) + crc(B).

const crcPoly = 0xedb88320

// crcMul multiplies a and b modulo the CRC polynomial (bit 31 is x^0).
func crcMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// crcPow2 holds x^(2^k) modulo the polynomial.
var crcPow2 = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = crcMul(p, p)
	}
	return t
}()

// crcShift is x^(8·n) modulo the polynomial: multiplying a CRC by it moves
// the CRC past n zero bytes.
func crcShift(n int) uint32 {
	p := uint32(1) << 31 // x^0
	bits := uint64(n) * 8
	for k := 0; bits != 0; k++ {
		if bits&1 != 0 {
			p = crcMul(crcPow2[k], p)
		}
		bits >>= 1
	}
	return p
}
