package cache

import (
	"bytes"
	"compress/gzip"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
)

func TestCRCShiftCombines(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 64, 1000, 70000} {
		a, b := make([]byte, r.IntN(5000)), make([]byte, n)
		for i := range a {
			a[i] = byte(r.Uint32())
		}
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		want := crc32.ChecksumIEEE(append(append([]byte(nil), a...), b...))
		got := crcMul(crcShift(len(b)), crc32.ChecksumIEEE(a)) ^ crc32.ChecksumIEEE(b)
		if got != want {
			t.Fatalf("len %d+%d: combined %08x, want %08x", len(a), n, got, want)
		}
	}
}

func gunzip(t *testing.T, z []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false) // one member, as HTTP clients expect
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGzipSegments_RoundTripAndReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	frag := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefgh{}\",:"[r.IntN(13)]
		}
		return b
	}
	sep := []byte{','}
	apps := [][]byte{frag(5000), frag(300), frag(12000), frag(10)}
	doc := func(prefix string) [][]byte {
		segs := [][]byte{[]byte(prefix)}
		for i, a := range apps {
			if i > 0 {
				segs = append(segs, sep)
			}
			segs = append(segs, a)
		}
		return append(segs, []byte("]}}"), nil)
	}
	slot := &gzSlot{}
	v1 := doc(`{"applications":{"hash":"1",`)
	z1 := gzipSegments(v1, slot)
	if got, want := gunzip(t, z1), bytes.Join(v1, nil); !bytes.Equal(got, want) {
		t.Fatal("first build does not round-trip")
	}
	big := slot.pieces[idOf(apps[2])].z
	apps[1] = frag(400) // one application changed
	v2 := doc(`{"applications":{"hash":"2",`)
	z2 := gzipSegments(v2, slot)
	if got, want := gunzip(t, z2), bytes.Join(v2, nil); !bytes.Equal(got, want) {
		t.Fatal("rebuild does not round-trip")
	}
	if p := slot.pieces[idOf(apps[2])].z; &p[0] != &big[0] {
		t.Fatal("an unchanged segment was compressed again")
	}
	if len(slot.pieces) != 7 { // prefix, sep, 4 apps, suffix
		t.Fatalf("slot keeps %d pieces, want only the last build's 7", len(slot.pieces))
	}
	if empty := gzipSegments(nil, &gzSlot{}); !bytes.Equal(gunzip(t, empty), nil) {
		t.Fatal("empty document")
	}
}
