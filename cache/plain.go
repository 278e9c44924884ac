package cache

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/flate"
)

// The plain (identity-encoded) form of a document is not kept with it: the
// pieces are the only long-lived form of an application's encoding, and a
// plain read inflates them, piece by piece, into the response (writePlain).
// Each piece is an independent raw deflate stream ended by a sync flush;
// with an empty final block after it, a pooled flate reader inflates it
// alone.
//
// A fleet of plain readers (eureka-js-client fetches the whole registry
// without gzip every 30 seconds) would inflate a large document once per
// read. The cache's plainKeeper therefore keeps the plain copy of a
// document that is being read plain: concurrent readers of one document
// version share one inflate, and later readers take the copy while it is
// read at least every PlainKeep; a copy goes as soon as a newer build
// replaces its document. What it holds is bounded by PlainBudget bytes
// whatever the mix of reads: a document that does not fit takes the room
// of copies not read lately, or else is inflated per read, streamed, with
// no copy of the whole. Why these values: DefaultConfig.

// inflater is a flate reader with the source it reads, pooled: a flate
// reader's window is 32 KiB, not worth allocating per piece.
type inflater struct {
	// src is a bytes.Reader because flate decodes one of those through
	// its fast path (a third less time than through a plain io.ByteReader).
	src bytes.Reader
	r   io.ReadCloser
	buf [8 << 10]byte
}

var inflaters = sync.Pool{New: func() any {
	f := &inflater{}
	f.r = flate.NewReader(&f.src)
	return f
}}

