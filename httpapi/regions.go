package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/opapi"
)

// Remote regions on the read path (docs/regions.md): GET /apps and
// /apps/delta with ?regions=a,b merge the copies of those remote regions
// into the local registry as eureka-server does; GET /apps/{app} and
// /apps/{app}/{id} fall back to a remote region when the local one has no
// instance of the application.

// RegionStaleHeader names, on a regions= read, the requested regions whose
// copy is served while the region cannot be reached (comma-separated).
const RegionStaleHeader = "X-Heureka-Region-Stale"

// errRegionNotReady refuses regions= reads until every configured remote
// region was copied once, as eureka-server does (403).
var errRegionNotReady = errors.New("remote region not copied yet")

// RegionConfig is the remote regions' read settings.
type RegionConfig struct {
	// Names are the configured remote regions (lower case).
	Names []string
	// Whitelist limits, per region (or "global" for every region without
	// a list of its own), the applications a regions= read merges; a
	// region absent from it, with no global list, merges them all.
	Whitelist map[string][]string
	// NoFallback turns off the fallback of GET /apps/{app} to a remote
	// region (eureka-server's disableTransparentFallbackToOtherRegion).
	NoFallback bool
}

// allows reports whether the whitelist lets region's app into a regions=
// read (eureka-server's shouldFetchFromRemoteRegistry).
func (rc RegionConfig) allows(region, app string) bool {
	list, ok := rc.Whitelist[region]
	if !ok {
		if list, ok = rc.Whitelist["global"]; !ok {
			return true
		}
	}
	return slices.Contains(list, app)
}

