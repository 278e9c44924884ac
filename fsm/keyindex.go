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
// the seeds of its hashes are the node's own. What get answers does not
// depend on the seeds, so applying the same commands still yields the
// same state; what a heartbeat's lookup answers could, by the chance
// probe describes, and then only in one lease on one node.
//
// Invariant (checkKeyIndex in the tests): every held application has a
// slot of its own, whose list is its entries, and no free slot lists any;
// for every held entry, the index holds its place (entryRef) or
// collidedRef under the hash of its key, and the entry carries its key's
// check (keyCheck); every place the index holds names an entry held under
// its key.
type keyIndex struct {
	seed maphash.Seed
	// checkSeed seeds the 32 bits of hash each entry carries (keyCheck),
	// independent of the index's own 64.
	checkSeed maphash.Seed
	// m holds, under the hash of each held key, where its entry is: an
	// entryRef, or collidedRef (a key it does not hold reads as noRef).
	// It holds no pointers, so the collector never reads it. With the
	// entries themselves under the hashes, a million pointers in hash
	// order, that is in no order at all, every
	// collection looked each one up (runtime.findObject) and marked its
	// entry again, as the applications' entries had already: in a heap
	// laid out as the million's, a collection took 260 ms of one core
	// with such a map and 50 ms without (docs/benchmarks/2026-12-06-a-key-index-without-pointers.md).
	m map[uint64]entryRef
	// lists are the held applications' entries by slot
	// (Application.slot): the same slices as their entries, which only
	// put and remove change, so that a lookup goes from the slot to the
	// entry without reading the application. A slot is nil from its
	// application's removal until free hands it out again.
	lists [][]*Entry
	free  []uint32
}

// entryRef is where a held entry is: its application's slot in the
// index's lists plus one (high 32 bits) and the entry's position in that
// application's entries (low 32). The zero ref, noRef, names nothing, so
// that a map lookup of a key not held reads as it.
type entryRef uint64

const noRef entryRef = 0

// collidedRef stands under a hash that two held keys have shared: lookups
// of either scan their application's entries. It stays when one of the two
// goes, which costs only speed, and no two keys of a million share a
// 64-bit hash but once in about 37 million registries.
const collidedRef = ^entryRef(0)

// refAt is the ref of position pos in a's entries.
func refAt(a *Application, pos int32) entryRef {
	return entryRef(a.slot+1)<<32 | entryRef(uint32(pos))
}

// keyHash is the hash of an instance's key, given the hash of its
// application's name; a variable so that the tests can make keys collide.
var keyHash = func(seed maphash.Seed, appHash uint64, id string) uint64 {
	// Multiplied by an odd constant, a bijection, so that swapping the two
	// strings does not give the same hash.
	return maphash.String(seed, id) ^ appHash*0x9e3779b97f4a7c15
}

// hash returns the hash of the key (app, id) in x, and the hash of app it
// was made from.
func (x *keyIndex) hash(app, id string) (h, appHash uint64) {
	appHash = maphash.String(x.seed, app)
	return keyHash(x.seed, appHash, id), appHash
}

// keyCheck is 32 bits of a hash of the key under a seed of its own, which
// a held entry carries (Entry.keyCheck) so that a heartbeat can be matched
// to its entry without reading the key's bytes (probe). The id is hashed
// anew; the application's name enters through the hash of it that the
// index's key already took, so that a check costs one hash more, not two.
var keyCheck = func(seed maphash.Seed, appHash uint64, id string) uint32 {
	return uint32(maphash.String(seed, id) ^ appHash>>32)
}

func newKeyIndex() keyIndex {
	return keyIndex{seed: maphash.MakeSeed(), checkSeed: maphash.MakeSeed(), m: map[uint64]entryRef{}}
}

// addApp gives a new application its slot.
func (x *keyIndex) addApp(a *Application) {
	if n := len(x.free); n > 0 {
		a.slot, x.free = x.free[n-1], x.free[:n-1]
		return
	}
	a.slot = uint32(len(x.lists))
	x.lists = append(x.lists, nil)
}

// removeApp frees the slot of an application that holds no entry any more.
func (x *keyIndex) removeApp(a *Application) {
	x.lists[a.slot] = nil
	x.free = append(x.free, a.slot)
}

// at returns the entry ref names, or nil when it names none (noRef,
// collidedRef, or a ref the index would hold only if its invariant were
// broken, which then costs a scan instead of a panic).
func (x *keyIndex) at(ref entryRef) *Entry {
	slot, pos := ref>>32-1, uint32(ref) // noRef's slot wraps to the largest
	if slot >= entryRef(len(x.lists)) {
		return nil
	}
	if l := x.lists[slot]; pos < uint32(len(l)) {
		return l[pos]
	}
	return nil
}

