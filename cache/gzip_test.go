package cache

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/heureka-registry/heureka/fsm"
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

// fragGen makes JSON-like segments of n bytes.
func fragGen(seed uint64) func(n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	return func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefgh{}\",:"[r.IntN(13)]
		}
		return b
	}
}

// compressedCases are documents of segments of every kind: empty, stored,
// compressed, incompressible, larger than a deflate window and than a
// stored block; compressed gives the large ones as pieces, as the views
// do.
func compressedCases(compressed bool) map[string][]Segment {
	r := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 100<<10)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	frag := fragGen(3)
	text := []byte(strings.Repeat(`{"instance":{"app":"A","status":"UP"}},`, 3000))
	cases := map[string][][]byte{
		"empty":         {},
		"one small":     {[]byte(`{"applications":{}}`)},
		"one large":     {text},
		"empty parts":   {nil, []byte("a"), {}, []byte("b")},
		"stored limits": {bytes.Repeat([]byte("x"), storedMax), bytes.Repeat([]byte("y"), storedMax+1)},
		"mixed":         {[]byte(`{"applications":{"application":[`), frag(5000), []byte(","), noise, []byte(","), text[:5000], frag(10), []byte("]}}")},
	}
	out := map[string][]Segment{}
	for name, bs := range cases {
		segs := PlainSegments(bs...)
		if compressed {
			for i, b := range bs {
				if len(b) > storedMax {
					segs[i] = Compressed(NewPiece(b))
				}
			}
			segs = append(segs, Compressed(NewPiece(nil))) // an empty piece
		}
		out[name] = segs
	}
	return out
}

// The gzip form decompresses to exactly the plain document, whatever the
// segments, and its three ways out agree.
func TestGzip_DecompressesToThePlainDocument(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		for name, segs := range compressedCases(compressed) {
			t.Run(fmt.Sprintf("%s/pieces=%v", name, compressed), func(t *testing.T) {
				v := NewValue(segs, 1)
				z := v.Gzip()
				if len(z) != v.GzipLen() {
					t.Fatalf("GzipLen %d, body %d bytes", v.GzipLen(), len(z))
				}
				var w bytes.Buffer
				if n, err := v.WriteGzipTo(&w); err != nil || n != int64(len(z)) || !bytes.Equal(w.Bytes(), z) {
					t.Fatalf("WriteGzipTo wrote %d bytes (%v), want the %d of Gzip", n, err, len(z))
				}
				if got := gunzip(t, z); !bytes.Equal(got, v.Bytes()) || len(got) != v.Len {
					t.Fatalf("gunzip gives %d bytes, want the %d of the plain document", len(got), v.Len)
				}
			})
		}
	}
	// Compressing segment by segment keeps most of the gain.
	text := []byte(strings.Repeat(`{"instance":{"app":"A","status":"UP"}},`, 3000))
	v := NewValue([]Segment{Compressed(NewPiece(text[:40000])), Compressed(NewPiece(text[40000:80000])), Plain(text[80000:])}, 1)
	if v.GzipLen()*5 > v.Len {
		t.Fatalf("gzip of repetitive text: %d of %d bytes", v.GzipLen(), v.Len)
	}
}

// The plain body inflated from the pieces is the bytes the pieces were
// made of, whichever way it is read.
func TestPlain_InflatedFromPiecesIsTheOriginal(t *testing.T) {
	for name, segs := range compressedCases(true) {
		var want []byte
		for _, s := range compressedCases(false)[name] {
			want = append(want, s.b...)
		}
		v := NewValue(segs, 1)
		if got := v.Bytes(); !bytes.Equal(got, want) || v.Len != len(want) {
			t.Fatalf("%s: Bytes gives %d bytes, want %d", name, len(got), len(want))
		}
		var w bytes.Buffer
		if n, err := v.WriteTo(&w); err != nil || n != int64(len(want)) || !bytes.Equal(w.Bytes(), want) {
			t.Fatalf("%s: WriteTo wrote %d bytes (%v), want %d", name, n, err, len(want))
		}
		k := newPlainKeeper(1<<20, time.Hour)
		v.plain = k
		if got := v.PlainBytes(); len(want) > 0 && !bytes.Equal(got, want) {
			t.Fatalf("%s: the kept copy differs", name)
		}
		k.close()
	}
}

