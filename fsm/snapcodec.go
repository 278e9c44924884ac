package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"unsafe"
)

// Format 3 writes each registry entry as a record of its own binary
// layout instead of a msgpack value: msgpack's reflection over field
// names was three quarters of a restore's CPU, and restoring a million
// instances was most of a restarted node's time before it served.
//
// A record is its length (uvarint) and then the fields in a fixed order:
// strings as a uvarint length and their bytes, signed integers as
// varints, unsigned ones as uvarints, booleans as one byte, metadata as
// its canonical msgpack block (a string; empty for nil). The order is the
// order of the fields in Entry, Instance and DataCenterInfo;
// TestSnapshotRecord_CoversEveryField fails when a field is added to one
// of them and not here.

// maxRecord bounds one record's length: far above any instance a node
// accepts (the request body limit is a MiB by default), low enough that a
// damaged length is refused instead of allocated.
const maxRecord = 64 << 20

// appendRecord appends e's record, its length first, to dst; scratch is a
// buffer to lay the record out in, returned grown for the next call.
func appendRecord(dst, scratch []byte, e *Entry) (out, scratchOut []byte) {
	b := scratch[:0]
	b = appendStr(b, e.App)
	b = appendStr(b, e.ID)
	in := e.Instance
	b = append(b, boolByte(in != nil))
	if in != nil {
		b = appendStr(b, in.InstanceID)
		b = appendStr(b, in.HostName)
		b = appendStr(b, in.App)
		b = appendStr(b, in.IPAddr)
		b = appendStr(b, in.Sid)
		b = appendStr(b, in.Status)
		b = appendStr(b, in.OverriddenStatus)
		b = binary.AppendVarint(b, int64(in.Port))
		b = append(b, boolByte(in.PortEnabled))
		b = binary.AppendVarint(b, int64(in.SecurePort))
		b = append(b, boolByte(in.SecurePortEnabled))
		b = binary.AppendVarint(b, int64(in.CountryID))
		b = appendStr(b, in.DataCenterInfo.Class)
		b = appendStr(b, in.DataCenterInfo.Name)
		b = appendStr(b, in.DataCenterInfo.Metadata.b)
		b = binary.AppendVarint(b, int64(in.RenewalIntervalSecs))
		b = binary.AppendVarint(b, int64(in.DurationSecs))
		b = appendStr(b, in.Metadata.b)
		b = appendStr(b, in.AppGroupName)
		b = appendStr(b, in.HomePageURL)
		b = appendStr(b, in.StatusPageURL)
		b = appendStr(b, in.HealthCheckURL)
		b = appendStr(b, in.SecureHealthCheckURL)
		b = appendStr(b, in.VIPAddress)
		b = appendStr(b, in.SecureVIPAddress)
		b = append(b, boolByte(in.IsCoordinatingDiscoveryServer))
		b = binary.AppendVarint(b, in.LastDirtyTimestamp)
		b = appendStr(b, in.ASGName)
	}
	b = appendStr(b, e.Override)
	b = binary.AppendVarint(b, e.RegistrationTs)
	b = binary.AppendVarint(b, e.LastRenewalTs)
	b = binary.AppendVarint(b, e.EvictionTs)
	b = binary.AppendVarint(b, e.ServiceUpTs)
	b = binary.AppendVarint(b, e.LastUpdatedTs)
	b = appendStr(b, e.ActionType)
	b = binary.AppendUvarint(b, e.ModifyIndex)
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...), b
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// readRecord reads the next record from br and decodes it. The entry's
// strings are views of one string made for the record, until
// settleStrings gives the entry strings of its own.
func readRecord(br *bufio.Reader) (*Entry, error) {
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
	return decodeRecord(unsafe.String(unsafe.SliceData(buf), len(buf)))
}

// noEOF turns an end of stream inside a snapshot into an unexpected one:
// a record was due.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// recordReader decodes one record; the first fault sticks and ends it.
type recordReader struct {
	s   string
	off int
	err error
}

func (r *recordReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at byte %d of a %d-byte record", what, r.off, len(r.s))
	}
}

