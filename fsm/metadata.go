package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"unsafe"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Metadata is an immutable string map held as one block: the canonical
// msgpack encoding of the map (keys sorted bytewise, no duplicates), which
// is exactly what the log and snapshot handle writes for a map[string]string.
// A registry of many instances holds one allocation per map instead of a Go
// map with a string header per key and value, and encoding it into a log
// entry or snapshot is a copy of the block. The zero value is the nil map
// (the registrant sent none), distinct from an empty one.
//
// A large registry holds its records' blocks compressed (mdcompress.go):
// every method reads a compressed block as the map it stands for,
// and what it writes to the log is the canonical block, never the
// compressed one.
type Metadata struct {
	// b is the encoding, "" for nil, or a compressed block. It is never
	// changed after construction.
	b string
}

// msgpack headers, as go-msgpack writes them with WriteExt set: the
// shortest form that holds the length.
const (
	mpNil      = 0xc0
	mpFixMap   = 0x80 // + length < 16
	mpMap16    = 0xde
	mpMap32    = 0xdf
	mpFixStr   = 0xa0 // + length < 32
	mpStr8     = 0xd9
	mpStr16    = 0xda
	mpStr32    = 0xdb
	fixMapMax  = 16    // shortest map form below this length
	fixStrMax  = 32    // shortest string form below this length
	str8Max    = 256   // 8-bit string length below this
	header16Mx = 65536 // 16-bit lengths below this
)

// MetadataOf returns m as a Metadata; nil gives the nil Metadata.
func MetadataOf(m map[string]string) Metadata {
	if m == nil {
		return Metadata{}
	}
	var b MetadataBuilder
	b.Grow(len(m))
	b.MarkPresent()
	for k, v := range m {
		b.Set(k, v)
	}
	return b.Metadata()
}

// IsNil reports whether the registrant sent no metadata at all.
func (m Metadata) IsNil() bool { return m.b == "" }

// Len returns the number of entries.
func (m Metadata) Len() int {
	if m.b == "" {
		return 0
	}
	if m.compressed() {
		return compressedLen(m.b)
	}
	n, _ := mapHeader(m.b)
	return n
}

// Get returns the value of key and whether it is present.
func (m Metadata) Get(key string) (string, bool) {
	for k, v := range m.All() {
		if k == key {
			return v, true
		}
		if k > key { // keys are sorted: key is not further on
			break
		}
	}
	return "", false
}

// All yields the entries in bytewise key order. Keys and values are
// substrings of the block: iterating allocates nothing, but for the one
// copy a compressed block is inflated into.
func (m Metadata) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) { entriesOf(m.canonical(), yield) }
}

// Scan yields the entries as All does, but inflates a compressed block
// into a pooled inflater's buffer rather than a copy of its own: its keys
// and values are valid only until the loop ends. It is for encoders, which
// copy what they read (a document's build inflates every instance's
// metadata, and allocated 20 KB for each application of 20 instances
// doing it); whoever keeps a key or a value uses All.
func (m Metadata) Scan() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if !m.compressed() {
			entriesOf(m.b, yield)
			return
		}
		inf := inflaters.Get().(*inflater)
		defer func() {
			if cap(inf.out) > scanKeepMax {
				inf.out = nil
			}
			inflaters.Put(inf)
		}()
		inf.out = inf.mustInflate(inf.out, m.b)
		entriesOf(stringOf(inf.out), yield)
	}
}

// scanKeepMax is the largest block whose buffer an inflater keeps for the
// next Scan: the API allows metadata of MBs, which most fleets never send.
const scanKeepMax = 64 << 10

// entriesOf yields the entries of canonical block b ("" for none).
func entriesOf(b string, yield func(string, string) bool) {
	if b == "" {
		return
	}
	n, i := mapHeader(b)
	for range n {
		var k, v string
		k, i = strAt(b, i)
		v, i = strAt(b, i)
		if !yield(k, v) {
			return
		}
	}
}

// Map returns a new map holding the entries, nil for the nil Metadata.
func (m Metadata) Map() map[string]string {
	if m.b == "" {
		return nil
	}
	return maps.Collect(m.All())
}

// With returns m with the entries of add set (added or replaced). The
// result is never nil, as a merge into no metadata makes a map.
func (m Metadata) With(add map[string]string) Metadata {
	var b MetadataBuilder
	b.Grow(m.Len() + len(add))
	b.MarkPresent()
	for k, v := range m.All() {
		b.Set(k, v)
	}
	for k, v := range add {
		b.Set(k, v)
	}
	return b.Metadata()
}

