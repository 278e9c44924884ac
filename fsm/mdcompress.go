package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/flate"
)

// Held compressed, a record's metadata costs a large registry about half
// its bytes. At a million instances with a kilobyte of metadata each
// (BENCHMARKS.md, "The million with `heureka serve`'s defaults, every
// node"), the blocks were 0.9 GB of a node's 2.3 GB live heap, and
// deflate at a fast level holds them in about 0.4 GB. The price is CPU,
// paid at a registration's apply on every node and at every encoding of
// the record into a document: with github.com/klauspost/compress's flate
// at level 2 (blockLevel), 8.5-9.5 µs to compress the bench's kilobyte
// block, to 403 bytes, and 5.2-5.5 µs to inflate it; the standard
// library's BestSpeed took 12.4-13.9 µs, to 435 bytes, and 6.1-6.6 µs
// (BenchmarkMetadataCompression, back to back). Either writes ordinary
// raw deflate, so blocks made by either inflate with the other. A registry
// holding fewer than DefaultCompressAbove instances pays none of it: its
// blocks are at most a few tens of MB, and there a registration burst's
// rate is worth more than they are.
//
// A compressed block is mpCompressed (a byte msgpack never uses, so no
// canonical block starts with it), the CRC-32C of all that follows it,
// the canonical block's length and its number of entries as uvarints (Len
// needs no inflate), and the block as a raw deflate stream. Only
// compressMetadata makes one, from a canonical block, and only for an
// instance's own metadata (its data center's is never compressed, and a
// snapshot reader refuses one that is). A node restoring its own snapshot
// or its leader's checks each block's CRC before the registry holds it
// (checkCompressed): a block damaged on disk or on the wire is refused
// there, and a held block inflates to the canonical block it was made of.
// Inflating every block to check it instead took a restore of a million
// instances from 3 s to 17 s. The CRC is against damage, not against a
// file made to pass it: a snapshot from outside the cluster (an
// operator's restore, ReadSnapshot) has every block inflated and checked
// (checkInflates) before the cluster sees it, since a held block that does
// not inflate to a canonical map panics where it is read.

// DefaultCompressAbove is how many instances a registry holds before it
// seals records with their metadata compressed. Which records are held
// compressed is representation, not content: the log carries canonical
// blocks, and a node that restored a snapshot (which carries blocks as
// they were held) may hold other records compressed than its peers do.
const DefaultCompressAbove = 20_000

const (
	mpCompressed = 0xc1
	crcEnd       = 1 + crc32.Size // where the CRC's bytes end
	// compressMin is the smallest block worth compressing: deflate's
	// own framing and a Huffman table cost a few dozen bytes, and most
	// fleets' metadata (a zone, a port, a version) is smaller than this.
	compressMin = 256
)

// blockLevel is the blocks' compression level (see above): level 1 of the
// same flate compressed faster than the standard library's too, but to
// 463 bytes; levels 3 to 5 were slower and no smaller.
const blockLevel = 2

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	deflaters  = sync.Pool{New: func() any {
		w, err := flate.NewWriter(io.Discard, blockLevel)
		if err != nil {
			panic(err) // only for a level out of range
		}
		return w
	}}
	inflaters = sync.Pool{New: func() any {
		inf := &inflater{}
		inf.r = flate.NewReader(&inf.src)
		return inf
	}}
)

// inflater is a flate reader and the string reader it reads, kept
// together in a pool so that an inflate allocates its output only, and
// for Metadata.Scan not even that: out is the block it inflated last,
// whose array the next Scan reuses.
type inflater struct {
	src strings.Reader
	r   io.ReadCloser
	out []byte
}

// compressed reports whether the block is held compressed.
func (m Metadata) compressed() bool { return m.b != "" && m.b[0] == mpCompressed }

// compressMetadata returns m with its block compressed, or m itself when
// it is nil, already compressed, too small, or would not shrink by an
// eighth.
func compressMetadata(m Metadata) Metadata {
	if len(m.b) < compressMin || m.compressed() {
		return m
	}
	buf := bytes.NewBuffer(blockHead(m, len(m.b)/2))
	w := deflaters.Get().(*flate.Writer)
	w.Reset(buf)
	// Writes to a bytes.Buffer do not fail.
	_, _ = io.WriteString(w, m.b)
	_ = w.Close()
	w.Reset(io.Discard) // do not keep buf alive in the pool
	deflaters.Put(w)
	if buf.Len() > len(m.b)-len(m.b)/8 {
		return m
	}
	// Not copied to its exact size: seal lays the block out in the
	// record, and this buffer is garbage after that.
	out := buf.Bytes()
	sealBlock(out)
	return Metadata{b: stringOf(out)}
}

// blockHead starts a compressed block of m, in an array of size room:
// mpCompressed, the CRC's place (sealBlock fills it once the stream
// follows), and the canonical block's length and number of entries.
func blockHead(m Metadata, room int) []byte {
	count, _ := mapHeader(m.b)
	head := make([]byte, crcEnd, max(room, crcEnd))
	head[0] = mpCompressed
	return binary.AppendUvarint(binary.AppendUvarint(head, uint64(len(m.b))), uint64(count))
}

// sealBlock writes the CRC of a block blockHead started and the stream
// completed.
func sealBlock(b []byte) {
	binary.LittleEndian.PutUint32(b[1:], crc32.Checksum(b[crcEnd:], castagnoli))
}

// compressedBlock is a compressed block's header and stream.
type compressedBlock struct {
	size, count uint64 // the canonical block's length and entries
	crc         uint32
	stream      string
}

