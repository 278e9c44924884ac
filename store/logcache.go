package store

import (
	"sync"

	"github.com/hashicorp/raft"
)

// logCache keeps the most recent Raft log entries in memory in front of the
// log store, so that the leader sends a new entry to its followers without
// reading it back from bolt. It is raft's LogCache with a second bound: the
// entries it holds add up to at most maxBytes (the newest one is kept
// whatever its size).
//
// raft's LogCache holds its last 512 entries whatever they weigh. A
// registration is a KiB or two, but a renewal batch carries every heartbeat
// of a second: with a million instances renewing, 512 of them held half a
// GiB on every node, which the memory limit (the live heap plus a half)
// then made room for as well, and which nothing reads once the followers
// have them.
//
// The cache holds the entries lo..hi, contiguous, each at index % len(ring).
// Anything that breaks the run (an entry that does not follow hi, a
// deletion) empties it first.
type logCache struct {
	store    raft.LogStore
	maxBytes int

	mu     sync.RWMutex
	ring   []*raft.Log
	lo, hi uint64 // the cached indexes; the cache is empty while hi == 0
	held   int    // the bytes of the cached entries, as entrySize counts them
}

// newLogCache puts a cache of at most entries entries and maxBytes bytes in
// front of store.
func newLogCache(store raft.LogStore, entries, maxBytes int) *logCache {
	return &logCache{store: store, maxBytes: maxBytes, ring: make([]*raft.Log, entries)}
}

// entrySize is what a cached entry is counted as: its data and extensions
// and the Log around them.
func entrySize(l *raft.Log) int { return len(l.Data) + len(l.Extensions) + 96 }

// IsMonotonic passes the store's answer on (raft.MonotonicLogStore).
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// GetLog answers from the cache when it holds idx, else from the store.
func (c *logCache) GetLog(idx uint64, log *raft.Log) error {
	c.mu.RLock()
	if c.hi != 0 && idx >= c.lo && idx <= c.hi {
		*log = *c.ring[idx%uint64(len(c.ring))]
		c.mu.RUnlock()
		return nil
	}
	c.mu.RUnlock()
	return c.store.GetLog(idx, log)
}

// StoreLog stores one entry.
func (c *logCache) StoreLog(log *raft.Log) error { return c.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores the entries and, once the store has them, caches them.
func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := uint64(len(c.ring))
	for _, l := range logs {
		if c.hi != 0 && l.Index != c.hi+1 {
			c.reset()
		}
		slot := l.Index % n
		if old := c.ring[slot]; old != nil {
			// The ring is full: the slot holds the oldest entry, lo.
			c.held -= entrySize(old)
			c.lo = old.Index + 1
		}
		c.ring[slot] = l
		c.held += entrySize(l)
		if c.hi == 0 {
			c.lo = l.Index
		}
		c.hi = l.Index
	}
	for c.held > c.maxBytes && c.lo < c.hi {
		slot := c.lo % n
		c.held -= entrySize(c.ring[slot])
		c.ring[slot] = nil
		c.lo++
	}
	return nil
}

// reset empties the cache; c.mu is held.
func (c *logCache) reset() {
	clear(c.ring)
	c.lo, c.hi, c.held = 0, 0, 0
}

// FirstIndex is the store's.
func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

// LastIndex is the store's.
func (c *logCache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DeleteRange empties the cache and deletes the range from the store.
func (c *logCache) DeleteRange(lo, hi uint64) error {
	c.mu.Lock()
	c.reset()
	c.mu.Unlock()
	return c.store.DeleteRange(lo, hi)
}
