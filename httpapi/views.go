package httpapi

import (
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
	fsm *fsm.FSM
	cfg Config

	mu    sync.Mutex
	frags map[fragKey]fragment
}

type fragKey struct {
	app    string
	format eureka.Format
}

type fragment struct {
	version uint64
	body    []byte
}

func newViews(f *fsm.FSM, cfg Config) *views {
	return &views{fsm: f, cfg: cfg, frags: map[fragKey]fragment{}}
}

// forget drops cached fragments after a change that replaced the whole
// state (a snapshot restore), whose application versions may repeat.
func (v *views) forget(ch fsm.Change) {
	if ch.All {
		v.mu.Lock()
		clear(v.frags)
		v.mu.Unlock()
	}
}

// build is the cache.Builder.
func (v *views) build(k cache.Key) ([]byte, uint64, error) {
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

// group is one application's entries inside a collection document.
type group struct {
	name    string
	entries []*fsm.Entry
}

func appendGroups(f eureka.Format, versionsDelta, hash string, groups []group) []byte {
	frags := make([][]byte, 0, len(groups))
	for _, g := range groups {
		frags = append(frags, eureka.AppendApplication(nil, f, g.name, g.entries))
	}
	return eureka.AppendApplications(make([]byte, 0, docSize(frags)), f, versionsDelta, hash, frags)
}

// apps is E7: every application, versions__delta 1, the registry's hash.
// The fragment lock is held for the whole build (lock order: fragments,
// then FSM); the FSM lock only while collecting entries.
func (v *views) apps(f eureka.Format) ([]byte, uint64, error) {
	type part struct {
		key     fragKey
		version uint64
		entries []*fsm.Entry // nil when the cached fragment is current
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	var parts []part
	var hash string
	var version uint64
	v.fsm.Read(func(r *fsm.Registry) {
		names := r.AppNames()
		parts = make([]part, len(names))
		for i, name := range names {
			p := part{key: fragKey{name, f}, version: r.AppVersion(name)}
			if fr, ok := v.frags[p.key]; !ok || fr.version != p.version {
				p.entries = r.AppEntries(name)
			}
			parts[i] = p
		}
		hash, version = r.HashCode(), r.Version()
	})
	// Encode outside the FSM lock: entries are immutable.
	frags := make([][]byte, len(parts))
	fresh := make(map[fragKey]fragment, len(parts))
	for i, p := range parts {
		fr, ok := v.frags[p.key]
		if !ok || p.entries != nil {
			fr = fragment{version: p.version, body: eureka.AppendApplication(nil, f, p.key.app, p.entries)}
		}
		frags[i], fresh[p.key] = fr.body, fr
	}
	// Keep the other format's fragments; this format's vanished apps go.
	for k, fr := range v.frags {
		if k.format != f {
			fresh[k] = fr
		}
	}
	v.frags = fresh
	return eureka.AppendApplications(make([]byte, 0, docSize(frags)), f, "1", hash, frags), version, nil
}

// docSize is the capacity that holds a collection of fragments without
// regrowing (fragments plus separators and the wrapper).
func docSize(frags [][]byte) int {
	n := 256
	for _, fr := range frags {
		n += len(fr) + 1
	}
	return n
}

// delta is E8: the recently changed instances grouped per application in
// order of first appearance, with the hash of the full registry taken from
// the same view (spec §4.11).
func (v *views) delta(f eureka.Format) ([]byte, uint64, error) {
	var groups []group
	var hash string
	var version uint64
	since := v.cfg.Now().Add(-v.cfg.DeltaRetention).UnixMilli()
	v.fsm.Read(func(r *fsm.Registry) {
		index := map[string]int{}
		for _, d := range r.Delta(since) {
			i, ok := index[d.Entry.App]
			if !ok {
				i = len(groups)
				index[d.Entry.App] = i
				groups = append(groups, group{name: d.Entry.App})
			}
			groups[i].entries = append(groups[i].entries, d.Entry)
		}
		hash = r.HashCode()
		version = r.Version()
	})
	return appendGroups(f, strconv.FormatUint(version, 10), hash, groups), version, nil
}

// app is E9.
func (v *views) app(f eureka.Format, name string) ([]byte, uint64, error) {
	var entries []*fsm.Entry
	var version uint64
	v.fsm.Read(func(r *fsm.Registry) { entries, version = r.AppEntries(name), r.Version() })
	if len(entries) == 0 {
		return nil, 0, fmt.Errorf("application %s: %w", name, errNoApp)
	}
	frag := eureka.AppendApplication(nil, f, name, entries)
	return eureka.AppendApplicationDoc(nil, f, frag), version, nil
}

// vip is E12/E13: instances whose (secure) VIP list contains vip exactly;
// versions__delta is -1 and the hash covers only what is returned.
func (v *views) vip(f eureka.Format, secure bool, vip string) ([]byte, uint64, error) {
	var groups []group
	var version uint64
	counts := map[string]int{}
	v.fsm.Read(func(r *fsm.Registry) {
		version = r.Version()
		for _, name := range r.AppNames() {
			var g group
			for _, e := range r.AppEntries(name) {
				list := e.Instance.VIPAddress
				if secure {
					list = e.Instance.SecureVIPAddress
				}
				if slices.Contains(fsm.VIPs(list), vip) {
					g.entries = append(g.entries, e)
					counts[e.Instance.Status]++
				}
			}
			if len(g.entries) > 0 {
				g.name = name
				groups = append(groups, g)
			}
		}
	})
	return appendGroups(f, "-1", fsm.HashCode(counts), groups), version, nil
}

// instance is E10 (app given) and E11 (app empty: search every application).
func (v *views) instance(f eureka.Format, app, id string) ([]byte, uint64, error) {
	var e *fsm.Entry
	var version uint64
	v.fsm.Read(func(r *fsm.Registry) {
		version = r.Version()
		if app == "" {
			e = r.FindByID(id)
		} else {
			e = r.Get(app, id)
		}
	})
	if e == nil {
		return nil, 0, fmt.Errorf("instance %s/%s: %w", app, id, fsm.ErrInstanceNotFound)
	}
	return eureka.AppendInstanceDoc(nil, f, e), version, nil
}
