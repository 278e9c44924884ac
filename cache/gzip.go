package cache

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"sync"
)

// Gzip by segment. Documents are built from segments that other documents
// and earlier builds share (one per application); compressing the whole
// body again after each change would cost far more than building it (the
// full registry at 10,000 instances is 18 MB). Instead each segment is
// deflated on its own and ended with a sync flush, which leaves the
// compressed stream byte-aligned and independent of what came before, so
// the compressed pieces of unchanged segments are reused as they are and
// concatenated between a gzip header and trailer; the trailer's CRC-32 is
// combined from the segments' own. The result is an ordinary one-member
// gzip stream.

// gzSlot holds the compressed pieces of the last gzipped build of one key,
// for the next build of that key to reuse.
type gzSlot struct {
	mu     sync.Mutex
	pieces map[pieceID]piece
}

// pieceID names a segment: by its backing array and length (segments are
// never modified, and the map holding the piece keeps the array alive, so
// the address cannot be reused), or, for small segments that builds make
// afresh (separators, a document's prefix), by content.
type pieceID struct {
	p *byte
	n int
	s string
}

// smallSegment is the size under which segments are named by content.
const smallSegment = 64

func idOf(seg []byte) pieceID {
	if len(seg) < smallSegment {
		return pieceID{s: string(seg)}
	}
	return pieceID{p: &seg[0], n: len(seg)}
}

// piece is one segment deflated and sync-flushed, with its CRC-32 and the
// operator that shifts a CRC past it (for combining).
type piece struct {
	z     []byte
	crc   uint32
	shift uint32
}

var flaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// gzipSegments returns the gzip stream of the concatenation of segments,
// reusing slot's pieces where the segments are the same, and leaves in slot
// the pieces of these segments.
func gzipSegments(segments [][]byte, slot *gzSlot) []byte {
	slot.mu.Lock()
	defer slot.mu.Unlock()
	fw := flaters.Get().(*flate.Writer)
	defer flaters.Put(fw)
	next := make(map[pieceID]piece, len(segments))
	var buf bytes.Buffer
	pieces := make([]piece, 0, len(segments))
	size, total := 0, 0
	for _, seg := range segments {
		if len(seg) == 0 {
			continue
		}
		id := idOf(seg)
		pc, ok := next[id]
		if !ok {
			pc, ok = slot.pieces[id]
		}
		if !ok {
			buf.Reset()
			fw.Reset(&buf)
			_, _ = fw.Write(seg)
			_ = fw.Flush()
			pc = piece{z: bytes.Clone(buf.Bytes()), crc: crc32.ChecksumIEEE(seg), shift: crcShift(len(seg))}
		}
		next[id] = pc
		pieces = append(pieces, pc)
		size += len(pc.z)
		total += len(seg)
	}
	slot.pieces = next

	out := make([]byte, 0, 10+size+5+8)
	out = append(out, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff) // gzip header: deflate, no name, no mtime, OS unknown
	var crc uint32
	for _, pc := range pieces {
		out = append(out, pc.z...)
		crc = crcMul(pc.shift, crc) ^ pc.crc
	}
	out = append(out, 1, 0, 0, 0xff, 0xff) // the final block: stored, empty
	out = binary.LittleEndian.AppendUint32(out, crc)
	return binary.LittleEndian.AppendUint32(out, uint32(total))
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
