package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// Format 3 writes each registry entry as a record of its own binary
// layout instead of a msgpack value: msgpack's reflection over field
// names was three quarters of a restore's CPU, and restoring a million
// instances was most of a restarted node's time before it served.
//
// A record is its length (uvarint) and then the fields in a fixed order:
// strings as a uvarint length and their bytes, signed integers as
// varints, unsigned ones as uvarints, booleans as one byte, metadata as
// its canonical msgpack block (a string; empty for nil) or, from format 4
// on, as the compressed block the registry holds (mdcompress.go). The
// order is the order of the fields in Entry, Instance and DataCenterInfo;
// TestSnapshotRecord_CoversEveryField fails when a field is added to one
// of them and not here.

// maxRecord bounds one record's length: far above any instance a node
// accepts (the request body limit is a MiB by default), low enough that a
// damaged length is refused instead of allocated.
const maxRecord = 64 << 20

// recordCoder is one direction of the record layout: the writer appends
// each field it is shown, the reader fills it in. walkRecord shows them in
// the layout's order to either, so encoding and decoding cannot disagree.
type recordCoder interface {
	str(p *string)
	// metadata is a metadata block; only an instance's own may be held
	// compressed (mayCompress), never its data center's: sealWith
	// compresses Instance.Metadata alone.
	metadata(p *Metadata, mayCompress bool)
	flag(p *bool)
	i32(p *int32)
	i64(p *int64)
	// lease is an i64 the registry may write in place while a snapshot
	// is encoded (Entry.LastRenewalTs).
	lease(p *int64)
	u64(p *uint64)
	// instance reports whether the entry holds an instance: the writer
	// says so, the reader reads it and makes the one it fills.
	instance(p **Instance) bool
}

// walkRecord shows every field of e, in the layout's order, to c.
func walkRecord(c recordCoder, e *Entry) {
	c.str(&e.App)
	c.str(&e.ID)
	if c.instance(&e.Instance) {
		in := e.Instance
		c.str(&in.InstanceID)
		c.str(&in.HostName)
		c.str(&in.App)
		c.str(&in.IPAddr)
		c.str(&in.Sid)
		c.str(&in.Status)
		c.str(&in.OverriddenStatus)
		c.i32(&in.Port)
		c.flag(&in.PortEnabled)
		c.i32(&in.SecurePort)
		c.flag(&in.SecurePortEnabled)
		c.i32(&in.CountryID)
		c.str(&in.DataCenterInfo.Class)
		c.str(&in.DataCenterInfo.Name)
		c.metadata(&in.DataCenterInfo.Metadata, false)
		c.i32(&in.RenewalIntervalSecs)
		c.i32(&in.DurationSecs)
		c.metadata(&in.Metadata, true)
		c.str(&in.AppGroupName)
		c.str(&in.HomePageURL)
		c.str(&in.StatusPageURL)
		c.str(&in.HealthCheckURL)
		c.str(&in.SecureHealthCheckURL)
		c.str(&in.VIPAddress)
		c.str(&in.SecureVIPAddress)
		c.flag(&in.IsCoordinatingDiscoveryServer)
		c.i64(&in.LastDirtyTimestamp)
		c.str(&in.ASGName)
	}
	c.str(&e.Override)
	c.i64(&e.RegistrationTs)
	c.lease(&e.LastRenewalTs)
	c.i64(&e.EvictionTs)
	c.i64(&e.ServiceUpTs)
	c.i64(&e.LastUpdatedTs)
	c.str(&e.ActionType)
	c.u64(&e.ModifyIndex)
}

// appendRecord appends e's record in the given format (3 or 4), its
// length first, to dst; scratch is a buffer to lay the record out in,
// returned grown for the next call.
func appendRecord(dst, scratch []byte, e *Entry, format byte) (out, scratchOut []byte) {
	w := &recordWriter{b: scratch[:0], canonical: format < SnapshotFormat}
	walkRecord(w, e)
	dst = binary.AppendUvarint(dst, uint64(len(w.b)))
	return append(dst, w.b...), w.b
}

// recordWriter is the writing direction of the layout.
type recordWriter struct {
	b []byte
	// canonical writes metadata blocks inflated (format 3).
	canonical bool
}

func (w *recordWriter) str(p *string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(*p)))
	w.b = append(w.b, *p...)
}

func (w *recordWriter) metadata(p *Metadata, _ bool) {
	b := p.b
	if w.canonical {
		b = p.canonical()
	}
	w.str(&b)
}