// Documents holding the same application share its piece: the views make
// a fragment's piece once and hand it to every document.
func TestGzip_DocumentsSharePieces(t *testing.T) {
	frag := fragGen(5)
	apps := []*Piece{NewPiece(frag(5000)), NewPiece(frag(300)), NewPiece(frag(12000))}
	full := func(hash string) *Value {
		segs := []Segment{Plain([]byte(`{"applications":{"hash":"` + hash + `","application":[`))}
		for i, a := range apps {
			if i > 0 {
				segs = append(segs, Plain([]byte{','}))
			}
			segs = append(segs, Compressed(a))
		}
		return NewValue(append(segs, Plain([]byte("]}}"))), 1)
	}
	one := NewValue([]Segment{Plain([]byte(`{"application":`)), Compressed(apps[2]), Plain([]byte("}"))}, 1)
	v1 := full("1")
	for _, v := range []*Value{v1, one} {
		if got := gunzip(t, v.Gzip()); !bytes.Equal(got, v.Bytes()) {
			t.Fatal("does not round-trip")
		}
	}
	shares := func(v *Value, p *Piece) bool {
		for _, part := range v.gz.parts {
			if &part[0] == &p.z[0] {
				return true
			}
		}
		return false
	}
	if !shares(v1, apps[2]) || !shares(one, apps[2]) {
		t.Fatal("the gzip forms do not use the application's piece itself")
	}
}

// A plain segment, once compressed, is not held by the piece: the
// views drop the plain bytes after a build, and nothing in the cache
// keeps them alive (checked with a weak pointer to the plain bytes).
func TestPlain_PieceDoesNotRetainThePlainBytes(t *testing.T) {
	seg := fragGen(9)(64 << 10)
	w := weak.Make(&seg[0])
	v := NewValue([]Segment{Plain([]byte("[")), Compressed(NewPiece(seg)), Plain([]byte("]"))}, 1)
	seg = nil
	for range 5 {
		runtime.GC()
	}
	if w.Value() != nil {
		t.Fatal("the plain bytes of a compressed segment are still reachable")
	}
	if v.Len != 64<<10+2 || len(v.Gzip()) == 0 {
		t.Fatal("the document lost its body")
	}
	runtime.KeepAlive(v)
}

// churnBuilder builds each key from the current fragments of a few
// applications that change under it, as the fragment store of the views
// does: an application's fragment is a new piece after each change.
type churnBuilder struct {
	mu    sync.Mutex
	frags map[string]*Piece
	gen   int
}

func (b *churnBuilder) build(k Key) ([]Segment, uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	segs := []Segment{Plain([]byte(`{"applications":[`))}
	for _, name := range []string{"A", "B", "C", "D"} {
		if k.Entity == EntityApp && k.Name != name {
			continue
		}
		segs = append(segs, Compressed(b.frags[name]), Plain([]byte{','}))
	}
	return append(segs, Plain([]byte("]}"))), uint64(b.gen), nil
}

func (b *churnBuilder) change(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	b.frags[name] = NewPiece([]byte(strings.Repeat(fmt.Sprintf(`{"app":%q,"gen":%d},`, name, b.gen), 50)))
}

// newChurnCache is a cache over a churnBuilder holding applications A to D,
// rebuilt only when invalidated; it is closed when the test ends.
func newChurnCache(t *testing.T) (*churnBuilder, *Cache) {
	t.Helper()
	b := &churnBuilder{frags: map[string]*Piece{}}
	for _, n := range []string{"A", "B", "C", "D"} {
		b.change(n)
	}
	cfg := DefaultConfig()
	cfg.UpdateInterval, cfg.PushWindow = time.Hour, 0
	c, err := New(cfg, b.build, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return b, c
}

// Documents read plain and gzipped through many changes round-trip.
func TestGzip_ChurnRoundTrips(t *testing.T) {
	b, c := newChurnCache(t)
	keys := []Key{kApps, {Entity: EntityApp, Name: "A"}, {Entity: EntityApp, Name: "C"}}
	for i := range 300 {
		name := []string{"A", "B", "C", "D"}[i%4]
		b.change(name)
		c.Invalidate(fsm.Change{Apps: []string{name}})
		c.Refresh()
		for _, k := range keys {
			v, err := c.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			if got := gunzip(t, v.Gzip()); !bytes.Equal(got, v.Bytes()) || !bytes.Equal(got, v.PlainBytes()) {
				t.Fatal("does not round-trip")
			}
		}
	}
}
