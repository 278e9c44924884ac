package httpapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// views builds the Eureka read documents, each from one consistent FSM
// view. It is the response cache's builder. The full registry is assembled
// from per-application fragments that are re-encoded only when their
// application changed, so rebuilding after one change costs one
// application's encoding and compression. A fragment is held compressed
// only (a cache.Piece, shared by every document holding the application):
// it is encoded into a scratch buffer, compressed, and its plain bytes are
// not kept; plain reads inflate the pieces (cache/plain.go).
type views struct {
	// read runs a function on the registry reads show (the node's FSM, or
	// its AP fallback overlay).
	read func(func(*fsm.Registry))
	cfg  Config

	// mu serializes the builds of registry-wide documents (the full
	// registry, the delta, VIPs, the region merges) and guards what only
	// they use: deltaInst, deltaRuns. An application's document
	// does not take it: a blocking read of one application must not wait
	// behind a delta of 10,000 instances being encoded.
	mu sync.Mutex
	// fmu guards frags and is held only around the map (a leaf lock:
	// nothing else is taken while it is held); fragments are encoded
	// outside it.
	fmu   sync.Mutex
	frags map[fragKey]fragment
	// gen counts forget's clears (fmu): a fragment encoded from a state
	// read before a restore is stored only while gen is the one its part
	// was read under. Stored after the clear, it would be taken for the
	// restored application of the same version, for good.
	gen uint64
	// deltaInst keeps, per format, the compressed instances of the last
	// delta build that no current fragment holds (deleted or since
	// replaced), and deltaRuns its compressed runs of current instances:
	// entries are immutable and a run is named by its application's
	// version, so what is still in the delta is not encoded again (v.mu).
	deltaInst map[eureka.Format]map[*fsm.Entry]*cache.Piece
	deltaRuns map[eureka.Format]map[runKey]*cache.Piece
}

type fragKey struct {
	app    string
	format eureka.Format
	// region is the remote region whose copy the fragment encodes ("":
	// the local registry).
	region string
}

type fragment struct {
	version uint64
	piece   *cache.Piece
	// entries are the application's instances in the fragment (in id
	// order): the delta names runs of them (currentRuns).
	entries []*fsm.Entry
}

// runKey names a run of current instances in the delta: the fragment's
// instances i to j of an application's version.
type runKey struct {
	app     string
	version uint64
	i, j    int
}

// index returns e's position in the fragment, if the fragment holds that
// very entry.
func (fr fragment) index(e *fsm.Entry) (int, bool) {
	i, ok := slices.BinarySearchFunc(fr.entries, e.ID, func(x *fsm.Entry, id string) int { return strings.Compare(x.ID, id) })
	return i, ok && fr.entries[i] == e
}

func newViews(read func(func(*fsm.Registry)), cfg Config) *views {
	return &views{read: read, cfg: cfg, frags: map[fragKey]fragment{},
		deltaInst: map[eureka.Format]map[*fsm.Entry]*cache.Piece{}, deltaRuns: map[eureka.Format]map[runKey]*cache.Piece{}}
}

// forget drops cached fragments after a change that replaced the whole
// state (a snapshot restore), whose application versions may repeat.
func (v *views) forget(ch fsm.Change) {
	if ch.All {
		v.mu.Lock()
		v.fmu.Lock()
		clear(v.frags)
		v.gen++
		v.fmu.Unlock()
		clear(v.deltaInst)
		clear(v.deltaRuns)
		v.mu.Unlock()
	}
}

// build is the cache.Builder.
func (v *views) build(k cache.Key) ([]cache.Segment, uint64, error) {
	f := eureka.Format(k.Format)
	switch k.Entity {
	case cache.EntityApps:
		if k.Name != "" {
			return v.regionApps(f, strings.Split(k.Name, ","))
		}
		return v.apps(f)
	case cache.EntityDelta:
		if k.Name != "" {
			return v.regionDelta(f, strings.Split(k.Name, ","))
		}
		return v.delta(f)
	case cache.EntityApp:
		return v.app(f, k.Name)
	case cache.EntityVIP, cache.EntitySVIP:
		return v.vip(f, k.Entity == cache.EntitySVIP, k.Name)
	case cache.EntityInstance:
		app, id := cache.SplitInstanceName(k.Name)
		return v.instance(f, app, id)
	}
	return nil, 0, fmt.Errorf("no builder for %s", k.Entity)
}

