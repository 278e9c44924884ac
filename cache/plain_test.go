package cache

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// pieceDoc is a document of n bytes held as pieces of 10 KiB.
func pieceDoc(n int) (*Value, []byte) {
	plain := fragGen(11)(n)
	var segs []Segment
	for off := 0; off < n; off += 10 << 10 {
		segs = append(segs, Compressed(NewPiece(plain[off:min(off+10<<10, n)])))
	}
	return NewValue(segs, 1), plain
}

// Concurrent plain readers of one document share one inflate, and later
// readers take the kept copy while it is read.
func TestPlain_ConcurrentReadersShareOneInflate(t *testing.T) {
	k := newPlainKeeper(1<<20, time.Hour)
	defer k.close()
	v, want := pieceDoc(200 << 10)
	v.plain = k
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := v.PlainBytes(); !bytes.Equal(got, want) {
				t.Error("a reader got other bytes")
			}
		}()
	}
	wg.Wait()
	if n := k.inflates.Load(); n != 1 {
		t.Fatalf("%d inflates for 32 concurrent readers, want 1", n)
	}
	if k.heldBytes() != len(want) {
		t.Fatalf("keeper holds %d bytes, want %d", k.heldBytes(), len(want))
	}
}

// The keeper never holds more than its budget: a document that does not
// fit is not kept (its readers stream the inflate), whatever the reads.
func TestPlain_BudgetBoundsTheCopies(t *testing.T) {
	k := newPlainKeeper(500<<10, time.Hour)
	defer k.close()
	for i := range 10 {
		v, want := pieceDoc(200 << 10)
		v.plain = k
		got := v.PlainBytes()
		switch {
		case i < 2 && !bytes.Equal(got, want):
			t.Fatalf("document %d: not kept within the budget", i)
		case i >= 2 && got != nil:
			t.Fatalf("document %d kept beyond the budget", i)
		}
		var w bytes.Buffer
		if _, err := v.WriteTo(&w); err != nil || !bytes.Equal(w.Bytes(), want) {
			t.Fatalf("document %d: the streamed inflate differs", i)
		}
		if k.heldBytes() > 500<<10 {
			t.Fatalf("keeper holds %d bytes, over its budget", k.heldBytes())
		}
	}
}

// A copy nobody reads for PlainKeep is dropped; one still read stays.
func TestPlain_CopiesExpireWhenNotRead(t *testing.T) {
	k := newPlainKeeper(1<<20, 200*time.Millisecond)
	defer k.close()
	idle, _ := pieceDoc(100 << 10)
	busy, _ := pieceDoc(100 << 10)
	idle.plain, busy.plain = k, k
	idle.PlainBytes()
	busy.PlainBytes()
	deadline := time.Now().Add(5 * time.Second)
	for k.heldBytes() != busy.Len {
		if time.Now().After(deadline) {
			t.Fatalf("keeper holds %d bytes after the idle copy's time, want %d", k.heldBytes(), busy.Len)
		}
		busy.PlainBytes()
		time.Sleep(5 * time.Millisecond)
	}
	if n := k.inflates.Load(); n != 2 {
		t.Fatalf("%d inflates, want 2: the copy read all along was made again", n)
	}
	for k.heldBytes() != 0 {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatal("the last copy was not dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The memory of dropped copies is returned once they add up to the
// threshold, not for each copy that goes.
func TestPlain_MemoryReturnedOnceDroppedCopiesAddUp(t *testing.T) {
	k := newPlainKeeper(1<<20, 40*time.Millisecond)
	defer k.close()
	var returns atomic.Int32
	k.returnAt = func() int { return 250 << 10 }
	k.freeMemory = func() { returns.Add(1) }
	for i, want := range []int32{0, 0, 1, 1, 1, 2} { // 100 KiB dropped each time
		v, _ := pieceDoc(100 << 10)
		v.plain = k
		v.PlainBytes()
		for deadline := time.Now().Add(5 * time.Second); k.heldBytes() != 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("copy %d was not dropped", i)
			}
		}
		if n := returns.Load(); n != want {
			t.Fatalf("after %d copies of 100 KiB dropped: %d returns, want %d", i+1, n, want)
		}
	}
}

// A document that does not fit takes the room of the copies read least
// recently, if they were not read just now.
func TestPlain_EvictsCopiesNotReadLately(t *testing.T) {
	k := newPlainKeeper(500<<10, 2*time.Second)
	defer k.close()
	a, _ := pieceDoc(200 << 10)
	b, _ := pieceDoc(200 << 10)
	c, want := pieceDoc(200 << 10)
	a.plain, b.plain, c.plain = k, k, k
	a.PlainBytes()
	b.PlainBytes()
	if c.PlainBytes() != nil {
		t.Fatal("a third copy was kept while the two others were just read")
	}
	time.Sleep(600 * time.Millisecond) // more than a quarter of keep
	b.PlainBytes()
	if got := c.PlainBytes(); !bytes.Equal(got, want) {
		t.Fatal("the copy read least recently did not make room")
	}
	k.mu.Lock()
	_, hasA := k.docs[a]
	_, hasB := k.docs[b]
	k.mu.Unlock()
	if hasA || !hasB || k.heldBytes() != 400<<10 {
		t.Fatalf("kept a=%v b=%v, %d bytes: want b and c", hasA, hasB, k.heldBytes())
	}
}

// A document replaced by a newer build loses its copy at once: the budget
// holds the documents readers get now, not the versions before them.
func TestPlain_ReplacedDocumentsLoseTheirCopy(t *testing.T) {
	b, c := newChurnCache(t)
	for i := range 20 {
		v, err := c.Get(kApps)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(v.PlainBytes(), v.Bytes()) {
			t.Fatal("the kept copy differs")
		}
		if c.plain.heldBytes() != v.Len {
			t.Fatalf("change %d: the keeper holds %d bytes, want the current document's %d", i, c.plain.heldBytes(), v.Len)
		}
		b.change("B")
		c.Invalidate(fsm.Change{Apps: []string{"B"}})
		c.Refresh()
	}
}
