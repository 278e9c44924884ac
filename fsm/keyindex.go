package fsm

import "hash/maphash"

// keyIndex finds a held entry by its key with one lookup, in a map keyed by
// a 64-bit hash of the key, beside the applications' entries that the
// registry lists and iterates by (Application). Every heartbeat is looked
// up by its key on every node, and a million instances renew 33,000 times
// a second; through maps per application a lookup went through the
// application's map, its directory, table and group, and the key's bytes,
// each a cache miss at that size, and cost nearly twice as much
// (BENCHMARKS.md, "A million instances on one machine"). The applications
// hold no map by id at all: this index is how an entry is found by its
// key, and a scan of its application's entries only for a key whose hash
// collided.
//
// The index is part of no state: it is rebuilt as entries are put, and
// the seed of its hash is the node's own. What it answers does not depend
// on the seed, so applying the same commands still yields the same state.
//
// Invariant (checkKeyIndex in the tests): for every held entry, the index
// holds that entry or collided under the hash of its key; every entry the
// index holds is held under its key.
type keyIndex struct {
	seed maphash.Seed
	m    map[uint64]*Entry
}

// collided stands under a hash that two held keys have shared: lookups of
// either scan their application's entries. It stays when one of the two
// goes, which costs only speed, and no two keys of a million share a
// 64-bit hash but once in about 37 million registries.
var collided = &Entry{}

// keyHash is the hash of an instance's key; a variable so that the tests
// can make every key collide.
var keyHash = func(seed maphash.Seed, app, id string) uint64 {
	// Multiplied by an odd constant, a bijection, so that swapping the two
	// strings does not give the same hash.
	return maphash.String(seed, id) ^ maphash.String(seed, app)*0x9e3779b97f4a7c15
}

func newKeyIndex() keyIndex {
	return keyIndex{seed: maphash.MakeSeed(), m: map[uint64]*Entry{}}
}

// get returns the entry held under (app, id), or nil; ok is false when the
// index cannot tell and the application's entries must be scanned.
func (x *keyIndex) get(app, id string) (e *Entry, ok bool) {
	e = x.m[keyHash(x.seed, app, id)]
	switch {
	case e == nil:
		return nil, true
	case e == collided:
		return nil, false
	case e.ID == id && e.App == app:
		return e, true
	}
	return nil, true // another key has this hash alone: (app, id) is not held
}

// set records e as the entry held under its key.
func (x *keyIndex) set(e *Entry) {
	h := keyHash(x.seed, e.App, e.ID)
	switch cur := x.m[h]; {
	case cur == collided:
	case cur != nil && (cur.ID != e.ID || cur.App != e.App):
		x.m[h] = collided
	default:
		x.m[h] = e
	}
}

// drop forgets e, which is no longer held.
func (x *keyIndex) drop(e *Entry) {
	h := keyHash(x.seed, e.App, e.ID)
	if x.m[h] == e {
		delete(x.m, h)
	}
}
