package httpapi

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/httpapi/eureka"
)

// views builds the Eureka read documents, each from one consistent FSM
// view. It is the response cache's builder. The full registry is assembled
// from per-application fragments that are re-encoded only when their
// application changed, so rebuilding after one change costs one
// application's encoding plus a copy.
type views struct {
	// read runs a function on the registry reads show (the node's FSM, or
	// its AP fallback overlay).
	read func(func(*fsm.Registry))
	cfg  Config

	mu    sync.Mutex
	frags map[fragKey]fragment
	// deltaInst keeps, per format, the encoded instances of the last delta
	// build that no current fragment holds (deleted or since replaced):
	// entries are immutable, so an instance still in the delta is not
	// encoded again, and its bytes (one segment each) keep their
	// compressed piece in the cache's gzip (v.mu).
	deltaInst map[eureka.Format]map[*fsm.Entry][]byte
	// scratch is the encoding buffer reused for stored fragments (v.mu).
	scratch []byte
}

type fragKey struct {
	app    string
	format eureka.Format
}

type fragment struct {
	version uint64
	body    []byte
	// entries are the application's instances in the fragment (in id
	// order) and ends the offset in body where each one's encoding ends:
	// the delta takes instances' bytes from here instead of encoding a
	// copy (currentRuns).
	entries []*fsm.Entry
	ends    []uint32
}

// index returns e's position in the fragment, if the fragment holds that
// very entry.
func (fr fragment) index(e *fsm.Entry) (int, bool) {
	i, ok := slices.BinarySearchFunc(fr.entries, e.ID, func(x *fsm.Entry, id string) int { return strings.Compare(x.ID, id) })
	return i, ok && fr.entries[i] == e
}

// span returns the encoding of the fragment's instances i to j, the
// separators between them included.
func (fr fragment) span(i, j, prefixLen, sepLen int) []byte {
	start := prefixLen
	if i > 0 {
		start = int(fr.ends[i-1]) + sepLen
	}
	return fr.body[start:fr.ends[j]:fr.ends[j]]
}

func newViews(read func(func(*fsm.Registry)), cfg Config) *views {
	return &views{read: read, cfg: cfg, frags: map[fragKey]fragment{}, deltaInst: map[eureka.Format]map[*fsm.Entry][]byte{}}
}

// forget drops cached fragments after a change that replaced the whole
// state (a snapshot restore), whose application versions may repeat.
func (v *views) forget(ch fsm.Change) {
	if ch.All {
		v.mu.Lock()
		clear(v.frags)
		clear(v.deltaInst)
		v.mu.Unlock()
	}
}