// part is one application inside a document: either a whole application
// (whole, version set; entries nil when its cached fragment is current) or
// a filtered subset that is encoded on its own.
type part struct {
	name    string
	version uint64
	whole   bool
	entries []*fsm.Entry
	// region is the remote region of a whole application from a copy.
	region string
	// current is the stored fragment of a whole application when it was
	// current as the part was read (hasCurrent; entries are then nil):
	// kept here, for an application document built meanwhile may replace
	// it in the store.
	current    fragment
	hasCurrent bool
	// gen is the views' generation the part was read under (views.gen).
	gen uint64
}

// wholeApp describes local application name for a document; call it
// inside fsm.Read.
func (v *views) wholeApp(r *fsm.Registry, f eureka.Format, name string) part {
	return v.regionWholeApp(r, f, "", name)
}

// frag returns the stored fragment of k and the views' generation.
func (v *views) frag(k fragKey) (fragment, uint64, bool) {
	v.fmu.Lock()
	defer v.fmu.Unlock()
	fr, ok := v.frags[k]
	return fr, v.gen, ok
}

// dropFrag deletes the stored fragment of k.
func (v *views) dropFrag(k fragKey) {
	v.fmu.Lock()
	delete(v.frags, k)
	v.fmu.Unlock()
}

// dropFrags deletes the stored fragments gone says are gone.
func (v *views) dropFrags(gone func(fragKey) bool) {
	v.fmu.Lock()
	defer v.fmu.Unlock()
	for k := range v.frags {
		if gone(k) {
			delete(v.frags, k)
		}
	}
}

// scratchBufs are the encoding buffers of the pieces, which builds of
// different documents encode at the same time: plain bytes live only
// there, until they are compressed.
var scratchBufs = sync.Pool{New: func() any { return new([]byte) }}

// compress compresses what encode appends to an empty scratch buffer.
func compress(encode func([]byte) []byte) *cache.Piece {
	b := scratchBufs.Get().(*[]byte)
	defer scratchBufs.Put(b)
	*b = encode((*b)[:0])
	return cache.NewPiece(*b)
}

// encodeApp compresses the encoding of application name with entries.
func encodeApp(f eureka.Format, name string, entries []*fsm.Entry) *cache.Piece {
	return compress(func(b []byte) []byte { return eureka.AppendApplication(b, f, name, entries) })
}

// fragment returns the application of p, whole, from the fragment store
// when current, else encoding it and storing it. Two builds may encode
// the same version at once (the same bytes); an older version never
// replaces a newer one.
func (v *views) fragment(f eureka.Format, p part) fragment {
	if p.hasCurrent {
		return p.current
	}
	k := fragKey{p.name, f, p.region}
	if fr, gen, ok := v.frag(k); ok && fr.version == p.version && gen == p.gen {
		return fr
	}
	fr := fragment{version: p.version, piece: encodeApp(f, p.name, p.entries), entries: p.entries}
	v.fmu.Lock()
	if old, ok := v.frags[k]; v.gen == p.gen && (!ok || old.version <= fr.version) {
		v.frags[k] = fr
	}
	v.fmu.Unlock()
	return fr
}

// segment is p's compressed application: its fragment when whole, else
// an encoding of its own.
func (v *views) segment(f eureka.Format, p part) cache.Segment {
	if !p.whole {
		return cache.Compressed(encodeApp(f, p.name, p.entries))
	}
	return cache.Compressed(v.fragment(f, p).piece)
}

// collection assembles an applications document from parts as segments.
func (v *views) collection(f eureka.Format, versionsDelta, hash string, parts []part) []cache.Segment {
	prefix, sep, suffix := eureka.ApplicationsParts(f, versionsDelta, hash)
	segs := make([]cache.Segment, 0, 2*len(parts)+2)
	segs = append(segs, cache.Plain(prefix))
	for i, p := range parts {
		if i > 0 && len(sep) > 0 {
			segs = append(segs, cache.Plain(sep))
		}
		segs = append(segs, v.segment(f, p))
	}
	return append(segs, cache.Plain(suffix))
}