func (w *recordWriter) flag(p *bool) {
	v := byte(0)
	if *p {
		v = 1
	}
	w.b = append(w.b, v)
}

func (w *recordWriter) i32(p *int32)   { w.b = binary.AppendVarint(w.b, int64(*p)) }
func (w *recordWriter) i64(p *int64)   { w.b = binary.AppendVarint(w.b, *p) }
func (w *recordWriter) lease(p *int64) { w.b = binary.AppendVarint(w.b, atomic.LoadInt64(p)) }
func (w *recordWriter) u64(p *uint64)  { w.b = binary.AppendUvarint(w.b, *p) }

func (w *recordWriter) instance(p **Instance) bool {
	has := *p != nil
	w.flag(&has)
	return has
}

// readRecord reads the next record from br and decodes it; compressed
// says whether its metadata may be a compressed block (format 4). The
// entry's strings are views of one string made for the record, until the
// registry's put seals the record and gives the entry strings of its own.
func readRecord(br *bufio.Reader, compressed bool) (*Entry, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("record length: %w", noEOF(err))
	}
	if n > maxRecord {
		return nil, fmt.Errorf("record of %d bytes, more than the %d a record may hold", n, maxRecord)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, fmt.Errorf("record of %d bytes: %w", n, noEOF(err))
	}
	// buf is this record's own and never written again.
	return decodeRecord(stringOf(buf), compressed)
}

// noEOF turns an end of stream inside a snapshot into an unexpected one:
// a record was due.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// recordReader is the reading direction of the layout: it decodes one
// record; the first fault sticks and ends it.
type recordReader struct {
	s   string
	off int
	err error
	// compressed allows compressed metadata blocks.
	compressed bool
}

func (r *recordReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at byte %d of a %d-byte record", what, r.off, len(r.s))
	}
}

// rest is the record's bytes not read yet, viewed, not copied.
func (r *recordReader) rest() []byte {
	return bytesOf(r.s[r.off:])
}

func (r *recordReader) u64(p *uint64) {
	if r.err != nil {
		return
	}
	v, n := binary.Uvarint(r.rest())
	if n <= 0 {
		r.fail("bad unsigned integer")
		return
	}
	r.off += n
	*p = v
}

// i64 reads a varint: the uvarint of its zig-zag form (encoding/binary's
// Varint).
func (r *recordReader) i64(p *int64) {
	var u uint64
	r.u64(&u)
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	*p = v
}

func (r *recordReader) lease(p *int64) { r.i64(p) }

func (r *recordReader) i32(p *int32) {
	var v int64
	r.i64(&v)
	if int64(int32(v)) != v {
		r.fail("integer out of range")
		return
	}
	*p = int32(v)
}

func (r *recordReader) str(p *string) {
	var n uint64
	r.u64(&n)
	switch {
	case r.err != nil:
	case n > uint64(len(r.s)-r.off):
		r.fail("string past the end")
	case n == 0:
		// Not r.s[r.off:r.off]: an empty view still points into the
		// record, and would keep the whole record alive for as long as
		// the registry holds the field.
		*p = ""
	default:
		*p = r.s[r.off : r.off+int(n)]
		r.off += int(n)
	}
}

func (r *recordReader) flag(p *bool) {
	if r.err != nil {
		return
	}
	if r.off >= len(r.s) || r.s[r.off] > 1 {
		r.fail("bad boolean")
		return
	}
	*p = r.s[r.off] == 1
	r.off++
}

func (r *recordReader) metadata(p *Metadata, mayCompress bool) {
	var s string
	r.str(&s)
	switch {
	case s == "":
	case r.compressed && mayCompress && s[0] == mpCompressed:
		if err := checkCompressed(s); err != nil {
			r.fail("metadata: " + err.Error())
			return
		}
	case !canonicalMap(bytesOf(s)):
		r.fail("metadata that is not a canonical map")
		return
	}
	*p = Metadata{b: s}
}

func (r *recordReader) instance(p **Instance) bool {
	var has bool
	r.flag(&has)
	if has {
		*p = &Instance{}
	}
	return has
}

// decodeRecord decodes a record without its length; compressed is as for
// readRecord.
func decodeRecord(s string, compressed bool) (*Entry, error) {
	r := &recordReader{s: s, compressed: compressed}
	e := &Entry{}
	walkRecord(r, e)
	if r.err == nil && r.off != len(s) {
		r.fail("bytes after the last field")
	}
	if r.err != nil {
		return nil, r.err
	}
	return e, nil
}