// build is the cache.Builder.
func (v *views) build(k cache.Key) ([][]byte, uint64, error) {
	f := eureka.Format(k.Format)
	switch k.Entity {
	case cache.EntityApps:
		return v.apps(f)
	case cache.EntityDelta:
		return v.delta(f)
	case cache.EntityApp:
		return v.app(f, k.Name)
	case cache.EntityVIP, cache.EntitySVIP:
		return v.vip(f, k.Entity == cache.EntitySVIP, k.Name)
	case cache.EntityInstance:
		app, id, _ := strings.Cut(k.Name, "/")
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
}

// wholeApp describes application name for a document; call it inside
// fsm.Read with v.mu held.
func (v *views) wholeApp(r *fsm.Registry, f eureka.Format, name string) part {
	p := part{name: name, version: r.AppVersion(name), whole: true}
	if fr, ok := v.frags[fragKey{name, f}]; !ok || fr.version != p.version {
		p.entries = r.AppEntries(name)
	}
	return p
}

// fragmentLocked returns the encoded application of p, from the fragment
// store when current, else encoding it (and storing it when whole). v.mu
// must be held.
func (v *views) fragmentLocked(f eureka.Format, p part) []byte {
	if !p.whole {
		return eureka.AppendApplication(nil, f, p.name, p.entries)
	}
	k := fragKey{p.name, f}
	if fr, ok := v.frags[k]; ok && fr.version == p.version {
		return fr.body
	}
	// Encoded as AppendApplication does, noting where each instance ends.
	prefix, sep, suffix := eureka.ApplicationParts(f, p.name)
	b := append(v.scratch[:0], prefix...)
	ends := make([]uint32, len(p.entries))
	for i, e := range p.entries {
		if i > 0 {
			b = append(b, sep...)
		}
		b = eureka.AppendInstance(b, f, e)
		ends[i] = uint32(len(b))
	}
	v.scratch = append(b, suffix...)
	// Stored fragments live until their application changes: keep them
	// at their exact size rather than with append's spare capacity.
	body := bytes.Clone(v.scratch)
	v.frags[k] = fragment{version: p.version, body: body, entries: p.entries, ends: ends}
	return body
}

// collection assembles an applications document from parts as segments.
// v.mu must be held.
func (v *views) collectionLocked(f eureka.Format, versionsDelta, hash string, parts []part) [][]byte {
	prefix, sep, suffix := eureka.ApplicationsParts(f, versionsDelta, hash)
	segs := make([][]byte, 0, 2*len(parts)+2)
	segs = append(segs, prefix)
	for i, p := range parts {
		if i > 0 && len(sep) > 0 {
			segs = append(segs, sep)
		}
		segs = append(segs, v.fragmentLocked(f, p))
	}
	return append(segs, suffix)
}

// apps is GET /apps: every application, versions__delta 1, the registry's hash.
// The fragment lock is held for the whole build (lock order: fragments,
// then FSM); the FSM lock only while collecting entries, which are
// immutable and encoded afterwards.
func (v *views) apps(f eureka.Format) ([][]byte, uint64, error) {
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
	segs := v.collectionLocked(f, "1", hash, parts)
	// Drop this format's fragments of applications that are gone.
	live := make(map[string]bool, len(parts))
	for _, p := range parts {
		live[p.name] = true
	}
	for k := range v.frags {
		if k.format == f && !live[k.app] {
			delete(v.frags, k)
		}
	}
	return segs, version, nil
}

// delta is GET /apps/delta: the recently changed instances grouped per application in
// order of first appearance, with the hash of the full registry taken from
// the same view (docs/eureka-api.md, "Hash code"). An application whose
// every current instance is in the delta (after a registration burst, the
// whole registry) is the same bytes as its stored fragment, instances in
// id order, so the delta shares that fragment (and its compressed piece)
// instead of encoding a copy. The fragment lock is held for the whole
// build, as in apps.
func (v *views) delta(f eureka.Format) ([][]byte, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var parts []part
	var hash string
	var version uint64
	// current holds the whole form of the applications the delta holds
	// only in part: their fragments supply the bytes of the instances
	// that are still current.
	current := map[string]part{}
	v.read(func(r *fsm.Registry) {
		since := v.cfg.Now().Add(-r.DeltaRetention()).UnixMilli()
		index := map[string]int{}
		for _, d := range r.Delta(since) {
			i, ok := index[d.Entry.App]
			if !ok {
				i = len(parts)
				index[d.Entry.App] = i
				parts = append(parts, part{name: d.Entry.App})
			}
			parts[i].entries = append(parts[i].entries, d.Entry)
		}
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
	prefix, sep, suffix := eureka.ApplicationsParts(f, strconv.FormatUint(version, 10), hash)
	old, next := v.deltaInst[f], map[*fsm.Entry][]byte{}
	segs := [][]byte{prefix}
	for i, p := range parts {
		if i > 0 && len(sep) > 0 {
			segs = append(segs, sep)
		}
		if p.whole {
			segs = append(segs, v.fragmentLocked(f, p))
			continue
		}
		appPrefix, instSep, appSuffix := eureka.ApplicationParts(f, p.name)
		var fr fragment
		if wp, ok := current[p.name]; ok {
			v.fragmentLocked(f, wp)
			fr = v.frags[fragKey{p.name, f}]
		}
		items := fr.currentRuns(p.entries, len(appPrefix), len(instSep))
		segs = append(segs, appPrefix)
		for j, it := range items {
			if j > 0 && len(instSep) > 0 {
				segs = append(segs, instSep)
			}
			b := it.bytes
			if b == nil {
				// Not in the current fragment (deleted, or replaced since):
				// encoded for the delta, once while it stays in it.
				var ok bool
				if b, ok = next[it.entry]; !ok {
					if b, ok = old[it.entry]; !ok {
						b = eureka.AppendInstance(nil, f, it.entry)
					}
					next[it.entry] = b
				}
			}
			segs = append(segs, b)
		}
		segs = append(segs, appSuffix)
	}
	v.deltaInst[f] = next
	return append(segs, suffix), version, nil
}

// deltaItem is what the delta lists of an application it holds in part:
// bytes of the current fragment (one instance, or a run of them), or an
// entry the fragment does not hold.
type deltaItem struct {
	bytes []byte
	entry *fsm.Entry
}

// currentRuns lists the delta's entries of one application as items: the
// ones the fragment holds as slices of it. When each instance appears
// once, their order does not matter to a client, so they are put in the
// fragment's order and neighbours merged into one slice (one segment, and
// one compressed piece, per run instead of per instance); when an
// instance appears twice (changed, or cancelled and registered again),
// clients apply the items in turn, so the delta's order is kept.
func (fr fragment) currentRuns(entries []*fsm.Entry, prefixLen, sepLen int) []deltaItem {
	items := make([]deltaItem, 0, len(entries))
	seen := make(map[string]struct{}, len(entries))
	for _, e := range entries {
		seen[e.ID] = struct{}{}
	}
	if len(seen) < len(entries) || fr.body == nil {
		for _, e := range entries {
			if i, ok := fr.index(e); ok {
				items = append(items, deltaItem{bytes: fr.span(i, i, prefixLen, sepLen)})
			} else {
				items = append(items, deltaItem{entry: e})
			}
		}
		return items
	}
	var idx []int
	for _, e := range entries {
		if i, ok := fr.index(e); ok {
			idx = append(idx, i)
		} else {
			items = append(items, deltaItem{entry: e})
		}
	}
	slices.Sort(idx)
	for k := 0; k < len(idx); {
		j := k
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		items = append(items, deltaItem{bytes: fr.span(idx[k], idx[j], prefixLen, sepLen)})
		k = j + 1
	}
	return items
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
func (v *views) app(f eureka.Format, name string) ([][]byte, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var p part
	var version uint64
	found := false
	v.read(func(r *fsm.Registry) {
		if found = len(r.AppEntries(name)) > 0; found {
			// The application's own version: its document changes only
			// with it, and blocking reads of it wake only then.
			p = v.wholeApp(r, f, name)
			version = p.version
		}
	})
	if !found {
		delete(v.frags, fragKey{name, f})
		return nil, 0, fmt.Errorf("application %s: %w", name, errNoApp)
	}
	prefix, suffix := eureka.ApplicationDocParts(f)
	return [][]byte{prefix, v.fragmentLocked(f, p), suffix}, version, nil
}

// vip is GET /vips/{vip} and /svips/{svip}: instances whose (secure) VIP list contains vip exactly;
// versions__delta is -1 and the hash covers only what is returned. An
// application whose every instance matches reuses its fragment.
func (v *views) vip(f eureka.Format, secure bool, vip string) ([][]byte, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var parts []part
	var version uint64
	counts := map[string]int{}
	v.read(func(r *fsm.Registry) {
		version = r.Version()
		for _, name := range r.AppNames() {
			all := r.AppEntries(name)
			var match []*fsm.Entry
			for _, e := range all {
				list := e.Instance.VIPAddress
				if secure {
					list = e.Instance.SecureVIPAddress
				}
				if slices.Contains(fsm.VIPs(list), vip) {
					match = append(match, e)
					counts[e.Instance.Status]++
				}
			}
			switch {
			case len(match) == len(all):
				parts = append(parts, v.wholeApp(r, f, name))
			case len(match) > 0:
				parts = append(parts, part{name: name, entries: match})
			}
		}
	})
	return v.collectionLocked(f, "-1", fsm.HashCode(counts), parts), version, nil
}

// instance is GET /apps/{app}/{id} (app given) and /instances/{id} (app empty: search every application).
func (v *views) instance(f eureka.Format, app, id string) ([][]byte, uint64, error) {
	var e *fsm.Entry
	v.read(func(r *fsm.Registry) {
		if app == "" {
			e = r.FindByID(id)
		} else {
			e = r.Get(app, id)
		}
	})
	if e == nil {
		return nil, 0, fmt.Errorf("instance %s/%s: %w", app, id, fsm.ErrInstanceNotFound)
	}
	return [][]byte{eureka.AppendInstanceDoc(nil, f, e)}, e.ModifyIndex, nil
}
