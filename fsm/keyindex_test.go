package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// checkKeyIndex checks keyIndex's invariant on r, that every entry's pos
// is its index in its application's entries and no id is there twice,
// that every entry carries its key's check, and that Get and Lease answer
// as a scan of the applications' entries does for every key
// randomCommands uses.
func checkKeyIndex(t *testing.T, r *Registry, step int) {
	t.Helper()
	for name, a := range r.apps {
		if len(a.entries) == 0 {
			t.Fatalf("step %d: application %s is held with no entries", step, name)
		}
		ids := map[string]bool{}
		for i, e := range a.entries {
			if int(e.pos) != i || e.App != name {
				t.Fatalf("step %d: %s/%s is at %s[%d] with pos %d", step, e.App, e.ID, name, i, e.pos)
			}
			if ids[e.ID] {
				t.Fatalf("step %d: %s/%s is held twice", step, name, e.ID)
			}
			ids[e.ID] = true
		}
	}
	slots := map[uint32]string{}
	for name, a := range r.apps {
		if int(a.slot) >= len(r.keys.lists) {
			t.Fatalf("step %d: application %s has the slot %d, beyond the index's", step, name, a.slot)
		}
		if l := r.keys.lists[a.slot]; len(l) != len(a.entries) || &l[0] != &a.entries[0] {
			t.Fatalf("step %d: slot %d does not list application %s's entries", step, a.slot, name)
		}
		if other, ok := slots[a.slot]; ok {
			t.Fatalf("step %d: applications %s and %s share the slot %d", step, name, other, a.slot)
		}
		slots[a.slot] = name
	}
	for _, slot := range r.keys.free {
		if r.keys.lists[slot] != nil {
			t.Fatalf("step %d: slot %d is free and lists entries", step, slot)
		}
		if name, ok := slots[slot]; ok {
			t.Fatalf("step %d: slot %d is free and held by %s", step, slot, name)
		}
	}
	held := 0
	r.Range(func(e *Entry) {
		held++
		h, ha := r.keys.hash(e.App, e.ID)
		if ref := r.keys.m[h]; ref == noRef || ref != collidedRef && r.keys.at(ref) != e {
			t.Fatalf("step %d: the index holds %#x for %s/%s, held at %#x", step, ref, e.App, e.ID, refAt(r.apps[e.App], e.pos))
		}
		if e.keyCheck != keyCheck(r.keys.checkSeed, ha, e.ID) {
			t.Fatalf("step %d: %s/%s carries the check %#x, not its key's", step, e.App, e.ID, e.keyCheck)
		}
	})
	for h, ref := range r.keys.m {
		if ref == collidedRef {
			continue
		}
		held--
		e := r.keys.at(ref)
		if e == nil {
			t.Fatalf("step %d: the index holds %#x, which names no entry", step, ref)
		}
		if hk, _ := r.keys.hash(e.App, e.ID); r.apps[e.App] == nil || r.apps[e.App].find(e.ID) != e || hk != h {
			t.Fatalf("step %d: the index holds %s/%s, which is not held under it", step, e.App, e.ID)
		}
	}
	if held < 0 {
		t.Fatalf("step %d: the index holds %d entries more than the registry", step, -held)
	}
	for _, app := range []string{"ORDERS", "PAYMENTS", "USERS", "NONE"} {
		for i := range 14 {
			id := fmt.Sprintf("i-%d", i)
			var want *Entry
			if a := r.apps[app]; a != nil {
				want = a.find(id)
			}
			if r.Get(app, id) != want || r.Lease(app, id) != want {
				t.Fatalf("step %d: Get or Lease(%s, %s) differs from the applications' entries", step, app, id)
			}
		}
	}
}

