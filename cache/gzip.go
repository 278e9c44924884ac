package cache

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
)

// Documents are made of segments, and the large ones (an application's
// encoding, which the full registry, the application's own document, its
// VIPs and the delta share) are held compressed only: a Piece is a
// segment deflated on its own and ended with a sync flush, which leaves
// the compressed stream byte-aligned and independent of what came before.
// The builder makes a segment's piece once, when it encodes the segment,
// and drops the plain bytes; every document holding the segment holds the
// same piece. A document's gzip form is a header, its segments' pieces
// (and small segments as stored blocks) in turn and a trailer whose
// CRC-32 is combined from the pieces' own: an ordinary one-member gzip
// stream, written piece by piece and never copied into one buffer. Its
// plain form is the pieces inflated one after the other (plain.go).

// storedMax is the size up to which a plain segment is written as a
// stored (uncompressed) block of its own document instead of being
// compressed: separators, prefixes and suffixes are a few bytes, which a
// stored block carries for 5 bytes more, where a compressed piece costs a
// flate writer's flush.
const storedMax = 128

var (
	// gzipHeader is a gzip member header: deflate, no name, no time,
	// unknown OS.
	gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	// finalBlock is an empty final stored block: it ends the deflate
	// stream after the last segment's sync flush.
	finalBlock = []byte{1, 0, 0, 0xff, 0xff}
)

// Piece is one segment deflated and sync-flushed, with the segment's
// CRC-32, its length and the operator that shifts a CRC past it (for
// combining). It is immutable: documents share it.
type Piece struct {
	z     []byte // the deflated segment; finalBlock follows it in its array
	crc   uint32
	shift uint32
	n     int
}

// Len returns the length of the plain segment.
func (p *Piece) Len() int { return p.n }

// stream is the piece as a deflate stream of its own: z and the empty
// final block NewPiece put after it in the same array, so that a flate
// reader inflates the piece alone and ends cleanly, reading one slice.
func (p *Piece) stream() []byte { return p.z[:len(p.z)+len(finalBlock)] }

// deflater is a flate writer and the buffer it compresses a piece into
// before the piece is copied out at its exact size, kept together in a
// pool: a buffer of its own for each piece was most of what a document's
// build allocated (12 KB of 16 for each application of 20 instances).
type deflater struct {
	w   *flate.Writer
	buf bytes.Buffer
}

// pieceLevel is the pieces' compression level. Every change to an
// application recompresses its piece, on the path from the change to its
// blocking readers, and every plain read inflates pieces. The flate of
// github.com/klauspost/compress at level 2 compresses an application of 20
// instances (38 KB) in three quarters of the time of the standard
// library's BestSpeed, to 7 % fewer bytes, and inflates it in two thirds
// of the time (BenchmarkPiece); the output is ordinary deflate either way.
const pieceLevel = 2

var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, pieceLevel) // a valid level: no error
	return &deflater{w: w}
}}

// deflaterBufMax is the largest buffer a deflater goes back to the pool
// with: the piece of an application of thousands of instances is MBs,
// not worth keeping for the next piece.
const deflaterBufMax = 1 << 20

// NewPiece compresses seg into a piece; seg is not retained.
func NewPiece(seg []byte) *Piece {
	d := deflaters.Get().(*deflater)
	d.buf.Reset()
	d.w.Reset(&d.buf)
	_, _ = d.w.Write(seg) // writes to a bytes.Buffer do not fail
	_ = d.w.Flush()
	d.w.Reset(nil)
	// Exact size: the piece lives as long as the documents holding it.
	// The final block follows it in the same array, outside z (see stream).
	zf := append(append(make([]byte, 0, d.buf.Len()+len(finalBlock)), d.buf.Bytes()...), finalBlock...)
	p := &Piece{z: zf[:d.buf.Len()], crc: crc32.ChecksumIEEE(seg), shift: crcShift(len(seg)), n: len(seg)}
	if d.buf.Cap() > deflaterBufMax {
		d.buf = bytes.Buffer{}
	}
	deflaters.Put(d)
	return p
}

// Segment is one part of a document: plain bytes, or a compressed piece.
type Segment struct {
	b []byte
	p *Piece
}

// Plain makes a segment of b, held as it is (b must not be modified
// afterwards). Small ones (separators, prefixes) stay plain in the gzip
// form too; larger ones are compressed when the gzip form is first made.
func Plain(b []byte) Segment { return Segment{b: b} }

// Compressed makes a segment of a piece.
func Compressed(p *Piece) Segment { return Segment{p: p} }

// PlainSegments makes a plain segment of each of bs.
func PlainSegments(bs ...[]byte) []Segment {
	segs := make([]Segment, len(bs))
	for i, b := range bs {
		segs[i] = Plain(b)
	}
	return segs
}

// Len returns the segment's plain length.
func (s Segment) Len() int {
	if s.p != nil {
		return s.p.n
	}
	return len(s.b)
}

// Piece returns the segment's piece, nil for a plain segment.
func (s Segment) Piece() *Piece { return s.p }

// gzDoc is a document's gzip form.
type gzDoc struct {
	// parts are written in turn: the header with the first stored blocks,
	// the pieces and the stored blocks between them, the final block and
	// the trailer.
	parts [][]byte
	n     int
}

// gzipSegments assembles the gzip form of the concatenation of segments.
// Pieces are used as they are; a large plain segment is compressed for
// this document alone.
func gzipSegments(segments []Segment) *gzDoc {
	d := &gzDoc{parts: make([][]byte, 0, len(segments)/2+3)}
	// own gathers the bytes of this document only (header, stored blocks,
	// trailer) between two pieces.
	own := append(make([]byte, 0, 64), gzipHeader...)
	var crc, total uint32 // gzip keeps the length modulo 2^32
	for _, seg := range segments {
		p := seg.p
		switch {
		case p == nil && len(seg.b) == 0:
			continue
		case p == nil && len(seg.b) <= storedMax:
			// A non-final stored block: header bits 000, padded to the byte.
			own = append(own, 0)
			own = binary.LittleEndian.AppendUint16(own, uint16(len(seg.b)))
			own = binary.LittleEndian.AppendUint16(own, ^uint16(len(seg.b)))
			own = append(own, seg.b...)
			crc = crc32.Update(crc, crc32.IEEETable, seg.b)
			total += uint32(len(seg.b))
			continue
		case p == nil:
			p = NewPiece(seg.b)
		}
		if p.n == 0 {
			continue
		}
		if len(own) > 0 {
			d.parts = append(d.parts, own)
			own = make([]byte, 0, 64)
		}
		d.parts = append(d.parts, p.z)
		crc = crcMul(p.shift, crc) ^ p.crc
		total += uint32(p.n)
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