// apps is GET /apps: every application, versions__delta 1, the registry's hash.
// The wide-build lock (v.mu) is held for the whole build (lock order:
// v.mu, then the FSM, then fmu); the FSM lock only while collecting
// entries, which are immutable and encoded afterwards.
func (v *views) apps(f eureka.Format) ([]cache.Segment, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var parts []part
	var hash string
	var version uint64
	v.read(func(r *fsm.Registry) {
		for _, name := range r.AppNames() {
			parts = append(parts, v.wholeApp(r, f, name))
		}
		hash, version = r.HashCode(), r.Version()
	})
	segs := v.collection(f, "1", hash, parts)
	// Drop this format's fragments of applications that are gone.
	live := make(map[string]bool, len(parts))
	for _, p := range parts {
		live[p.name] = true
	}
	v.dropFrags(func(k fragKey) bool { return k.format == f && k.region == "" && !live[k.app] })
	return segs, version, nil
}

// delta is GET /apps/delta: the recently changed instances grouped per application in
// order of first appearance, with the hash of the full registry taken from
// the same view (docs/eureka-api.md, "Hash code"). An application whose
// every current instance is in the delta (after a registration burst, the
// whole registry) is the same bytes as its stored fragment, instances in
// id order, so the delta shares that fragment's piece instead of encoding
// a copy. Of an application it holds in part, it encodes the instances it
// lists (runs of current ones as one piece each, see currentRuns), and
// keeps their pieces for the next build while they stay in it. The
// wide-build lock is held for the whole build, as in apps.
func (v *views) delta(f eureka.Format) ([]cache.Segment, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	parts, current, hash, version := v.readDelta(f)
	prefix, sep, suffix := eureka.ApplicationsParts(f, strconv.FormatUint(version, 10), hash)
	pcs := &deltaPieces{oldInst: v.deltaInst[f], nextInst: map[*fsm.Entry]*cache.Piece{},
		oldRuns: v.deltaRuns[f], nextRuns: map[runKey]*cache.Piece{}}
	segs := []cache.Segment{cache.Plain(prefix)}
	for i, p := range parts {
		if i > 0 && len(sep) > 0 {
			segs = append(segs, cache.Plain(sep))
		}
		if p.whole {
			segs = append(segs, v.segment(f, p))
			continue
		}
		segs = v.appendPartialApp(segs, f, p, current[p.name], pcs)
	}
	v.deltaInst[f], v.deltaRuns[f] = pcs.nextInst, pcs.nextRuns
	return append(segs, cache.Plain(suffix)), version, nil
}

// readDelta reads, in one view of the registry, the delta's applications
// in order of first appearance (each whole, or the entries it holds),
// the whole form of those it holds only in part (current: their
// fragments name the runs of current instances), and the full registry's
// hash and version.
func (v *views) readDelta(f eureka.Format) (parts []part, current map[string]part, hash string, version uint64) {
	current = map[string]part{}
	v.read(func(r *fsm.Registry) {
		since := v.cfg.Now().Add(-r.DeltaRetention()).UnixMilli()
		parts = partsOf(r.Delta(since))
		for i, p := range parts {
			all := r.AppEntries(p.name)
			switch {
			case isWholeApp(p.entries, all):
				parts[i] = v.wholeApp(r, f, p.name)
			case len(all) > 0:
				current[p.name] = v.wholeApp(r, f, p.name)
			}
		}
		hash, version = r.HashCode(), r.Version()
	})
	return parts, current, hash, version
}

// deltaPieces are the encoded pieces of the applications a delta holds in
// part: those of the last build (old) and those of this one (next), which
// takes over the old ones it still needs.
type deltaPieces struct {
	oldInst, nextInst map[*fsm.Entry]*cache.Piece
	oldRuns, nextRuns map[runKey]*cache.Piece
}

