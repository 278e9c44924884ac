package fsm

import (
	"bytes"
	"encoding/binary"
	"math"
)

// Registrations and renewal batches are most of what a busy log holds, and
// every node decodes each one (the leader a forwarded registration up to
// three times: the forward's check, the peer check, the apply). The codec
// decodes by reflection, looking up every field by name;
// decodeRegisterBody and decodeRenewBatchBody read the shapes the codec
// writes for a RegisterBody and a RenewBatchBody directly, in a fraction of
// the time. They know only those shapes, in the shortest forms the codec
// writes: anything else (an unknown field, a nil where a value was
// expected, an integer out of its field's range, a non-canonical metadata
// block) makes them give up, and Decode then decodes the body with the
// codec as before. So they change nothing that is written or accepted; the
// differential tests hold them to the codec's result.

// decodeRegisterBody decodes a register body; ok is false when the body
// is not in the shape it reads (the caller then uses the codec).
func decodeRegisterBody(b []byte) (*RegisterBody, bool) {
	r := fastReader{b: b}
	body := &RegisterBody{}
	ok := r.object(func(key []byte) (ok bool) {
		switch string(key) {
		case "in":
			body.Instance, ok = r.instance()
		case "rep":
			body.Replicated, ok = r.bool()
		}
		return ok
	})
	if !ok || body.Instance == nil || r.i != len(b) {
		return nil, false
	}
	return body, true
}

// decodeRenewBatchBody decodes a renew batch body as the codec would,
// with one copy of b for every string in it instead of two strings per
// renewal: a renewal's strings only serve to find its entry while the
// batch applies, and every node applies every batch. With view set the
// strings are views of b itself, which must then not change while they
// are in use (FSM.Apply: an entry in the log never changes, and the
// renewals are kept by nothing once the batch is applied). ok is false
// when the body is not in the shape it reads (the caller then uses the
// codec).
func decodeRenewBatchBody(b []byte, view bool) (*RenewBatchBody, bool) {
	var all string
	if view {
		all = stringOf(b)
	} else {
		all = string(b)
	}
	r := fastReader{b: b}
	str := func() (string, bool) {
		s, ok := r.str()
		return all[r.i-len(s) : r.i], ok
	}
	body := &RenewBatchBody{}
	ok := r.object(func(key []byte) bool {
		if string(key) != "r" {
			return false
		}
		n, ok := r.arrayLen()
		// Each renewal takes a byte at least: a count beyond what is left
		// is not allocated for.
		if !ok || n > len(b)-r.i {
			return false
		}
		body.Renewals = make([]Renewal, n)
		for i := range body.Renewals {
			rn := &body.Renewals[i]
			if !r.object(func(key []byte) (ok bool) {
				switch string(key) {
				case "a":
					rn.App, ok = str()
				case "id":
					rn.ID, ok = str()
				case "t":
					rn.Ts, ok = r.int()
				}
				return ok
			}) {
				return false
			}
		}
		return true
	})
	if !ok || r.i != len(b) {
		return nil, false
	}
	return body, true
}

// fastReader reads msgpack values from b at i.
type fastReader struct {
	b []byte
	i int
}

func (r *fastReader) mapLen() (int, bool) {
	n, next, ok := header(r.b, r.i, true)
	if ok {
		r.i = next
	}
	return n, ok
}

// arrayLen reads an array header in the shortest form for its length, as
// the codec writes it.
func (r *fastReader) arrayLen() (int, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	switch {
	case c&0xf0 == 0x90: // fixarray
		r.i++
		return int(c & 0x0f), true
	case c == 0xdc && len(r.b)-r.i >= 3: // array 16
		n := int(binary.BigEndian.Uint16(r.b[r.i+1:]))
		if n < 16 {
			return 0, false
		}
		r.i += 3
		return n, true
	case c == 0xdd && len(r.b)-r.i >= 5: // array 32
		n := int(binary.BigEndian.Uint32(r.b[r.i+1:]))
		if n <= math.MaxUint16 {
			return 0, false
		}
		r.i += 5
		return n, true
	}
	return 0, false
}

// maxObjectKeys bounds the keys object reads in one map: more than any
// shape it reads has (an Instance has about thirty fields).
const maxObjectKeys = 48

// object reads a map with string keys, handing each key to field, which
// reads its value; an unknown key is field's to refuse (false). False
// when the map or a value is not in the shape expected, and when a key
// comes twice: the codec decodes a repeated key into the value the first
// one made, keeping what the second does not set, where field would make
// a fresh value; the codec decides such a body.
func (r *fastReader) object(field func(key []byte) bool) bool {
	n, ok := r.mapLen()
	if !ok || n > maxObjectKeys {
		return false
	}
	// A key is compared with the keys before it only when a cheap hash of
	// it (128 buckets) was seen before: most of an Instance's thirty keys
	// are not.
	var seen [maxObjectKeys][]byte
	var buckets [2]uint64
	for i := range n {
		key, ok := r.str()
		if !ok {
			return false
		}
		var x uint32
		if len(key) > 0 {
			x = uint32(len(key))<<16 | uint32(key[0])<<8 | uint32(key[len(key)-1])
		}
		h := x * 0x9e3779b1 >> 25 // Fibonacci hashing: the top 7 bits
		word, bit := &buckets[h>>6], uint64(1)<<(h&63)
		if *word&bit != 0 {
			for _, k := range seen[:i] {
				if bytes.Equal(k, key) {
					return false
				}
			}
		}
		*word |= bit
		seen[i] = key
		if !field(key) {
			return false
		}
	}
	return true
}

