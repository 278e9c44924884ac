package store

import (
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"
)

// countingStore is raft's in-memory log store, counting the reads that
// reach it.
type countingStore struct {
	*raft.InmemStore
	gets int
}

func (s *countingStore) GetLog(idx uint64, l *raft.Log) error {
	s.gets++
	return s.InmemStore.GetLog(idx, l)
}

func logOf(idx uint64, size int) *raft.Log {
	return &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: make([]byte, size)}
}

// checkCache checks the cache's invariants: lo..hi cached and contiguous,
// nothing else in the ring, held their size, within maxBytes unless only
// the newest entry is left.
func checkCache(t *testing.T, c *logCache) {
	t.Helper()
	c.mu.RLock()
	defer c.mu.RUnlock()
	held, cached := 0, 0
	for _, l := range c.ring {
		if l == nil {
			continue
		}
		cached++
		held += entrySize(l)
		if l.Index < c.lo || l.Index > c.hi {
			t.Fatalf("entry %d cached outside %d..%d", l.Index, c.lo, c.hi)
		}
		if c.ring[l.Index%uint64(len(c.ring))] != l {
			t.Fatalf("entry %d in the wrong slot", l.Index)
		}
	}
	if c.hi == 0 {
		if cached != 0 || held != 0 || c.held != 0 {
			t.Fatalf("empty cache holds %d entries, %d bytes (counted %d)", cached, held, c.held)
		}
		return
	}
	if uint64(cached) != c.hi-c.lo+1 {
		t.Fatalf("%d entries cached for %d..%d", cached, c.lo, c.hi)
	}
	if held != c.held {
		t.Fatalf("held %d bytes, counted %d", held, c.held)
	}
	if c.held > c.maxBytes && c.lo != c.hi {
		t.Fatalf("held %d bytes over %d in %d entries", c.held, c.maxBytes, cached)
	}
}

func TestLogCache_RecentEntriesComeFromMemory(t *testing.T) {
	s := &countingStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(s, 8, 1<<20)
	for i := uint64(1); i <= 20; i++ {
		if err := c.StoreLog(logOf(i, 100)); err != nil {
			t.Fatal(err)
		}
	}
	checkCache(t, c)
	var l raft.Log
	for i := uint64(13); i <= 20; i++ {
		if err := c.GetLog(i, &l); err != nil || l.Index != i {
			t.Fatalf("get %d: %v, index %d", i, err, l.Index)
		}
	}
	if s.gets != 0 {
		t.Fatalf("the last 8 entries read %d times from the store", s.gets)
	}
	if err := c.GetLog(12, &l); err != nil || l.Index != 12 {
		t.Fatalf("get 12: %v, index %d", err, l.Index)
	}
	if s.gets != 1 {
		t.Fatalf("an entry past the cache's count read %d times from the store, want 1", s.gets)
	}
}

// TestLogCache_HoldsAtMostMaxBytes is what the cache is for: large entries
// (a second of a big fleet's renewals) are not kept 512 at a time.
func TestLogCache_HoldsAtMostMaxBytes(t *testing.T) {
	s := &countingStore{InmemStore: raft.NewInmemStore()}
	c := newLogCache(s, 512, 4<<20)
	for i := uint64(1); i <= 100; i++ {
		if err := c.StoreLogs([]*raft.Log{logOf(2*i-1, 1<<20), logOf(2*i, 100)}); err != nil {
			t.Fatal(err)
		}
		checkCache(t, c)
	}
	if c.held > 4<<20 {
		t.Fatalf("cache holds %d bytes", c.held)
	}
	var l raft.Log
	for i := uint64(1); i <= 200; i++ {
		if err := c.GetLog(i, &l); err != nil || l.Index != i {
			t.Fatalf("get %d: %v, index %d", i, err, l.Index)
		}
	}
	// One entry larger than the bound is still cached: the leader sends
	// the newest entry at once.
	if err := c.StoreLog(logOf(201, 8<<20)); err != nil {
		t.Fatal(err)
	}
	checkCache(t, c)
	gets := s.gets
	if err := c.GetLog(201, &l); err != nil || len(l.Data) != 8<<20 || s.gets != gets {
		t.Fatalf("the newest entry, over the bound: %v, %d bytes, %d store reads", err, len(l.Data), s.gets-gets)
	}
}

// TestLogCache_RandomOperations stores, deletes and reads at random and
// compares every read with the store's own answer.
func TestLogCache_RandomOperations(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 30))
	for round := range 20 {
		s := raft.NewInmemStore()
		c := newLogCache(s, 1+rng.IntN(40), 1+rng.IntN(50_000))
		var first, last uint64 // the store's entries: first..last, none while last == 0
		for range 400 {
			switch op := rng.IntN(10); {
			case op < 5: // append a batch after last
				var logs []*raft.Log
				for i := range 1 + rng.IntN(6) {
					logs = append(logs, logOf(last+1+uint64(i), rng.IntN(8000)))
				}
				if err := c.StoreLogs(logs); err != nil {
					t.Fatal(err)
				}
				if last == 0 {
					first = logs[0].Index
				}
				last = logs[len(logs)-1].Index
			case op < 6 && last != 0: // cut the front, as after a snapshot
				upTo := first + uint64(rng.IntN(int(last-first+1)))
				if err := c.DeleteRange(first, upTo); err != nil {
					t.Fatal(err)
				}
				if first = upTo + 1; first > last {
					first, last = 0, 0
				}
			case op < 7 && last != 0: // cut the tail, as a follower does with conflicting entries
				from := first + uint64(rng.IntN(int(last-first+1)))
				if err := c.DeleteRange(from, last); err != nil {
					t.Fatal(err)
				}
				if last = from - 1; last < first {
					first, last = 0, 0
				}
			case last != 0: // read
				idx := first + uint64(rng.IntN(int(last-first+1)))
				var got, want raft.Log
				if err := c.GetLog(idx, &got); err != nil {
					t.Fatalf("round %d: get %d: %v", round, idx, err)
				}
				if err := s.GetLog(idx, &want); err != nil {
					t.Fatal(err)
				}
				if got.Index != want.Index || len(got.Data) != len(want.Data) {
					t.Fatalf("round %d: get %d: index %d, %d bytes; the store has %d, %d bytes",
						round, idx, got.Index, len(got.Data), want.Index, len(want.Data))
				}
			}
			checkCache(t, c)
		}
	}
}