// get returns the entry held under (app, id), or nil; ok is false when the
// index cannot tell and the application's entries must be scanned.
func (x *keyIndex) get(app, id string) (e *Entry, ok bool) { return x.probe(app, id, false) }

// probe is get, or with byHashes set the lookup of a heartbeat
// (Registry.Lease): it then trusts a match of the key's 64-bit hash and of
// its 32-bit check, and reads neither the entry's key nor its record. At
// a million instances the bytes of the held id were a cache miss of their
// own in every lookup, which every node makes for every heartbeat: more
// than a third of what a lookup cost during the million's renewals
// (docs/benchmarks/2026-12-05-heartbeats-found-by-hash.md, "Where a
// node's CPU went during the million's renewals").
//
// The price is a chance, not a certainty. A key that is held is always
// found: no other held key shares its hash (put marks a hash collided as
// soon as a second key's place would go under it). A key that is not
// held (an instance evicted or cancelled before its heartbeat) is taken
// for a held one only when both of its hashes, 96 bits in all, equal
// those of one of the keys held:
// about once in 2^76 such lookups in a registry of a million. What would
// happen then is that the heartbeat renews the other instance's lease on
// this node. Nothing but heartbeats looks up by hashes: registrations,
// cancels and every other change find their entries by get.
func (x *keyIndex) probe(app, id string, byHashes bool) (e *Entry, ok bool) {
	if byHashes {
		h, check := x.lookupKeys(app, id)
		ref := x.m[h]
		return heldByCheck(ref, x.at(ref), check)
	}
	h, _ := x.hash(app, id)
	ref := x.m[h]
	if ref == noRef {
		return nil, true
	}
	if e = x.at(ref); e == nil {
		return nil, false // collided
	}
	if e.ID == id && e.App == app {
		return e, true
	}
	return nil, true // another key has this hash alone: (app, id) is not held
}

// lookupKeys are the two hashes of a heartbeat's lookup (probe with
// byHashes): the key's hash, under which the index holds noRef,
// collidedRef or an entry's place, and the check an entry held there
// must carry to be the key's (heldByCheck). They let a caller look
// several keys up in steps (Registry.renew): every hash, then every slot,
// then every entry, so that the memory waits of one step overlap.
func (x *keyIndex) lookupKeys(app, id string) (h uint64, check uint32) {
	h, ha := x.hash(app, id)
	return h, keyCheck(x.checkSeed, ha, id)
}

// heldByCheck is what a heartbeat's lookup finds under its key's hash,
// given the ref the index holds there, the entry it names (at) and the
// key's check: the entry when it carries that check, nil when the index
// holds nothing there or another key alone, and ok false when the hash
// collided and the application's entries must be scanned.
func heldByCheck(ref entryRef, e *Entry, check uint32) (_ *Entry, ok bool) {
	switch {
	case ref == noRef:
		return nil, true
	case e == nil:
		return nil, false // collided
	case e.keyCheck == check:
		return e, true
	}
	return nil, true // another key has this hash alone: the key is not held
}

// put holds e in a, in place of old when it is not nil (at its position)
// and else at the end, and records e's place under its key, giving e its
// key's check.
func (x *keyIndex) put(a *Application, old, e *Entry) {
	if old != nil {
		e.pos = old.pos
		a.entries[e.pos] = e
	} else {
		e.pos = int32(len(a.entries))
		a.entries = append(a.entries, e)
		x.lists[a.slot] = a.entries
	}
	h, ha := x.hash(e.App, e.ID)
	e.keyCheck = keyCheck(x.checkSeed, ha, e.ID)
	ref := refAt(a, e.pos)
	switch cur := x.m[h]; {
	case cur == noRef:
		x.m[h] = ref
	case cur == collidedRef, cur == ref:
	default: // another key's place: a replaced entry keeps its position
		x.m[h] = collidedRef
	}
}

// remove takes e out of a and forgets its place; the entry drop moves
// into e's position takes its ref along.
func (x *keyIndex) remove(a *Application, e *Entry) {
	if h, _ := x.hash(e.App, e.ID); x.m[h] == refAt(a, e.pos) {
		delete(x.m, h)
	}
	m := a.drop(e)
	x.lists[a.slot] = a.entries
	if m == nil {
		return
	}
	// m came from the end, the position one past the entries left.
	if h, _ := x.hash(m.App, m.ID); x.m[h] == refAt(a, int32(len(a.entries))) {
		x.m[h] = refAt(a, m.pos)
	}
}