// str returns the bytes of a string (a view of b).
func (r *fastReader) str() ([]byte, bool) {
	s, next, ok := strBytes(r.b, r.i)
	if ok {
		r.i = next
	}
	return s, ok
}

func (r *fastReader) string() (string, bool) {
	s, ok := r.str()
	return string(s), ok
}

func (r *fastReader) bool() (bool, bool) {
	if r.i >= len(r.b) {
		return false, false
	}
	switch r.b[r.i] {
	case mpFalse:
		r.i++
		return false, true
	case mpTrue:
		r.i++
		return true, true
	}
	return false, false
}

// int reads an integer in any of msgpack's integer forms.
func (r *fastReader) int() (int64, bool) {
	if r.i >= len(r.b) {
		return 0, false
	}
	c := r.b[r.i]
	switch {
	case c <= 0x7f:
		r.i++
		return int64(c), true
	case c >= 0xe0:
		r.i++
		return int64(int8(c)), true
	}
	var width int
	switch c {
	case 0xcc, 0xd0:
		width = 1
	case 0xcd, 0xd1:
		width = 2
	case 0xce, 0xd2:
		width = 4
	case 0xcf, 0xd3:
		width = 8
	default:
		return 0, false
	}
	if len(r.b)-r.i-1 < width {
		return 0, false
	}
	p := r.b[r.i+1 : r.i+1+width]
	r.i += 1 + width
	var u uint64
	switch width {
	case 1:
		u = uint64(p[0])
	case 2:
		u = uint64(binary.BigEndian.Uint16(p))
	case 4:
		u = uint64(binary.BigEndian.Uint32(p))
	default:
		u = binary.BigEndian.Uint64(p)
	}
	if c >= 0xd0 { // signed: sign-extend from its width
		shift := 64 - 8*width
		return int64(u<<shift) >> shift, true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

func (r *fastReader) int32() (int32, bool) {
	v, ok := r.int()
	if !ok || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

// metadata reads a metadata block: nil, or a canonical map of strings
// (what Metadata.CodecDecodeSelf keeps as it is).
func (r *fastReader) metadata() (Metadata, bool) {
	if r.i < len(r.b) && r.b[r.i] == mpNil {
		r.i++
		return Metadata{}, true
	}
	end, ok := canonicalMapEnd(r.b, r.i)
	if !ok {
		return Metadata{}, false
	}
	raw := bytes.Clone(r.b[r.i:end])
	r.i = end
	return metadataOfRaw(raw), true
}

func (r *fastReader) dataCenter() (dc DataCenterInfo, ok bool) {
	ok = r.object(func(key []byte) (ok bool) {
		switch string(key) {
		case "c":
			dc.Class, ok = r.string()
		case "n":
			dc.Name, ok = r.string()
		case "m":
			dc.Metadata, ok = r.metadata()
		}
		return ok
	})
	return dc, ok
}

func (r *fastReader) instance() (*Instance, bool) {
	in := &Instance{}
	ok := r.object(func(key []byte) (ok bool) {
		switch string(key) {
		case "id":
			in.InstanceID, ok = r.string()
		case "h":
			in.HostName, ok = r.string()
		case "a":
			in.App, ok = r.string()
		case "ip":
			in.IPAddr, ok = r.string()
		case "sid":
			in.Sid, ok = r.string()
		case "s":
			in.Status, ok = r.string()
		case "os":
			in.OverriddenStatus, ok = r.string()
		case "p":
			in.Port, ok = r.int32()
		case "pe":
			in.PortEnabled, ok = r.bool()
		case "sp":
			in.SecurePort, ok = r.int32()
		case "spe":
			in.SecurePortEnabled, ok = r.bool()
		case "cid":
			in.CountryID, ok = r.int32()
		case "dc":
			in.DataCenterInfo, ok = r.dataCenter()
		case "ri":
			in.RenewalIntervalSecs, ok = r.int32()
		case "du":
			in.DurationSecs, ok = r.int32()
		case "md":
			in.Metadata, ok = r.metadata()
		case "ag":
			in.AppGroupName, ok = r.string()
		case "hp":
			in.HomePageURL, ok = r.string()
		case "spu":
			in.StatusPageURL, ok = r.string()
		case "hc":
			in.HealthCheckURL, ok = r.string()
		case "shc":
			in.SecureHealthCheckURL, ok = r.string()
		case "vip":
			in.VIPAddress, ok = r.string()
		case "svip":
			in.SecureVIPAddress, ok = r.string()
		case "cds":
			in.IsCoordinatingDiscoveryServer, ok = r.bool()
		case "ldt":
			in.LastDirtyTimestamp, ok = r.int()
		case "asg":
			in.ASGName, ok = r.string()
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	return in, true
}
