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

// The gzip form decompresses to exactly the plain document, whatever the
// segments (empty, stored, compressed, incompressible, larger than a
// deflate window and than a stored block), and its three ways out agree.
func TestGzip_DecompressesToThePlainDocument(t *testing.T) {
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
	for _, store := range []*pieceStore{nil, newPieceStore()} {
		for name, segs := range cases {
			t.Run(fmt.Sprintf("%s/store=%v", name, store != nil), func(t *testing.T) {
				v := NewValue(segs, 1)
				v.pieces = store
				z := v.Gzip()
				if len(z) != v.GzipLen() {
					t.Fatalf("GzipLen %d, body %d bytes", v.GzipLen(), len(z))
				}
				var w bytes.Buffer
				if n, err := v.WriteGzipTo(&w); err != nil || n != int64(len(z)) || !bytes.Equal(w.Bytes(), z) {
					t.Fatalf("WriteGzipTo wrote %d bytes (%v), want the %d of Gzip", n, err, len(z))
				}
				if got := gunzip(t, z); !bytes.Equal(got, v.Bytes()) {
					t.Fatalf("gunzip gives %d bytes, want the %d of the plain document", len(got), v.Len)
				}
			})
		}
	}
	// Compressing segment by segment keeps most of the gain.
	v := NewValue([][]byte{text[:40000], text[40000:80000], text[80000:]}, 1)
	if v.GzipLen()*5 > v.Len {
		t.Fatalf("gzip of repetitive text: %d of %d bytes", v.GzipLen(), v.Len)
	}
}

// Documents holding the same segment share its compressed piece, and a
// rebuild after one segment changed compresses only that one.
func TestGzip_DocumentsSharePieces(t *testing.T) {
	frag := fragGen(5)
	apps := [][]byte{frag(5000), frag(300), frag(12000)}
	store := newPieceStore()
	full := func(hash string) *Value {
		segs := [][]byte{[]byte(`{"applications":{"hash":"` + hash + `","application":[`)}
		for i, a := range apps {
			if i > 0 {
				segs = append(segs, []byte{','})
			}
			segs = append(segs, a)
		}
		v := NewValue(append(segs, []byte("]}}")), 1)
		v.pieces = store
		return v
	}
	one := NewValue([][]byte{[]byte(`{"application":`), apps[2], []byte("}")}, 1)
	one.pieces = store
	v1 := full("1")
	for _, v := range []*Value{v1, one} {
		if got := gunzip(t, v.Gzip()); !bytes.Equal(got, v.Bytes()) {
			t.Fatal("does not round-trip")
		}
	}
	if len(v1.gz.held) != 3 || v1.gz.held[2] != one.gz.held[0] {
		t.Fatal("the full registry and the application's document do not share its piece")
	}
	apps[1] = frag(400) // one application changed
	v2 := full("2")
	if got := gunzip(t, v2.Gzip()); !bytes.Equal(got, v2.Bytes()) {
		t.Fatal("rebuild does not round-trip")
	}
	if v2.gz.held[0] != v1.gz.held[0] || v2.gz.held[2] != v1.gz.held[2] || v2.gz.held[1] == v1.gz.held[1] {
		t.Fatal("the rebuild did not reuse exactly the unchanged pieces")
	}
	if n := store.len(); n != 4 {
		t.Fatalf("store holds %d pieces, want 4 (3 applications, one in two versions)", n)
	}
	runtime.KeepAlive(one)
}

// churnBuilder builds each key from the current fragments of a few
// applications that change under it, as the fragment store of the views
// does: an application's fragment is new bytes after each change.
type churnBuilder struct {
	mu    sync.Mutex
	frags map[string][]byte
	gen   int
}

func (b *churnBuilder) build(k Key) ([][]byte, uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	segs := [][]byte{[]byte(`{"applications":[`)}
	for _, name := range []string{"A", "B", "C", "D"} {
		if k.Entity == EntityApp && k.Name != name {
			continue
		}
		segs = append(segs, b.frags[name], []byte{','})
	}
	return append(segs, []byte("]}")), uint64(b.gen), nil
}

func (b *churnBuilder) change(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	b.frags[name] = []byte(strings.Repeat(fmt.Sprintf(`{"app":%q,"gen":%d},`, name, b.gen), 50))
}

// After many changes the piece store holds only the pieces of fragments
// that cached documents hold now: the pieces of replaced fragments leave
// it once no document uses them.
func TestGzip_StoreKeepsOnlyLivePieces(t *testing.T) {
	b := &churnBuilder{frags: map[string][]byte{}}
	for _, n := range []string{"A", "B", "C", "D"} {
		b.change(n)
	}
	cfg := DefaultConfig()
	cfg.UpdateInterval, cfg.PushWindow = time.Hour, 0
	c, err := New(cfg, b.build, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
			if got := gunzip(t, v.Gzip()); !bytes.Equal(got, v.Bytes()) {
				t.Fatal("does not round-trip")
			}
		}
	}
	// Live: the four current fragments (the cached documents hold A..D).
	want := 4
	for range 50 { // cleanups run after a collection, on their own goroutine
		runtime.GC()
		if c.pieces.len() == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("after 300 changes the store holds %d pieces, want the %d of the live fragments", c.pieces.len(), want)
}
