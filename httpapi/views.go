package httpapi

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"slices"
	"strconv"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/httpapi/eureka"
)

// response is a finished read answer.
type response struct {
	format eureka.Format
	body   []byte
	err    error
}

func (r response) gzipped() []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	_, _ = zw.Write(r.body)
	_ = zw.Close()
	return buf.Bytes()
}

// views builds the Eureka read documents from one consistent FSM view each.
type views struct {
	fsm *fsm.FSM
	cfg Config
}

func newViews(f *fsm.FSM, cfg Config) *views { return &views{fsm: f, cfg: cfg} }

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
	return eureka.AppendApplications(nil, f, versionsDelta, hash, frags)
}

// apps is E7: every application, versions__delta 1, the registry's hash.
func (v *views) apps(f eureka.Format) response {
	var groups []group
	var hash string
	v.fsm.Read(func(r *fsm.Registry) {
		for _, name := range r.AppNames() {
			groups = append(groups, group{name, r.AppEntries(name)})
		}
		hash = r.HashCode()
	})
	return response{format: f, body: appendGroups(f, "1", hash, groups)}
}

// delta is E8: the recently changed instances grouped per application in
// order of first appearance, with the hash of the full registry taken from
// the same view (spec §4.11).
func (v *views) delta(f eureka.Format) response {
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
	return response{format: f, body: appendGroups(f, strconv.FormatUint(version, 10), hash, groups)}
}

// app is E9.
func (v *views) app(f eureka.Format, name string) response {
	var entries []*fsm.Entry
	v.fsm.Read(func(r *fsm.Registry) { entries = r.AppEntries(name) })
	if len(entries) == 0 {
		return response{err: fmt.Errorf("application %s: %w", name, errNoApp)}
	}
	frag := eureka.AppendApplication(nil, f, name, entries)
	return response{format: f, body: eureka.AppendApplicationDoc(nil, f, frag)}
}

// vip is E12/E13: instances whose (secure) VIP list contains vip exactly;
// versions__delta is -1 and the hash covers only what is returned.
func (v *views) vip(f eureka.Format, secure bool, vip string) response {
	var groups []group
	counts := map[string]int{}
	v.fsm.Read(func(r *fsm.Registry) {
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
	return response{format: f, body: appendGroups(f, "-1", fsm.HashCode(counts), groups)}
}

// instance is E10 (app given) and E11 (app empty: search every application).
func (v *views) instance(f eureka.Format, app, id string) response {
	var e *fsm.Entry
	v.fsm.Read(func(r *fsm.Registry) {
		if app == "" {
			e = r.FindByID(id)
		} else {
			e = r.Get(app, id)
		}
	})
	if e == nil {
		return response{err: fmt.Errorf("instance %s/%s: %w", app, id, fsm.ErrInstanceNotFound)}
	}
	return response{format: f, body: eureka.AppendInstanceDoc(nil, f, e)}
}