// TestKeyIndex_AnswersAsTheApplicationsEntries applies random commands of
// every kind and checks the index after each (remote regions' copies
// too), in a clone and after a restore, with the real hash and with one
// under which ids of equal length collide, so that lookups of collided
// keys scan the applications' entries; both end in the state of a
// registry applying the same commands.
func TestKeyIndex_AnswersAsTheApplicationsEntries(t *testing.T) {
	real := keyHash
	defer func() { keyHash = real }()
	hashes := map[string]func(maphash.Seed, uint64, string) uint64{
		"real":      real,
		"colliding": func(_ maphash.Seed, _ uint64, id string) uint64 { return uint64(len(id)) },
	}
	for seed := uint64(1); seed <= 10; seed++ {
		cmds := randomCommands(t, seed, 400)
		var states [][]byte
		for _, name := range []string{"real", "colliding"} {
			keyHash = hashes[name]
			f := New(0, nil)
			checkAll := func(r *Registry, step int) {
				checkKeyIndex(t, r, step)
				for _, rc := range r.regions {
					checkKeyIndex(t, rc.reg, step)
				}
			}
			for i, c := range cmds {
				f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: c})
				f.Read(func(r *Registry) { checkAll(r, i) })
			}
			f.Read(func(r *Registry) { checkAll(r.Clone(), len(cmds)) })
			restored := New(0, nil)
			if err := restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
				t.Fatal(err)
			}
			restored.Read(func(r *Registry) { checkAll(r, len(cmds)) })
			collisions := 0
			for _, ref := range f.reg.keys.m {
				if ref == collidedRef {
					collisions++
				}
			}
			if name == "colliding" && collisions == 0 {
				t.Fatalf("seed %d: the colliding hash made no collision", seed)
			}
			states = append(states, snapshotBytes(t, f))
			keyHash = real
		}
		if !bytes.Equal(states[0], states[1]) {
			t.Fatalf("seed %d: the colliding hash changed the state", seed)
		}
	}
}

// TestRegistry_RenewalsInPlaceStayInTheirRegistry: a registry renews its
// entries in place, so a Clone must hold copies: a renewal applied to
// one is not seen by the other.
func TestRegistry_RenewalsInPlaceStayInTheirRegistry(t *testing.T) {
	r := newReg()
	reg(r, 1, 1000, testInstance("ORDERS", "i-1", StatusUp, 1))
	c := r.Clone()
	renew := func(r *Registry, ts int64) {
		t.Helper()
		cmd := Command{Type: CmdRenewBatch, Ts: ts, Body: &RenewBatchBody{Renewals: []Renewal{{App: "ORDERS", ID: "i-1", Ts: ts}}}}
		if err := r.Apply(2, cmd, &Change{}); err != nil {
			t.Fatal(err)
		}
	}
	renew(r, 5000)
	if got := c.Get("ORDERS", "i-1").RenewedAt(); got != 1000 {
		t.Fatalf("a renewal of the registry moved its clone's lease to %d", got)
	}
	renew(c, 7000)
	if got := r.Get("ORDERS", "i-1").RenewedAt(); got != 5000 {
		t.Fatalf("a renewal of the clone moved the registry's lease to %d, want 5000", got)
	}
}

// TestFSM_SnapshotPersistsWhileRenewalsApply: Persist encodes the entries
// while applies go on, and renewals write the entries' lease in place;
// under the race detector this is the check that they may. The snapshot
// restores with every lease between the one at the snapshot and the last.
func TestFSM_SnapshotPersistsWhileRenewalsApply(t *testing.T) {
	f := New(0, nil)
	const n = 200
	idx := uint64(0)
	apply := func(typ CmdType, ts int64, body any) {
		idx++
		if res := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: mustEncode(t, typ, ts, body)}); res != nil {
			t.Fatalf("apply %d: %v", idx, res)
		}
	}
	for i := range n {
		apply(CmdRegister, 1000, &RegisterBody{Instance: testInstance("ORDERS", fmt.Sprintf("i-%d", i), StatusUp, 1)})
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := snap.Persist(&sink); err != nil {
			t.Errorf("persist: %v", err)
		}
	})
	last := int64(1000)
	for round := range 20 {
		last = int64(2000 + round)
		var rs []Renewal
		for i := range n {
			rs = append(rs, Renewal{App: "ORDERS", ID: fmt.Sprintf("i-%d", i), Ts: last})
		}
		apply(CmdRenewBatch, last, &RenewBatchBody{Renewals: rs})
	}
	wg.Wait()
	g := New(0, nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	count := 0
	g.Read(func(r *Registry) {
		r.Range(func(e *Entry) {
			count++
			if ts := e.RenewedAt(); ts < 1000 || ts > last {
				t.Errorf("%s restored with lease %d, outside [1000, %d]", e.ID, ts, last)
			}
		})
	})
	if count != n {
		t.Fatalf("restored %d entries, want %d", count, n)
	}
	f.Read(func(r *Registry) {
		if got := r.Get("ORDERS", "i-0").RenewedAt(); got != last {
			t.Fatalf("lease after the renewals %d, want %d", got, last)
		}
	})
}