// appendPartialApp appends an application the delta holds in part: the
// instances it lists, runs of current ones (those in cur, the whole form
// of the application as it stands, unless it has no instances left) as
// one piece each.
func (v *views) appendPartialApp(segs []cache.Segment, f eureka.Format, p, cur part, pcs *deltaPieces) []cache.Segment {
	appPrefix, instSep, appSuffix := eureka.ApplicationParts(f, p.name)
	var fr fragment
	if cur.whole {
		fr = v.fragment(f, cur)
	}
	segs = append(segs, cache.Plain(appPrefix))
	for j, it := range fr.currentRuns(p.entries) {
		if j > 0 && len(instSep) > 0 {
			segs = append(segs, cache.Plain(instSep))
		}
		var pc *cache.Piece
		if it.entry != nil {
			// Not in the current fragment (deleted, or replaced since).
			pc = keptPiece(pcs.nextInst, pcs.oldInst, it.entry, func() *cache.Piece {
				return compress(func(b []byte) []byte { return eureka.AppendInstance(b, f, it.entry) })
			})
		} else {
			pc = keptPiece(pcs.nextRuns, pcs.oldRuns, runKey{p.name, fr.version, it.i, it.j}, func() *cache.Piece {
				// The same bytes as the fragment's instances i to j
				// with their separators.
				return compress(func(b []byte) []byte {
					for x := it.i; x <= it.j; x++ {
						if x > it.i {
							b = append(b, instSep...)
						}
						b = eureka.AppendInstance(b, f, fr.entries[x])
					}
					return b
				})
			})
		}
		segs = append(segs, cache.Compressed(pc))
	}
	return append(segs, cache.Plain(appSuffix))
}

// partsOf groups delta changes per application, in order of first
// appearance, each application's in change order.
func partsOf(changes []fsm.DeltaView) []part {
	var parts []part
	index := map[string]int{}
	for _, d := range changes {
		i, ok := index[d.Entry.App]
		if !ok {
			i = len(parts)
			index[d.Entry.App] = i
			parts = append(parts, part{name: d.Entry.App})
		}
		parts[i].entries = append(parts[i].entries, d.Entry)
	}
	for i := range parts {
		parts[i].entries = deletionsLast(parts[i].entries)
	}
	return parts
}

// deletionsLast puts an application's deleted instances after its others
// in a delta, keeping each group's order. The Java client's updateDelta
// skips a deletion for an application it does not hold yet and then adds
// the delta's whole application, the deleted instance with it: listed
// after an addition, the deletion finds the application and is applied.
// Order is otherwise free: the queue holds one change per instance.
func deletionsLast(entries []*fsm.Entry) []*fsm.Entry {
	n := 0
	for _, e := range entries {
		if e.ActionType == fsm.ActionDeleted {
			n++
		}
	}
	if n == 0 || n == len(entries) {
		return entries
	}
	out := make([]*fsm.Entry, 0, len(entries))
	for _, e := range entries {
		if e.ActionType != fsm.ActionDeleted {
			out = append(out, e)
		}
	}
	for _, e := range entries {
		if e.ActionType == fsm.ActionDeleted {
			out = append(out, e)
		}
	}
	return out
}

// keptPiece returns the piece under k for the delta being built (next):
// already there, carried over from the last build (old), or made by build.
func keptPiece[K comparable](next, old map[K]*cache.Piece, k K, build func() *cache.Piece) *cache.Piece {
	if pc, ok := next[k]; ok {
		return pc
	}
	pc, ok := old[k]
	if !ok {
		pc = build()
	}
	next[k] = pc
	return pc
}

// deltaItem is what the delta lists of an application it holds in part:
// the current fragment's instances i to j (one, or a run of them), or an
// entry the fragment does not hold.
type deltaItem struct {
	entry *fsm.Entry
	i, j  int
}

