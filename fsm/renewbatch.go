package fsm

import (
	"encoding/binary"
	"math"
)

// EncodeRenewBatch is Encode(CmdRenewBatch, &RenewBatchBody{Renewals:
// renewals}), byte for byte, written directly into an entry of its exact
// size. The leader writes a second of heartbeats every second, tens of
// thousands for a large fleet; the codec wrote them by reflection into a
// buffer it grew from small, several times their size in garbage.
func EncodeRenewBatch(renewals []Renewal) []byte {
	size := headerLen + 1 + 2 + arrayHeaderLen(len(renewals))
	for _, rn := range renewals {
		size += 1 + 2 + strLen(rn.App) + 3 + strLen(rn.ID) + 2 + intLen(rn.Ts)
	}
	b := make([]byte, 0, size)
	b = append(b, byte(CmdRenewBatch), bodyVersion1, 0, 0, 0, 0, 0, 0, 0, 0)
	b = append(b, mpFixMap|1, mpFixStr|1, 'r')
	if renewals == nil {
		return append(b, mpNil)
	}
	b = appendHeader(b, len(renewals), mpFixArray, fixArrayMax, 0, fixArrayMax, mpArray16, mpArray32)
	for _, rn := range renewals {
		b = append(b, mpFixMap|3, mpFixStr|1, 'a')
		b = appendStr(b, rn.App)
		b = append(b, mpFixStr|2, 'i', 'd')
		b = appendStr(b, rn.ID)
		b = append(b, mpFixStr|1, 't')
		b = appendInt(b, rn.Ts)
	}
	return b
}

// msgpack's array headers (no 8-bit form).
const (
	mpFixArray  = 0x90 // + length < 16
	mpArray16   = 0xdc
	mpArray32   = 0xdd
	fixArrayMax = 16
)

func arrayHeaderLen(n int) int {
	if n < fixArrayMax {
		return 1
	}
	return headerLenOf(n, fixArrayMax, fixArrayMax)
}

func strLen(s string) int { return headerLenOf(len(s), fixStrMax, str8Max) + len(s) }

func appendStr(b []byte, s string) []byte {
	b = appendHeader(b, len(s), mpFixStr, fixStrMax, mpStr8, str8Max, mpStr16, mpStr32)
	return append(b, s...)
}

// intLen and appendInt write an integer in the form the codec picks for
// an int64: one byte from -32 to 127, else the narrowest signed form.
func intLen(i int64) int {
	switch {
	case i >= -32 && i <= math.MaxInt8:
		return 1
	case i >= math.MinInt8 && i < 0:
		return 2
	case i >= math.MinInt16 && i <= math.MaxInt16:
		return 3
	case i >= math.MinInt32 && i <= math.MaxInt32:
		return 5
	}
	return 9
}

func appendInt(b []byte, i int64) []byte {
	switch intLen(i) {
	case 1:
		return append(b, byte(i))
	case 2:
		return append(b, 0xd0, byte(i))
	case 3:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(i))
	case 5:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(i))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(i))
}