// TestApplication_PositionsThroughGrowthAndRemovals grows one application to
// 2,000 instances, then removes them in random order, re-registering some
// and changing others on the way, and checks after every step that every
// entry's pos is its place, that each key held is found and each removed one
// is not, and that a shrunken application does not keep its largest room.
func TestApplication_PositionsThroughGrowthAndRemovals(t *testing.T) {
	r := newReg()
	rnd := rand.New(rand.NewPCG(7, 7))
	const n = 2000
	idx := uint64(0)
	held := map[string]bool{}
	register := func(id string) {
		idx++
		reg(r, idx, int64(idx), testInstance("BIG", id, StatusUp, 1))
		held[id] = true
	}
	for i := range n {
		register(fmt.Sprintf("i-%d", i))
	}
	order := rnd.Perm(n)
	for step, i := range order {
		id := fmt.Sprintf("i-%d", i)
		idx++
		if err := r.cancel(idx, int64(idx), "BIG", id, &Change{}); err != nil {
			t.Fatalf("step %d: cancel %s: %v", step, id, err)
		}
		delete(held, id)
		switch rnd.IntN(10) {
		case 0: // a redeploy brings an instance back
			register(fmt.Sprintf("i-%d", order[rnd.IntN(step+1)]))
		case 1: // a change replaces an entry in its place
			for k := range held {
				idx++
				if err := r.setOverride(idx, int64(idx), &OverrideBody{App: "BIG", ID: k, Status: StatusOutOfService}, &Change{}); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		checkKeyIndex(t, r, step)
		if step%97 == 0 || len(held) < 5 {
			for k := range n {
				id := fmt.Sprintf("i-%d", k)
				if got := r.Get("BIG", id); (got != nil) != held[id] {
					t.Fatalf("step %d: Get(BIG, %s) = %v, held %v", step, id, got, held[id])
				}
			}
		}
		if a := r.apps["BIG"]; a != nil && cap(a.entries) > 64 && len(a.entries) < cap(a.entries)/4 {
			t.Fatalf("step %d: %d entries keep room for %d", step, len(a.entries), cap(a.entries))
		}
	}
	if r.Count() != len(held) {
		t.Fatalf("count %d, held %d", r.Count(), len(held))
	}
}

// TestKeyIndex_OnlyHeartbeatsTrustTheHashes makes every key share one
// hash, and then one check as well, with a single instance held: a
// heartbeat's lookup (Lease) of another key takes the held entry only when
// both match, as keyIndex.probe says it may, while Get, a registration
// and a cancel of that other key find their entries by the whole key and
// leave the held one as it is.
func TestKeyIndex_OnlyHeartbeatsTrustTheHashes(t *testing.T) {
	realHash, realCheck := keyHash, keyCheck
	defer func() { keyHash, keyCheck = realHash, realCheck }()
	keyHash = func(maphash.Seed, uint64, string) uint64 { return 7 }
	for _, sameCheck := range []bool{false, true} {
		keyCheck = realCheck
		if sameCheck {
			keyCheck = func(maphash.Seed, uint64, string) uint32 { return 9 }
		}
		r := newReg()
		reg(r, 1, 1000, testInstance("ORDERS", "i-1", StatusUp, 1))
		held := r.Get("ORDERS", "i-1")
		if got := r.Lease("ORDERS", "i-1"); got != held {
			t.Fatalf("sameCheck=%v: Lease of the held key = %p, want %p", sameCheck, got, held)
		}
		if got := r.Lease("ORDERS", "i-2"); (got == held) != sameCheck || (got != nil && got != held) {
			t.Fatalf("sameCheck=%v: Lease of a key not held = %p (held %p)", sameCheck, got, held)
		}
		if r.Get("ORDERS", "i-2") != nil {
			t.Fatalf("sameCheck=%v: Get found a key that is not held", sameCheck)
		}
		if err := r.cancel(2, 2000, "ORDERS", "i-2", &Change{}); !errors.Is(err, ErrInstanceNotFound) {
			t.Fatalf("sameCheck=%v: cancel of a key not held: %v", sameCheck, err)
		}
		reg(r, 3, 3000, testInstance("ORDERS", "i-2", StatusUp, 1))
		if r.Count() != 2 || r.Get("ORDERS", "i-1") != held || r.Get("ORDERS", "i-2") == nil {
			t.Fatalf("sameCheck=%v: registering another key changed the held one", sameCheck)
		}
		// Both held now: their shared hash is collided, and heartbeats
		// scan for their entries.
		for _, id := range []string{"i-1", "i-2", "i-3"} {
			if r.Lease("ORDERS", id) != r.Get("ORDERS", id) {
				t.Fatalf("sameCheck=%v: Lease(%s) differs from Get once the hash collided", sameCheck, id)
			}
		}
		checkKeyIndex(t, r, 0)
	}
}

// TestRegistry_RenewInGroupsAsOneByOne: renew looks its renewals up in
// groups (renewGroup); every lease must end as a lookup of each renewal in
// turn (Lease) leaves it. Random batches of every length around the group
// size, of held keys, keys never held, cancelled keys and repeats, under
// the real hashes, under hashes where ids of equal length collide (the
// application's entries are scanned) and under one hash with one check for
// every key (a key not held is then taken for the one held alone under
// it, as Lease takes it).
func TestRegistry_RenewInGroupsAsOneByOne(t *testing.T) {
	realHash, realCheck := keyHash, keyCheck
	defer func() { keyHash, keyCheck = realHash, realCheck }()
	type hashes struct {
		hash  func(maphash.Seed, uint64, string) uint64
		check func(maphash.Seed, uint64, string) uint32
	}
	modes := map[string]hashes{
		"real":      {realHash, realCheck},
		"colliding": {func(_ maphash.Seed, _ uint64, id string) uint64 { return uint64(len(id)) }, realCheck},
		"one hash":  {func(maphash.Seed, uint64, string) uint64 { return 7 }, func(maphash.Seed, uint64, string) uint32 { return 9 }},
	}
	apps := []string{"ORDERS", "PAYMENTS", "USERS"}
	for name, m := range modes {
		keyHash, keyCheck = m.hash, m.check
		for seed := uint64(1); seed <= 20; seed++ {
			rng := rand.New(rand.NewPCG(seed, 7))
			r := newReg()
			held := 1 + rng.IntN(60)
			if name == "one hash" {
				held = 1 // two held keys would collide: the scan is tested above
			}
			for i := range held {
				reg(r, uint64(i+1), 1000, testInstance(apps[rng.IntN(len(apps))], fmt.Sprintf("i-%d", rng.IntN(200)), StatusUp, 1))
			}
			if rng.IntN(2) == 0 && r.Count() > 1 {
				var gone *Entry
				r.Range(func(e *Entry) { gone = e })
				if err := r.cancel(uint64(held+1), 1500, gone.App, gone.ID, &Change{}); err != nil {
					t.Fatal(err)
				}
			}
			length := []int{0, 1, renewGroup - 1, renewGroup, renewGroup + 1, 3*renewGroup + 5, rng.IntN(200)}[rng.IntN(7)]
			batch := make([]Renewal, length)
			for i := range batch {
				batch[i] = Renewal{App: apps[rng.IntN(len(apps))], ID: fmt.Sprintf("i-%d", rng.IntN(200)), Ts: 2000 + rng.Int64N(1000)}
			}
			want := r.Clone()
			for _, rn := range batch {
				if e := want.Lease(rn.App, rn.ID); e != nil && rn.Ts > e.LastRenewalTs {
					e.LastRenewalTs = rn.Ts
				}
			}
			r.renew(batch)
			r.Range(func(e *Entry) {
				if w := want.Get(e.App, e.ID); w == nil || w.LastRenewalTs != e.LastRenewalTs {
					t.Fatalf("%s, seed %d, %d renewals: %s/%s renewed to %d, one by one to %v", name, seed, length, e.App, e.ID, e.LastRenewalTs, w)
				}
			})
		}
	}
}