// regionSet reads ?regions= the way eureka-server does (lower-cased, split
// on commas, not trimmed, sorted; names not configured are left out) and
// returns the cache name of the document. A regions= read is refused
// until every configured region was copied once; a requested region that
// cannot be reached is named in RegionStaleHeader.
func (s *Server) regionSet(c *gin.Context) (string, error) {
	rc := s.cfg.Regions
	if len(rc.Names) == 0 || c.Request.URL.RawQuery == "" {
		return "", nil
	}
	raw := c.Query("regions")
	if raw == "" {
		return "", nil
	}
	var names []string
	for _, n := range strings.Split(strings.ToLower(raw), ",") {
		if slices.Contains(rc.Names, n) && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var notReady, stale []string
	s.views.read(func(r *fsm.Registry) {
		for _, n := range rc.Names {
			rr, ok := r.RemoteRegion(n)
			if !ok || !rr.Status.Loaded {
				notReady = append(notReady, n)
			} else if !rr.Status.Reachable && slices.Contains(names, n) {
				stale = append(stale, n)
			}
		}
	})
	if len(notReady) > 0 {
		return "", fmt.Errorf("remote region %s: regions= reads are refused until every remote region was copied once, as eureka-server does: %w",
			strings.Join(notReady, ", "), errRegionNotReady)
	}
	if len(stale) > 0 {
		c.Header(RegionStaleHeader, strings.Join(stale, ","))
	}
	return strings.Join(names, ","), nil
}

// merged is the local registry with remote regions merged in.
type merged struct {
	// order lists the applications: the local ones, then those only the
	// remote regions hold, in region order.
	order []string
	// apps holds the merged instances of the applications a remote region
	// added to (the others are the local application as it is).
	apps map[string][]*fsm.Entry
	// only names, for an application no local instance and a single
	// region hold, that region: its document is the copy's application as
	// it is, whose encoding is kept between builds.
	only    map[string]string
	counts  map[string]int
	version uint64
}

// mergeRegions merges the whitelisted applications of regions (sorted)
// into the local registry, as eureka-server's
// getApplicationsFromMultipleRegions: instances of an application held in
// several regions go into one application, a later region's instance
// replacing an earlier one of the same id. The version is the newest of
// the local registry's and the regions' (all Raft indexes).
func (v *views) mergeRegions(r *fsm.Registry, regions []string) merged {
	// AppNames is shared: Clip makes the appends below copy it.
	m := merged{order: slices.Clip(r.AppNames()), apps: map[string][]*fsm.Entry{}, only: map[string]string{}, counts: r.StatusCounts(), version: r.Version()}
	pos := map[string]map[string]int{}
	for _, rn := range regions {
		rr, ok := r.RemoteRegion(rn)
		if !ok {
			continue
		}
		m.version = max(m.version, rr.Copy.Version())
		for _, app := range rr.Copy.AppNames() {
			if !v.cfg.Regions.allows(rn, app) {
				continue
			}
			cur, merging := m.apps[app]
			if !merging && m.only[app] == "" && r.AppVersion(app) == 0 {
				// The common case: an application of this region alone,
				// counted without copying its entries.
				m.only[app] = rn
				m.order = append(m.order, app)
				rr.Copy.RangeApp(app, func(e *fsm.Entry) { m.counts[e.Instance.Status]++ })
				continue
			}
			if !merging {
				// Merge into the local application, or into the one
				// region that held it so far (both counted already).
				if prev := m.only[app]; prev != "" {
					pr, _ := r.RemoteRegion(prev)
					cur = pr.Copy.AppEntries(app)
					delete(m.only, app)
				} else {
					cur = r.AppEntries(app)
				}
				pos[app] = make(map[string]int, len(cur))
				for i, e := range cur {
					pos[app][e.ID] = i
				}
			}
			for _, e := range rr.Copy.AppEntries(app) {
				if i, dup := pos[app][e.ID]; dup {
					m.counts[cur[i].Instance.Status]--
					cur[i] = e
				} else {
					pos[app][e.ID] = len(cur)
					cur = append(cur, e)
				}
				m.counts[e.Instance.Status]++
			}
			m.apps[app] = cur
		}
	}
	return m
}

// regionApps is GET /apps?regions=: versions__delta 1 and the hash of what
// it lists. Applications no region adds to share the local fragments.
func (v *views) regionApps(f eureka.Format, regions []string) ([]cache.Segment, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var parts []part
	var m merged
	v.read(func(r *fsm.Registry) {
		m = v.mergeRegions(r, regions)
		for _, name := range m.order {
			if rn := m.only[name]; rn != "" {
				rr, _ := r.RemoteRegion(rn)
				parts = append(parts, v.regionWholeApp(rr.Copy, f, rn, name))
			} else if entries, ok := m.apps[name]; ok {
				parts = append(parts, part{name: name, entries: entries})
			} else {
				parts = append(parts, v.wholeApp(r, f, name))
			}
		}
	})
	segs := v.collection(f, "1", fsm.HashCode(m.counts), parts)
	// Drop this format's fragments of the regions' applications that are
	// gone from them.
	v.dropFrags(func(k fragKey) bool {
		return k.format == f && slices.Contains(regions, k.region) && m.only[k.app] != k.region
	})
	return segs, m.version, nil
}

// regionWholeApp describes application name of r, the local registry
// (region "") or a region's copy, for a document; call it inside
// fsm.Read. When the stored fragment is current it is kept in the part,
// else the entries are read.
func (v *views) regionWholeApp(r *fsm.Registry, f eureka.Format, region, name string) part {
	p := part{name: name, version: r.AppVersion(name), whole: true, region: region}
	fr, gen, ok := v.frag(fragKey{name, f, region})
	p.gen = gen
	if ok && fr.version == p.version {
		p.current, p.hasCurrent = fr, true
	} else {
		p.entries = r.AppEntries(name)
	}
	return p
}

// regionDelta is GET /apps/delta?regions=: the local recently-changed
// queue and each region's (whitelisted), merged per application in order
// of first appearance, with the hash of the merged full registry from the
// same view, as the Java client reconciles it.
func (v *views) regionDelta(f eureka.Format, regions []string) ([]cache.Segment, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var parts []part
	var m merged
	v.read(func(r *fsm.Registry) {
		since := v.cfg.Now().Add(-r.DeltaRetention()).UnixMilli()
		index := map[string]int{}
		pos := map[string]map[string]int{}
		add := func(e *fsm.Entry) {
			i, ok := index[e.App]
			if !ok {
				i = len(parts)
				index[e.App] = i
				pos[e.App] = map[string]int{}
				parts = append(parts, part{name: e.App})
			}
			if j, dup := pos[e.App][e.ID]; dup {
				parts[i].entries[j] = e
				return
			}
			pos[e.App][e.ID] = len(parts[i].entries)
			parts[i].entries = append(parts[i].entries, e)
		}
		for _, d := range r.Delta(since) {
			add(d.Entry)
		}
		for _, rn := range regions {
			if rr, ok := r.RemoteRegion(rn); ok {
				for _, d := range rr.Copy.Delta(since) {
					if v.cfg.Regions.allows(rn, d.Entry.App) {
						add(d.Entry)
					}
				}
			}
		}
		m = v.mergeRegions(r, regions)
	})
	for i := range parts {
		parts[i].entries = deletionsLast(parts[i].entries)
	}
	return v.collection(f, strconv.FormatUint(m.version, 10), fsm.HashCode(m.counts), parts), m.version, nil
}

// fallbackApp is the application of the first remote region (in name
// order) that holds it, for GET /apps/{app} when the local region has no
// instance of it; no whitelist applies (as in eureka-server).
func (v *views) fallbackApp(r *fsm.Registry, f eureka.Format, name string) (part, uint64, bool) {
	if v.cfg.Regions.NoFallback {
		return part{}, 0, false
	}
	for _, rn := range v.cfg.Regions.Names {
		if rr, ok := r.RemoteRegion(rn); ok {
			if rr.Copy.AppVersion(name) != 0 {
				p := v.regionWholeApp(rr.Copy, f, rn, name)
				return p, p.version, true
			}
		}
	}
	return part{}, 0, false
}

// fallbackInstance is GET /apps/{app}/{id} of an application the local
// region lacks: the instance of the first remote region that holds the
// application (eureka-server looks there whatever its fallback switch).
func (v *views) fallbackInstance(r *fsm.Registry, app, id string) *fsm.Entry {
	for _, rn := range v.cfg.Regions.Names {
		if rr, ok := r.RemoteRegion(rn); ok && len(rr.Copy.AppEntries(app)) > 0 {
			return rr.Copy.Get(app, id)
		}
	}
	return nil
}

// regionStatus is the remote regions' part of GET /v1/status.
func (s *Server) regionStatus() []opapi.RegionStatus {
	var out []opapi.RegionStatus
	s.views.read(func(r *fsm.Registry) {
		for _, n := range s.cfg.Regions.Names {
			rs := opapi.RegionStatus{Name: n}
			if rr, ok := r.RemoteRegion(n); ok {
				st := rr.Status
				rs.Loaded, rs.Reachable, rs.Kind, rs.Source = st.Loaded, st.Reachable, st.Kind, st.Source
				rs.Instances, rs.SyncedAtMs, rs.SinceMs, rs.Error = rr.Copy.Count(), st.SyncedAt, st.Since, st.Error
			}
			out = append(out, rs)
		}
	})
	return out
}

// DeltaSeqHeader carries, on GET /apps/delta?after=, the sequence number
// of the latest change the answer covers: the next read asks for the
// changes after it.
const DeltaSeqHeader = "X-Heureka-Delta-Seq"

// errDeltaGone answers an ?after= whose changes aged out of the queue.
var errDeltaGone = errors.New("changes no longer held")

// serveDeltaAfter is GET /apps/delta?after=SEQ, heureka's extension for
// the clusters that copy this one as a remote region: only the changes
// after SEQ (a DeltaSeqHeader of an earlier answer), under the hash of the
// whole registry, so that a follower of a large registry reads what
// changed, not the whole recently-changed queue each time. It blocks with
// ?index=&wait= like any registry read. When changes after SEQ have aged
// out it answers 410: the follower reads /apps again. It is built fresh,
// never cached: its readers are a few remote clusters' leaders.
func (s *Server) serveDeltaAfter(c *gin.Context, raw string) {
	after, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		s.fail(c, badRequestf("after "+strconv.Quote(raw)+": want a sequence number from "+DeltaSeqHeader))
		return
	}
	f := responseFormat(c, cache.EntityDelta)
	block, blocks, err := parseBlocking(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	src, err := s.readGate(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	vw, await := s.views, s.awaitVersion
	if src == fromDurable { // never the partly replayed FSM
		vw, await = s.durableViews, s.awaitGate
	}
	if blocks && !await(c, block) {
		c.Abort() // the client went away
		return
	}
	segs, version, seq, err := vw.deltaAfter(f, after)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := cache.NewValue(segs, version)
	c.Header(DeltaSeqHeader, strconv.FormatUint(seq, 10))
	gz := acceptsGzip(c.GetHeader("Accept-Encoding"))
	docHeaders(c.Writer.Header(), v, f, gz)
	c.Status(http.StatusOK)
	writeDoc(c.Writer, v, gz)
}

// deltaAfter builds the changes after seq (serveDeltaAfter).
func (v *views) deltaAfter(f eureka.Format, after uint64) ([]cache.Segment, uint64, uint64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var parts []part
	var hash string
	var version, seq uint64
	complete := true
	v.read(func(r *fsm.Registry) {
		var changes []fsm.DeltaView
		if changes, complete = r.DeltaAfter(after); !complete {
			return
		}
		parts = partsOf(changes)
		hash, version, seq = r.HashCode(), r.Version(), r.DeltaSeq()
	})
	if !complete {
		return nil, 0, 0, fmt.Errorf("delta after %d: %w", after, errDeltaGone)
	}
	return v.collection(f, strconv.FormatUint(version, 10), hash, parts), version, seq, nil
}

// changeSignal wakes the waiters of a change to the local registry: the
// applied change itself, not a rebuilt document (a follower of a large
// registry would otherwise wait for the delta document's paced rebuild).
type changeSignal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *changeSignal) changed() {
	w.mu.Lock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
	w.mu.Unlock()
}

func (w *changeSignal) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// awaitVersion waits until the local registry's version is above
// b.index or b.wait passes; false when the client went away.
func (s *Server) awaitVersion(c *gin.Context, b blocking) bool {
	defer s.holdBlocking(c, b.wait)()
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	for {
		ch := s.contentChanged.wait()
		var version uint64
		s.views.read(func(r *fsm.Registry) { version = r.Version() })
		if version > b.index {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return true
		case <-c.Request.Context().Done():
			return false
		}
	}
}