// String formats m as fmt formats a map, for logs and test messages.
func (m Metadata) String() string {
	if m.b == "" {
		return "map[]"
	}
	var sb strings.Builder
	sb.WriteString("map[")
	first := true
	for k, v := range m.All() {
		if !first {
			sb.WriteByte(' ')
		}
		first = false
		sb.WriteString(k)
		sb.WriteByte(':')
		sb.WriteString(v)
	}
	sb.WriteByte(']')
	return sb.String()
}

// MarshalJSON writes m as a JSON object (null for nil), as a map would be.
func (m Metadata) MarshalJSON() ([]byte, error) {
	data, err := json.Marshal(m.Map())
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return data, nil
}

// UnmarshalJSON reads a JSON object of strings (null for nil).
func (m *Metadata) UnmarshalJSON(data []byte) error {
	var mm map[string]string
	if err := json.Unmarshal(data, &mm); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	*m = MetadataOf(mm)
	return nil
}

// CodecEncodeSelf writes the block as it is: it is already the canonical
// encoding the handle would write for the map.
//
// GenHelperEncoder and GenHelperDecoder are the codec's hooks for
// generated code; they are the way to write and read a value's bytes as
// they are without the handle's Raw option, which the log handle leaves
// off. go.mod pins the codec's version, and the compatibility tests
// (metadata_test.go) fail if an upgrade changes what they write or read.
func (m Metadata) CodecEncodeSelf(e *codec.Encoder) {
	ge, _ := codec.GenHelperEncoder(e)
	ge.WriteStr(metadataBlock(m))
}

// CodecDecodeSelf keeps the encoded map as the block when it is already
// canonical (what this code and its predecessors write), else decodes it
// as a map and re-encodes it, so that the block is always canonical and
// equal maps are equal blocks.
func (m *Metadata) CodecDecodeSelf(d *codec.Decoder) {
	gd, _ := codec.GenHelperDecoder(d)
	raw := gd.DecRaw() // a copy of the value's bytes, owned by us
	if len(raw) == 1 && raw[0] == mpNil {
		*m = Metadata{}
		return
	}
	if canonicalMap(raw) {
		*m = metadataOfRaw(raw)
		return
	}
	var mm map[string]string
	if err := codec.NewDecoderBytes(raw, msgpackHandle).Decode(&mm); err != nil {
		panic(fmt.Errorf("metadata: %w", err))
	}
	if mm == nil { // a map cannot decode to nil from a non-nil value
		mm = map[string]string{}
	}
	*m = MetadataOf(mm)
}

// metadataOfRaw makes the Metadata of a canonical block (canonicalMap)
// nobody else holds: raw is a fresh copy, and viewing it as a string saves
// a second copy of every block the log decoder reads.
func metadataOfRaw(raw []byte) Metadata {
	return Metadata{b: unsafe.String(&raw[0], len(raw))}
}

// MetadataBuilder collects entries for a Metadata; a later Set of a key
// replaces the earlier value, as assigning into a map would. The zero value
// builds the nil Metadata until an entry is set or MarkPresent is called.
type MetadataBuilder struct {
	pairs   []mdPair
	present bool
}

type mdPair struct{ k, v string }

// Grow makes room for n more entries.
func (b *MetadataBuilder) Grow(n int) { b.pairs = slices.Grow(b.pairs, n) }

// MarkPresent makes the result an empty map rather than nil when no entry is set.
func (b *MetadataBuilder) MarkPresent() { b.present = true }

// Set adds key with value, replacing an earlier value of key.
func (b *MetadataBuilder) Set(key, value string) {
	b.present = true
	b.pairs = append(b.pairs, mdPair{key, value})
}

// Len returns the number of Set calls so far (duplicates included).
func (b *MetadataBuilder) Len() int { return len(b.pairs) }

// Metadata returns the collected entries as one block.
func (b *MetadataBuilder) Metadata() Metadata {
	if !b.present {
		return Metadata{}
	}
	// A stable sort keeps a key's values in Set order: the last one wins.
	slices.SortStableFunc(b.pairs, func(x, y mdPair) int { return strings.Compare(x.k, y.k) })
	out := b.pairs[:0]
	for _, p := range b.pairs {
		if n := len(out); n > 0 && out[n-1].k == p.k {
			out[n-1] = p
			continue
		}
		out = append(out, p)
	}
	size := headerLenOf(len(out), fixMapMax, 0)
	for _, p := range out {
		size += headerLenOf(len(p.k), fixStrMax, str8Max) + len(p.k) + headerLenOf(len(p.v), fixStrMax, str8Max) + len(p.v)
	}
	buf := make([]byte, 0, size)
	buf = appendHeader(buf, len(out), mpFixMap, fixMapMax, 0, 0, mpMap16, mpMap32)
	for _, p := range out {
		buf = appendHeader(buf, len(p.k), mpFixStr, fixStrMax, mpStr8, str8Max, mpStr16, mpStr32)
		buf = append(buf, p.k...)
		buf = appendHeader(buf, len(p.v), mpFixStr, fixStrMax, mpStr8, str8Max, mpStr16, mpStr32)
		buf = append(buf, p.v...)
	}
	clear(b.pairs) // drop the references to the callers' strings
	b.pairs = b.pairs[:0]
	b.present = false
	return Metadata{b: stringOf(buf)}
}