// currentRuns lists the delta's entries of one application as items: the
// ones the fragment holds as runs of it. When each instance appears once,
// their order does not matter to a client, so they are put in the
// fragment's order and neighbours merged into one run (one segment, and
// one compressed piece, per run instead of per instance, which compresses
// as well as the fragment); when an instance appears twice (changed, or
// cancelled and registered again), clients apply the items in turn, so
// the delta's order is kept.
func (fr fragment) currentRuns(entries []*fsm.Entry) []deltaItem {
	seen := make(map[string]struct{}, len(entries))
	for _, e := range entries {
		seen[e.ID] = struct{}{}
	}
	inOrder := len(seen) < len(entries) || fr.piece == nil
	items := make([]deltaItem, 0, len(entries))
	var others []deltaItem // not in the fragment: deleted (or replaced since)
	var idx []int          // the fragment's current instances, to merge into runs
	for _, e := range entries {
		i, ok := fr.index(e)
		switch {
		case inOrder && !ok:
			items = append(items, deltaItem{entry: e})
		case inOrder:
			items = append(items, deltaItem{i: i, j: i})
		case !ok:
			others = append(others, deltaItem{entry: e})
		default:
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	for k := 0; k < len(idx); {
		j := k
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		items = append(items, deltaItem{i: idx[k], j: idx[j]})
		k = j + 1
	}
	// Deletions after the current instances (deletionsLast says why).
	return append(items, others...)
}

// isWholeApp reports whether the delta's entries of an application are
// exactly its current entries all (which are sorted by id), each once.
func isWholeApp(delta, all []*fsm.Entry) bool {
	if len(delta) != len(all) || len(all) == 0 {
		return false
	}
	sorted := slices.Clone(delta)
	slices.SortFunc(sorted, func(a, b *fsm.Entry) int { return strings.Compare(a.ID, b.ID) })
	for i := range sorted {
		if sorted[i] != all[i] {
			return false
		}
	}
	return true
}

// app is GET /apps/{app}, sharing the fragment the full registry uses.
func (v *views) app(f eureka.Format, name string) ([]cache.Segment, uint64, error) {
	var p part
	var version uint64
	found := false
	v.read(func(r *fsm.Registry) {
		if found = len(r.AppEntries(name)) > 0; found {
			// The application's own version: its document changes only
			// with it, and blocking reads of it wake only then.
			p = v.wholeApp(r, f, name)
			version = p.version
		} else {
			p, version, found = v.fallbackApp(r, f, name)
		}
	})
	if !found {
		v.dropFrag(fragKey{name, f, ""})
		return nil, 0, fmt.Errorf("application %s: %w", name, errNoApp)
	}
	prefix, suffix := eureka.ApplicationDocParts(f)
	return []cache.Segment{cache.Plain(prefix), v.segment(f, p), cache.Plain(suffix)}, version, nil
}

// vip is GET /vips/{vip} and /svips/{svip}: instances whose (secure) VIP list contains vip exactly;
// versions__delta is -1 and the hash covers only what is returned. An
// application whose every instance matches reuses its fragment.
func (v *views) vip(f eureka.Format, secure bool, vip string) ([]cache.Segment, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var parts []part
	var version uint64
	counts := map[string]int{}
	v.read(func(r *fsm.Registry) {
		version = r.Version()
		has := func(e *fsm.Entry) bool {
			if secure {
				return fsm.HasVIP(e.Instance.SecureVIPAddress, vip)
			}
			return fsm.HasVIP(e.Instance.VIPAddress, vip)
		}
		for _, name := range r.AppNames() {
			// Count first, without allocating: most applications hold
			// none of the VIP's instances or all of them, and a VIP
			// document is built by scanning the whole registry.
			matched, total := 0, 0
			r.RangeApp(name, func(e *fsm.Entry) {
				total++
				if has(e) {
					matched++
					counts[e.Instance.Status]++
				}
			})
			switch {
			case matched == 0:
			case matched == total:
				parts = append(parts, v.wholeApp(r, f, name))
			default:
				match := make([]*fsm.Entry, 0, matched)
				for _, e := range r.AppEntries(name) {
					if has(e) {
						match = append(match, e)
					}
				}
				parts = append(parts, part{name: name, entries: match})
			}
		}
	})
	return v.collection(f, "-1", fsm.HashCode(counts), parts), version, nil
}

// instance is GET /apps/{app}/{id} (app given) and /instances/{id} (app empty: search every application).
func (v *views) instance(f eureka.Format, app, id string) ([]cache.Segment, uint64, error) {
	var e *fsm.Entry
	v.read(func(r *fsm.Registry) {
		switch {
		case app == "":
			e = r.FindByID(id)
		case r.AppVersion(app) != 0: // the local region holds the application
			e = r.Get(app, id)
		default:
			e = v.fallbackInstance(r, app, id)
		}
	})
	if e == nil {
		return nil, 0, fmt.Errorf("instance %s/%s: %w", app, id, fsm.ErrInstanceNotFound)
	}
	return []cache.Segment{cache.Plain(eureka.AppendInstanceDoc(nil, f, e))}, e.ModifyIndex, nil
}