// copyTo writes what f.r inflates to w. Not io.Copy: a bufio.Writer hands
// a reader to the writer under it whenever its buffer is empty, which for
// an HTTP response bypasses the buffer (a write to the socket per flate
// read). Into a bufio.Writer or a bytes.Buffer with room it inflates
// straight into the free part of their buffer; anything else gets the
// inflater's own buffer's contents.
func (f *inflater) copyTo(w io.Writer) (int64, error) {
	bw, _ := w.(*bufio.Writer)
	bb, _ := w.(*bytes.Buffer)
	var n int64
	for {
		buf := f.buf[:]
		switch {
		case bw != nil:
			if bw.Available() == 0 {
				if err := bw.Flush(); err != nil {
					return n, err
				}
			}
			buf = bw.AvailableBuffer()[:bw.Available()]
		case bb != nil && bb.Available() > 0:
			buf = bb.AvailableBuffer()[:bb.Available()] // a copy made to its exact size
		}
		m, err := f.r.Read(buf)
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// writePlain writes the plain segment p was made of to w.
func (p *Piece) writePlain(w io.Writer) (int64, error) {
	f := inflaters.Get().(*inflater)
	f.src.Reset(p.stream())
	err := f.r.(flate.Resetter).Reset(&f.src, nil)
	var n int64
	if err == nil {
		n, err = f.copyTo(w)
	}
	f.src.Reset(nil)
	inflaters.Put(f)
	if err == nil && n != int64(p.n) {
		err = fmt.Errorf("piece inflated to %d bytes, want %d", n, p.n)
	}
	if err != nil {
		return n, fmt.Errorf("inflate piece: %w", err)
	}
	return n, nil
}

// writePlain writes segments' plain bytes to w, inflating the pieces.
func writePlain(w io.Writer, segments []Segment) (int64, error) {
	var n int64
	for _, s := range segments {
		var m int64
		var err error
		if s.p != nil {
			m, err = s.p.writePlain(w)
		} else {
			var k int
			k, err = w.Write(s.b)
			m = int64(k)
		}
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// plainKeeper keeps the plain copies of documents being read plain, within
// a byte budget and for as long as they are read (see above).
type plainKeeper struct {
	budget int
	keep   time.Duration

	mu     sync.Mutex
	held   int
	docs   map[*Value]*plainDoc
	timer  *time.Timer // armed while docs is not empty
	closed bool
	// unreturned counts the bytes of copies dropped since the memory
	// was last returned to the system (sweep).
	unreturned int
	// returnAt is how many bytes of dropped copies make a return
	// (returnThreshold), and freeMemory returns them
	// (debug.FreeOSMemory); tests set both.
	returnAt   func() int
	freeMemory func()

	inflates atomic.Uint64 // copies made (tests)
}

// plainDoc is one kept copy; b is set before done closes (nil if the
// inflate failed).
type plainDoc struct {
	done chan struct{}
	b    []byte
	last atomic.Int64 // unix nanoseconds of the last read
}

func newPlainKeeper(budget int, keep time.Duration) *plainKeeper {
	return &plainKeeper{budget: budget, keep: keep, docs: map[*Value]*plainDoc{},
		returnAt: returnThreshold, freeMemory: debug.FreeOSMemory}
}

// get returns v's plain body from its kept copy, making the copy when it
// fits the budget (readers arriving meanwhile wait for that one inflate),
// or nil when it does not: the caller then inflates v as it writes it.
func (k *plainKeeper) get(v *Value) []byte {
	if k == nil || k.budget <= 0 || k.keep <= 0 {
		return nil
	}
	now := time.Now().UnixNano()
	k.mu.Lock()
	d := k.docs[v]
	if d != nil {
		d.last.Store(now)
		k.mu.Unlock()
		<-d.done
		return d.b
	}
	if k.closed || (k.held+v.Len > k.budget && !k.evictLocked(v.Len, now)) {
		k.mu.Unlock()
		return nil
	}
	d = &plainDoc{done: make(chan struct{})}
	d.last.Store(now)
	k.docs[v] = d
	k.held += v.Len
	if k.timer == nil {
		k.timer = time.AfterFunc(k.sweepEvery(), k.sweep)
	}
	k.mu.Unlock()

	buf := bytes.NewBuffer(make([]byte, 0, v.Len))
	if _, err := writePlain(buf, v.Segments); err == nil {
		d.b = buf.Bytes()
	}
	k.inflates.Add(1)
	if d.b == nil {
		k.mu.Lock()
		if k.docs[v] == d {
			delete(k.docs, v)
			k.held -= v.Len
		}
		k.mu.Unlock()
	}
	close(d.done)
	return d.b
}

// evictLocked drops the copies read least recently, none read in the
// last quarter of keep (so that two documents that do not fit together do
// not take turns being copied, each read), until n more bytes fit the
// budget, and reports whether they do. k.mu must be held.
func (k *plainKeeper) evictLocked(n int, now int64) bool {
	if n > k.budget {
		return false
	}
	recent := now - int64(k.sweepEvery())
	type cand struct {
		v    *Value
		last int64
	}
	var cands []cand
	free := k.budget - k.held
	for v, d := range k.docs {
		select {
		case <-d.done:
		default:
			continue
		}
		if l := d.last.Load(); l < recent {
			cands = append(cands, cand{v, l})
			free += v.Len
		}
	}
	if free < n {
		return false
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.last, b.last) })
	for _, c := range cands {
		if k.budget-k.held >= n {
			break
		}
		delete(k.docs, c.v)
		k.held -= c.v.Len
	}
	return true
}

// drop drops v's copy: the cache replaced v with a newer build, which new
// readers get (one still writing v's copy keeps it until it is done).
func (k *plainKeeper) drop(v *Value) {
	if v == nil || !v.pieces {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if d := k.docs[v]; d != nil {
		select {
		case <-d.done:
			delete(k.docs, v)
			k.held -= v.Len
		default: // being made: the sweep drops it once unread
		}
	}
}

// sweepEvery is how often kept copies are checked: a copy outlives its
// last read by between keep and 1.25 keep.
func (k *plainKeeper) sweepEvery() time.Duration { return k.keep / 4 }

// sweep drops the copies not read for keep. Once the copies dropped add up
// to returnThreshold, it has their memory collected and returned to the
// system at once: a node whose plain readers stopped would otherwise hold
// them as garbage until it allocates enough for a collection, which an
// idle node may never do (and the automatic memory limit follows the live
// heap only after a collection).
func (k *plainKeeper) sweep() {
	k.mu.Lock()
	cut := time.Now().Add(-k.keep).UnixNano()
	dropped := 0
	for v, d := range k.docs {
		select {
		case <-d.done:
		default:
			continue // still being made
		}
		if d.last.Load() <= cut {
			delete(k.docs, v)
			k.held -= v.Len
			dropped += v.Len
		}
	}
	k.unreturned += dropped
	release := k.unreturned >= k.returnAt()
	if release {
		k.unreturned = 0
	}
	if len(k.docs) > 0 && !k.closed {
		k.timer.Reset(k.sweepEvery())
	} else {
		k.timer = nil
	}
	k.mu.Unlock()
	if release {
		k.freeMemory()
	}
}

// returnMin is the fewest bytes of dropped copies whose memory is
// returned (returnThreshold).
const returnMin = 16 << 20

// returnThreshold is how many bytes of dropped copies have their memory
// returned: returnMin, or an eighth of the live heap if more. A return
// collects the whole heap, so its cost grows with the registry; tied to the
// heap it always frees at least an eighth of what it marks, and plain
// copies that come and go cannot have a large node collected back to back.
func returnThreshold() int {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var live uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = s[0].Value.Uint64()
	}
	return max(returnMin, int(live/8))
}

// heldBytes returns the bytes of the kept copies (tests).
func (k *plainKeeper) heldBytes() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.held
}

// close drops every copy and stops the sweeps.
func (k *plainKeeper) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	clear(k.docs)
	k.held = 0
}