// headerLenOf is the length of the header go-msgpack writes for a container
// of n elements (bytes for a string): one byte below fixMax, two below
// max8 (when the type has an 8-bit form), three below 65536, else five.
func headerLenOf(n, fixMax, max8 int) int {
	switch {
	case n < fixMax:
		return 1
	case n < max8:
		return 2
	case n < header16Mx:
		return 3
	}
	return 5
}

func appendHeader(dst []byte, n int, fix byte, fixMax int, b8 byte, max8 int, b16, b32 byte) []byte {
	switch {
	case n < fixMax:
		return append(dst, fix|byte(n))
	case n < max8:
		return append(dst, b8, byte(n))
	case n < header16Mx:
		return binary.BigEndian.AppendUint16(append(dst, b16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, b32), uint32(n))
}

// mapHeader reads the map header of a block built or checked by this file.
func mapHeader(b string) (n, next int) {
	switch c := b[0]; {
	case c&0xf0 == mpFixMap:
		return int(c & 0x0f), 1
	case c == mpMap16:
		return int(b[1])<<8 | int(b[2]), 3
	}
	return int(b[1])<<24 | int(b[2])<<16 | int(b[3])<<8 | int(b[4]), 5
}

// strAt reads the string at b[i:] of a block built or checked by this file.
func strAt(b string, i int) (s string, next int) {
	var n int
	switch c := b[i]; {
	case c&0xe0 == mpFixStr:
		n, i = int(c&0x1f), i+1
	case c == mpStr8:
		n, i = int(b[i+1]), i+2
	case c == mpStr16:
		n, i = int(b[i+1])<<8|int(b[i+2]), i+3
	default:
		n, i = int(b[i+1])<<24|int(b[i+2])<<16|int(b[i+3])<<8|int(b[i+4]), i+5
	}
	return b[i : i+n], i + n
}

// canonicalMap reports whether raw is a map of strings to strings encoded
// exactly as MetadataBuilder encodes it: shortest headers, keys strictly
// increasing, nothing after the map.
func canonicalMap(raw []byte) bool {
	end, ok := canonicalMapEnd(raw, 0)
	return ok && end == len(raw)
}

// canonicalMapEnd reads a map of strings to strings encoded as
// MetadataBuilder encodes it at b[i:] and returns where it ends.
func canonicalMapEnd(b []byte, i int) (end int, ok bool) {
	n, i, ok := header(b, i, true)
	if !ok {
		return 0, false
	}
	var prev []byte
	for j := range n {
		var k []byte
		if k, i, ok = strBytes(b, i); !ok || j > 0 && bytes.Compare(prev, k) >= 0 {
			return 0, false
		}
		prev = k
		if _, i, ok = strBytes(b, i); !ok {
			return 0, false
		}
	}
	return i, true
}

func strBytes(raw []byte, i int) (s []byte, next int, ok bool) {
	n, i, ok := header(raw, i, false)
	if !ok || n > len(raw)-i {
		return nil, 0, false
	}
	return raw[i : i+n], i + n, true
}

// header reads a map (isMap) or string header at raw[i:] and checks that it
// is the shortest form for its length.
func header(raw []byte, i int, isMap bool) (n, next int, ok bool) {
	if i >= len(raw) {
		return 0, 0, false
	}
	c := raw[i]
	width := 0
	switch {
	case isMap && c&0xf0 == mpFixMap:
		return int(c & 0x0f), i + 1, true
	case !isMap && c&0xe0 == mpFixStr:
		return int(c & 0x1f), i + 1, true
	case !isMap && c == mpStr8:
		width = 1
	case isMap && c == mpMap16, !isMap && c == mpStr16:
		width = 2
	case isMap && c == mpMap32, !isMap && c == mpStr32:
		width = 4
	default:
		return 0, 0, false
	}
	if len(raw)-i-1 < width {
		return 0, 0, false
	}
	for _, x := range raw[i+1 : i+1+width] {
		n = n<<8 | int(x)
	}
	var minLen int
	switch {
	case width == 1:
		minLen = fixStrMax
	case width == 2 && isMap:
		minLen = fixMapMax
	case width == 2:
		minLen = str8Max
	default:
		minLen = header16Mx
	}
	if n < minLen {
		return 0, 0, false
	}
	return n, i + 1 + width, true
}