// parseCompressed reads a compressed block's header.
func parseCompressed(b string) (compressedBlock, error) {
	var c compressedBlock
	if len(b) < crcEnd {
		return c, fmt.Errorf("compressed block cut short")
	}
	c.crc = binary.LittleEndian.Uint32(bytesOf(b[1:crcEnd]))
	i := crcEnd
	for _, p := range []*uint64{&c.size, &c.count} {
		v, k := binary.Uvarint(bytesOf(b[i:min(len(b), i+binary.MaxVarintLen64)]))
		if k <= 0 || v > maxRecord {
			return c, fmt.Errorf("bad header in a compressed block")
		}
		*p, i = v, i+k
	}
	c.stream = b[i:]
	return c, nil
}

// stringOf views b as a string; b must not change afterwards.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// bytesOf views s as bytes, for the functions that only read a []byte.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// canonical returns the canonical block: b itself, or a compressed block
// inflated into a string of its own.
func (m Metadata) canonical() string {
	if !m.compressed() {
		return m.b
	}
	inf := inflaters.Get().(*inflater)
	defer inflaters.Put(inf)
	return stringOf(inf.mustInflate(nil, m.b))
}

// mustInflate is inflate for a held block.
func (inf *inflater) mustInflate(dst []byte, b string) []byte {
	out, err := inf.inflate(dst, b)
	if err != nil {
		// Every held compressed block was made by compressMetadata,
		// passed its CRC in a snapshot of this cluster's, or was
		// inflated and checked in an operator's (checkInflates): one
		// that fails is memory gone bad.
		panic(fmt.Errorf("metadata: held compressed block: %w", err))
	}
	return out
}

// inflateBlock inflates a compressed block (mpCompressed first) into the
// canonical block it holds, and checks that the stream ends exactly there.
func inflateBlock(b string) (string, error) {
	inf := inflaters.Get().(*inflater)
	defer inflaters.Put(inf)
	out, err := inf.inflate(nil, b)
	return stringOf(out), err
}

// inflate is inflateBlock into dst's array when it has room (dst's length
// does not matter), else into a new one.
func (inf *inflater) inflate(dst []byte, b string) ([]byte, error) {
	c, err := parseCompressed(b)
	if err != nil {
		return nil, err
	}
	out := dst[:0]
	if uint64(cap(out)) < c.size {
		out = make([]byte, c.size)
	}
	out = out[:c.size]
	defer inf.src.Reset("") // do not keep b alive in the pool
	// A strings.Reader is an io.ByteReader: flate reads from it no
	// further than the stream's end, so bytes after it are seen.
	inf.src.Reset(c.stream)
	if err := inf.r.(flate.Resetter).Reset(&inf.src, nil); err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	if _, err := io.ReadFull(inf.r, out); err != nil {
		return nil, fmt.Errorf("inflate %d bytes: %w", c.size, err)
	}
	var one [1]byte
	if k, err := inf.r.Read(one[:]); k != 0 || err != io.EOF {
		return nil, fmt.Errorf("compressed block holds more than its %d bytes", c.size)
	}
	if inf.src.Len() != 0 {
		return nil, fmt.Errorf("bytes after a compressed block's stream")
	}
	return out, nil
}

// checkCompressed reports why a compressed block read from a snapshot
// cannot be held, or nil: its header must be whole and say a block of at
// least compressMin bytes and one entry, and its stream must pass its CRC.
func checkCompressed(b string) error {
	c, err := parseCompressed(b)
	switch {
	case err != nil:
		return err
	case c.size < compressMin || c.count == 0 || c.stream == "":
		return fmt.Errorf("compressed block that says %d bytes in %d entries", c.size, c.count)
	case crc32.Checksum(bytesOf(b[crcEnd:]), castagnoli) != c.crc:
		return fmt.Errorf("compressed block fails its CRC")
	}
	return nil
}

// checkInflates is checkCompressed and more, for a snapshot that comes
// from outside the cluster (an operator's restore, ReadSnapshot): the
// block inflates, exactly, to a canonical block of the length and number
// of entries its header says, so that no reader of the held block panics.
// A CRC is no defence against a file made to pass it.
func checkInflates(b string) error {
	if err := checkCompressed(b); err != nil {
		return err
	}
	c, _ := parseCompressed(b) // checkCompressed parsed it
	out, err := inflateBlock(b)
	switch {
	case err != nil:
		return err
	case !canonicalMap(bytesOf(out)):
		return fmt.Errorf("compressed block that does not inflate to a canonical map")
	}
	if n, _ := mapHeader(out); uint64(n) != c.count {
		return fmt.Errorf("compressed block of %d entries that says %d", n, c.count)
	}
	return nil
}

// checkBlocks is checkInflates for every compressed block of the state.
// Only its entries can hold one: a snapshot writes them as records
// (snapcodec.go), blocks as held, while the delta's records and the remote
// regions' copies go through the codec, which writes every block
// canonical and refuses mpCompressed.
func (st *State) checkBlocks() error {
	for _, e := range st.Entries {
		if !e.Instance.Metadata.compressed() {
			continue
		}
		if err := checkInflates(e.Instance.Metadata.b); err != nil {
			return fmt.Errorf("entry %s/%s: metadata: %w", e.App, e.ID, err)
		}
	}
	return nil
}

// compressedLen is a compressed block's number of entries.
func compressedLen(b string) int {
	c, err := parseCompressed(b)
	if err != nil {
		panic(fmt.Errorf("metadata: held compressed block: %w", err)) // see canonical
	}
	return int(c.count)
}