func (r *recordReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if r.off >= len(r.s) || shift > 63 {
			r.fail("bad unsigned integer")
			return 0
		}
		c := r.s[r.off]
		r.off++
		if shift == 63 && c > 1 {
			r.fail("unsigned integer overflows")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
}

func (r *recordReader) varint() int64 {
	u := r.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (r *recordReader) int32() int32 {
	v := r.varint()
	if int64(int32(v)) != v {
		r.fail("integer out of range")
		return 0
	}
	return int32(v)
}

func (r *recordReader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.s)-r.off) {
		r.fail("string past the end")
		return ""
	}
	if n == 0 {
		// Not r.s[r.off:r.off]: an empty view still points into the
		// record, and would keep the whole record alive for as long as
		// the registry holds the field.
		return ""
	}
	s := r.s[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *recordReader) bool() bool {
	if r.err != nil {
		return false
	}
	if r.off >= len(r.s) || r.s[r.off] > 1 {
		r.fail("bad boolean")
		return false
	}
	r.off++
	return r.s[r.off-1] == 1
}

func (r *recordReader) metadata() Metadata {
	s := r.str()
	if s != "" && !canonicalMap(unsafe.Slice(unsafe.StringData(s), len(s))) {
		r.fail("metadata that is not a canonical map")
		return Metadata{}
	}
	return Metadata{b: s}
}

// decodeRecord decodes a record without its length.
func decodeRecord(s string) (*Entry, error) {
	r := &recordReader{s: s}
	e := &Entry{App: r.str(), ID: r.str()}
	if r.bool() {
		in := &Instance{}
		in.InstanceID = r.str()
		in.HostName = r.str()
		in.App = r.str()
		in.IPAddr = r.str()
		in.Sid = r.str()
		in.Status = r.str()
		in.OverriddenStatus = r.str()
		in.Port = r.int32()
		in.PortEnabled = r.bool()
		in.SecurePort = r.int32()
		in.SecurePortEnabled = r.bool()
		in.CountryID = r.int32()
		in.DataCenterInfo.Class = r.str()
		in.DataCenterInfo.Name = r.str()
		in.DataCenterInfo.Metadata = r.metadata()
		in.RenewalIntervalSecs = r.int32()
		in.DurationSecs = r.int32()
		in.Metadata = r.metadata()
		in.AppGroupName = r.str()
		in.HomePageURL = r.str()
		in.StatusPageURL = r.str()
		in.HealthCheckURL = r.str()
		in.SecureHealthCheckURL = r.str()
		in.VIPAddress = r.str()
		in.SecureVIPAddress = r.str()
		in.IsCoordinatingDiscoveryServer = r.bool()
		in.LastDirtyTimestamp = r.varint()
		in.ASGName = r.str()
		e.Instance = in
	}
	e.Override = r.str()
	e.RegistrationTs = r.varint()
	e.LastRenewalTs = r.varint()
	e.EvictionTs = r.varint()
	e.ServiceUpTs = r.varint()
	e.LastUpdatedTs = r.varint()
	e.ActionType = r.str()
	e.ModifyIndex = r.uvarint()
	if r.err == nil && r.off != len(s) {
		r.fail("bytes after the last field")
	}
	if r.err != nil {
		return nil, r.err
	}
	return e, nil
}

// settleStrings gives a restored entry strings of its own: the record's
// single string is then garbage, not held by the registry for one field.
// The instance's strings are packed and interned (Instance.clone); the
// entry's key shares the instance's copies, and the override and action
// the constants.
func (e *Entry) settleStrings() {
	if e.Instance != nil {
		e.Instance = e.Instance.clone()
		e.App = sameOrClone(e.App, e.Instance.App)
		e.ID = sameOrClone(e.ID, e.Instance.ID())
	} else {
		e.App, e.ID = strings.Clone(e.App), strings.Clone(e.ID)
	}
	e.Override = constOrClone(e.Override, StatusUp, StatusDown, StatusStarting, StatusOutOfService, StatusUnknown)
	e.ActionType = constOrClone(e.ActionType, ActionAdded, ActionModified, ActionDeleted)
}

// sameOrClone is held when s equals it, else a copy of s.
func sameOrClone(s, held string) string {
	if s == held {
		return held
	}
	return strings.Clone(s)
}

// constOrClone is the constant s equals, else a copy of s.
func constOrClone(s string, consts ...string) string {
	for _, c := range consts {
		if s == c {
			return c
		}
	}
	return strings.Clone(s)
}
