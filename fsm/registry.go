package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// ErrInstanceNotFound is returned when a command names an instance the
// registry does not hold.
var ErrInstanceNotFound = errors.New("instance not found")

// DefaultDeltaRetention is how long a change stays in the delta queue.
const DefaultDeltaRetention = 3 * time.Minute

// Application is one application's instances.
type Application struct {
	Name string
	// entries are the application's instances in no particular order; an
	// entry's pos is its index here (store, remove). A slice, not a map
	// by id: lookups by key go through the key index (keyindex.go), and at
	// a million instances the collector's marking of 50,000 small maps,
	// whose keys point into the sealed records, was more than a quarter
	// of every collection's CPU (BENCHMARKS.md, "A million instances on
	// one machine").
	entries []*Entry
	// slot is the application's place in the key index (keyIndex.lists),
	// which names an entry by slot and position instead of a pointer.
	slot uint32
	// Version is the Raft index of the last content change to the
	// application (renewals excluded), so encoded fragments can be reused.
	Version uint64
}

// find returns the entry of a with id, or nil: a scan, for the keys the
// key index cannot tell apart.
func (a *Application) find(id string) *Entry {
	for _, e := range a.entries {
		if e.ID == id {
			return e
		}
	}
	return nil
}

// DeltaEntry is one instance in the recently-changed queue. The queue holds
// at most one entry per instance: the latest change wins (heureka does not
// copy Eureka's duplicate entries, see docs/eureka-api.md, "Where heureka differs").
type DeltaEntry struct {
	App    string `codec:"a"`
	ID     string `codec:"id"`
	Ts     int64  `codec:"t"`
	Seq    uint64 `codec:"q"`
	Action string `codec:"act"`
	// Deleted is the last record of a cancelled or evicted instance.
	Deleted *Entry `codec:"d"`
	// Replicated is set when an Eureka peer replicated the change to this
	// cluster (outbound replication skips such changes).
	Replicated bool `codec:"rep,omitempty"`
}

// Change tells observers what one applied command changed, so that caches
// can invalidate exactly those keys.
type Change struct {
	Index uint64
	Type  CmdType
	// Apps are the upper-cased applications whose listing changed.
	Apps []string
	// VIPs and SVIPs are the individual VIP addresses (old and new) touched.
	VIPs  []string
	SVIPs []string
	// All is set after a snapshot restore: everything may have changed.
	All bool
	// Keys are the instances the command changed (content changes only).
	Keys []KeyBody
	// Replicated is set when an Eureka peer replicated the change to this
	// cluster.
	Replicated bool
	// Region is set when the change is to the copy of that remote region:
	// Apps, VIPs and SVIPs are then the copy's, and Keys is empty.
	Region string
}

// Empty reports whether the change touched no registry content (renewals,
// membership and mode changes).
func (c *Change) Empty() bool { return !c.All && len(c.Apps) == 0 }

// Registry is the pure registry state: applications, instances and leases,
// the delta queue, members and mode. Every mutation takes the Raft index and
// the leader's timestamp from the command; nothing here reads a clock, so
// applying the same commands always yields the same state. Registry is not
// safe for concurrent use; FSM guards it.
type Registry struct {
	apps map[string]*Application
	// keys finds an entry by its key in one lookup (keyindex.go).
	keys keyIndex
	// names caches AppNames: reads run concurrently under the FSM's read
	// lock, so it is filled atomically, and only put and remove (under
	// the write lock) clear it, when an application comes or goes. The
	// full registry is built after every change; sorting 50,000 names
	// each time held the read lock, and with it every apply, for
	// milliseconds.
	names atomic.Pointer[[]string]
	delta map[deltaID]*DeltaEntry
	// deltaOrder lists delta entries in change order, possibly with
	// superseded ones (a newer entry for the same instance is in delta);
	// it lets pruning stop at the first entry young enough instead of
	// scanning the queue.
	deltaOrder []*DeltaEntry
	members    map[string]Member
	// regions are the copies of remote regions (region.go).
	regions   map[string]*regionCopy
	mode      string
	clusterID string
	// version is the Raft index of the last command that changed registry
	// content; deltaSeq orders the delta queue.
	version  uint64
	deltaSeq uint64
	// prunedSeq is the highest sequence number of a change that aged out
	// of the queue: the queue holds every change after it (DeltaAfter).
	// It is not in snapshots; a restored queue counts everything before
	// its oldest change as aged out.
	prunedSeq uint64
	count     int
	// statusCounts counts instances per effective status, kept as entries
	// change so the reconcile hash costs nothing to compute.
	statusCounts map[string]int
	// leaseShapes counts instances per lease shape, kept as entries change,
	// so that the self-preservation numbers cost no registry scan.
	leaseShapes map[LeaseShape]int
	// retentionMs bounds the delta queue's age, in the milliseconds of the
	// commands' timestamps.
	retentionMs int64
	// compressAbove is how many instances the registry holds before it
	// seals records with their metadata compressed (mdcompress.go).
	compressAbove int
}

// NewRegistry returns an empty registry whose delta queue keeps entries for
// retention (≤ 0 selects DefaultDeltaRetention).
func NewRegistry(retention time.Duration) *Registry {
	if retention <= 0 {
		retention = DefaultDeltaRetention
	}
	return newRegistry(retention.Milliseconds())
}

func newRegistry(retentionMs int64) *Registry {
	return &Registry{
		apps:          map[string]*Application{},
		keys:          newKeyIndex(),
		delta:         map[deltaID]*DeltaEntry{},
		members:       map[string]Member{},
		regions:       map[string]*regionCopy{},
		statusCounts:  map[string]int{},
		leaseShapes:   map[LeaseShape]int{},
		retentionMs:   retentionMs,
		compressAbove: DefaultCompressAbove,
	}
}

// deltaID names an instance in the delta queue. Its strings are the
// entry's own, so a queued change costs no key of its own: the queue holds
// every instance registered in its retention, the whole registry after a
// mass registration.
type deltaID struct{ app, id string }

// current reports whether d is the latest change queued for its instance.
func (r *Registry) current(d *DeltaEntry) bool { return r.delta[deltaID{d.App, d.ID}] == d }

// DeltaRetention is how long a change stays in the delta queue: readers of
// the delta take it from here, so it is configured in one place.
func (r *Registry) DeltaRetention() time.Duration {
	return time.Duration(r.retentionMs) * time.Millisecond
}

// Version is the Raft index of the last change to registry content.
func (r *Registry) Version() uint64 { return r.version }

// Count is the number of instances held.
func (r *Registry) Count() int { return r.count }

// Mode is the cluster-wide consistency mode stored in the log ("" if never set).
func (r *Registry) Mode() string { return r.mode }

// ClusterID is the cluster's identity, written once by its first leader
// ("" until then).
func (r *Registry) ClusterID() string { return r.clusterID }

// Members returns the member addresses, sorted by id.
func (r *Registry) Members() []Member {
	out := make([]Member, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Member returns one member's addresses.
func (r *Registry) Member(id string) (Member, bool) {
	m, ok := r.members[id]
	return m, ok
}

// AppNames returns the names of all applications with at least one instance, sorted.
// The slice is shared: callers must not modify it.
func (r *Registry) AppNames() []string {
	if p := r.names.Load(); p != nil {
		return *p
	}
	out := make([]string, 0, len(r.apps))
	for name := range r.apps {
		out = append(out, name)
	}
	sort.Strings(out)
	r.names.Store(&out)
	return out
}

// AppEntries returns the entries of one application sorted by id, or nil.
func (r *Registry) AppEntries(app string) []*Entry {
	a := r.apps[app]
	if a == nil {
		return nil
	}
	out := slices.Clone(a.entries)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AppVersion returns the version of one application (0 if absent).
func (r *Registry) AppVersion(app string) uint64 {
	if a := r.apps[app]; a != nil {
		return a.Version
	}
	return 0
}

// Get returns one entry, or nil.
func (r *Registry) Get(app, id string) *Entry { return r.lookup(app, id, false) }

// Lease returns the entry whose lease a heartbeat of (app, id) renews,
// or nil, as Get would, but found by the hashes of its key alone
// (keyIndex.probe): a key that is not held is taken for a held one about
// once in 2^76 lookups at a million instances. For heartbeats only, the
// most frequent lookup of all, where such a match would renew another
// instance's lease; anything that changes an entry finds it by Get.
func (r *Registry) Lease(app, id string) *Entry { return r.lookup(app, id, true) }

// lookup is Get, or Lease when byHashes is set.
func (r *Registry) lookup(app, id string, byHashes bool) *Entry {
	if e, ok := r.keys.probe(app, id, byHashes); ok {
		return e
	}
	return r.scan(app, id) // the index could not tell: no need to ask it again
}

// scan finds (app, id) among its application's entries, for a key whose
// hash collided in the index.
func (r *Registry) scan(app, id string) *Entry {
	if a := r.apps[app]; a != nil {
		return a.find(id)
	}
	return nil
}

// LeaseShape is what an instance's lease asks of the leader: its renewal
// interval and its lease duration, as registered (0 or less: the
// defaults).
type LeaseShape struct {
	RenewalIntervalSecs int32
	DurationSecs        int32
}

// DurationMs is the lease duration in milliseconds.
func (s LeaseShape) DurationMs() int64 { return int64(leaseDuration(s.DurationSecs)) * 1000 }

func shapeOf(e *Entry) LeaseShape {
	return LeaseShape{RenewalIntervalSecs: e.Instance.RenewalIntervalSecs, DurationSecs: e.Instance.DurationSecs}
}

// LeaseShapeCount is how many instances have one lease shape.
type LeaseShapeCount struct {
	LeaseShape
	Instances int
}

// LeaseShapes returns how many instances the registry holds of each lease
// shape, ordered by renewal interval and duration (so that sums over them
// come out the same every time): the self-preservation numbers without a
// scan.
func (r *Registry) LeaseShapes() []LeaseShapeCount {
	out := make([]LeaseShapeCount, 0, len(r.leaseShapes))
	for s, n := range r.leaseShapes {
		out = append(out, LeaseShapeCount{LeaseShape: s, Instances: n})
	}
	slices.SortFunc(out, func(a, b LeaseShapeCount) int {
		return cmp.Or(cmp.Compare(a.RenewalIntervalSecs, b.RenewalIntervalSecs), cmp.Compare(a.DurationSecs, b.DurationSecs))
	})
	return out
}

// FindByID returns the first entry (in application name order) with the given id.
func (r *Registry) FindByID(id string) *Entry {
	for _, name := range r.AppNames() {
		if e := r.Get(name, id); e != nil {
			return e
		}
	}
	return nil
}

// Range calls fn for every entry in no particular order: for scans that
// do not need Each's order, which costs a sort of every application.
func (r *Registry) Range(fn func(*Entry)) {
	for _, a := range r.apps {
		for _, e := range a.entries {
			fn(e)
		}
	}
}

// RangeApp calls fn for every entry of application app, in no particular
// order and without allocating.
func (r *Registry) RangeApp(app string, fn func(*Entry)) {
	if a := r.apps[app]; a != nil {
		for _, e := range a.entries {
			fn(e)
		}
	}
}

// Each calls fn for every entry, applications and ids in sorted order.
func (r *Registry) Each(fn func(*Entry)) {
	for _, name := range r.AppNames() {
		for _, e := range r.AppEntries(name) {
			fn(e)
		}
	}
}

// StatusCounts counts instances per effective status (a copy).
func (r *Registry) StatusCounts() map[string]int {
	counts := make(map[string]int, len(r.statusCounts))
	for s, n := range r.statusCounts {
		if n > 0 {
			counts[s] = n
		}
	}
	return counts
}

// HashCode is Eureka's reconcile hash over the whole registry.
func (r *Registry) HashCode() string { return HashCode(r.statusCounts) }

// HashCode formats status counts the way Eureka clients compute
// apps__hashcode: "<STATUS>_<count>_" per status, statuses sorted.
func HashCode(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for s, n := range counts {
		if n > 0 {
			names = append(names, s)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, s := range names {
		b.WriteString(s)
		b.WriteByte('_')
		b.WriteString(strconv.Itoa(counts[s]))
		b.WriteByte('_')
	}
	return b.String()
}

// Delta returns the recently-changed queue in change order, keeping only
// entries changed at or after sinceTs (epoch ms). Each element is the
// instance's current entry, or its last record if it was deleted.
func (r *Registry) Delta(sinceTs int64) []DeltaView {
	list := make([]*DeltaEntry, 0, len(r.delta))
	for _, d := range r.delta {
		if d.Ts >= sinceTs {
			list = append(list, d)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Seq < list[j].Seq })
	out := make([]DeltaView, 0, len(list))
	for _, d := range list {
		e := d.Deleted
		if d.Action != ActionDeleted {
			e = r.Get(d.App, d.ID)
		}
		if e != nil {
			out = append(out, DeltaView{Entry: e, Action: d.Action, Ts: d.Ts, Replicated: d.Replicated})
		}
	}
	return out
}

// DeltaSeq is the sequence number of the latest change the delta queue
// took.
func (r *Registry) DeltaSeq() uint64 { return r.deltaSeq }

// DeltaAfter returns the changes with a sequence number above seq, in
// change order, each as the instance's current entry or last record. It
// returns false when the queue no longer holds every such change (some
// aged out): the caller must read the whole registry instead. A seq above
// the latest has nothing after it.
func (r *Registry) DeltaAfter(seq uint64) ([]DeltaView, bool) {
	if seq < r.prunedSeq {
		return nil, false
	}
	i := len(r.deltaOrder)
	for i > 0 && r.deltaOrder[i-1].Seq > seq {
		i--
	}
	var out []DeltaView
	for _, d := range r.deltaOrder[i:] {
		if !r.current(d) {
			continue // superseded: a later change of the instance follows
		}
		e := d.Deleted
		if d.Action != ActionDeleted {
			e = r.Get(d.App, d.ID)
		}
		if e != nil {
			out = append(out, DeltaView{Entry: e, Action: d.Action, Ts: d.Ts, Replicated: d.Replicated})
		}
	}
	return out, true
}

// DeltaView is one element of a delta payload.
type DeltaView struct {
	Entry  *Entry
	Action string
	Ts     int64
	// Replicated is set when an Eureka peer replicated the change.
	Replicated bool
}

// --- mutations -------------------------------------------------------------

// put stores e under its key. An entry with a record that is not the one
// already held for the key is sealed with it (sealEntry, instance.go);
// one that shares the held record stays a heap object, its strings held
// ones: the application's name, override and action interned. Either way
// nothing it holds keeps the command it came in alive. put changes e to
// read as the entry held: it is for entries the caller made, never for
// another registry's (hold).
func (r *Registry) put(e *Entry) {
	a, old := r.slot(e.App, e.ID)
	held := e
	if old == nil || old.Instance != e.Instance {
		held = sealEntry(e, r.count >= r.compressAbove)
		*e = *held
	} else {
		intern(&e.App, &e.Override, &e.ActionType)
	}
	r.store(a, old, held)
}

// hold stores a copy of e under its key: e is an entry another registry
// holds (Clone), whose record is sealed and whose strings are held
// already, and which that registry renews in place.
func (r *Registry) hold(e *Entry) {
	c := *e
	a, old := r.slot(c.App, c.ID)
	r.store(a, old, &c)
}

// slot returns the application app and the entry it holds under id, each
// nil when there is none.
func (r *Registry) slot(app, id string) (*Application, *Entry) {
	a := r.apps[app]
	if a == nil {
		return nil, nil
	}
	if e, ok := r.keys.get(app, id); ok {
		return a, e
	}
	return a, a.find(id)
}

// store puts e in place of old in a (as slot found them), creating the
// application when a is nil, and keeps the counts.
func (r *Registry) store(a *Application, old, e *Entry) {
	if a == nil {
		// The name interned, not the entry's: a sealed entry's would keep
		// its whole allocation alive for as long as the application is.
		name := e.App
		intern(&name)
		a = &Application{Name: name}
		r.apps[name] = a
		r.keys.addApp(a)
		r.names.Store(nil)
	}
	if old != nil {
		r.statusCounts[old.Instance.Status]--
		r.dropShape(shapeOf(old))
	} else {
		r.count++
	}
	r.statusCounts[e.Instance.Status]++
	r.leaseShapes[shapeOf(e)]++
	r.keys.put(a, old, e)
}

// dropShape counts one instance of shape s less, forgetting a shape no
// instance has.
func (r *Registry) dropShape(s LeaseShape) {
	if r.leaseShapes[s] <= 1 {
		delete(r.leaseShapes, s)
		return
	}
	r.leaseShapes[s]--
}

func (r *Registry) remove(app, id string) *Entry {
	a, e := r.slot(app, id)
	if e == nil {
		return nil
	}
	r.keys.remove(a, e)
	r.count--
	r.statusCounts[e.Instance.Status]--
	r.dropShape(shapeOf(e))
	if len(a.entries) == 0 {
		delete(r.apps, app)
		r.keys.removeApp(a)
		r.names.Store(nil)
	}
	return e
}

// drop takes e out of a's entries, moving the last entry into its place,
// and returns the entry it moved (nil when e was last), which came from
// the position just past the entries left. An application that shrank to
// a quarter of its slice's room gets a smaller one, so that a fleet
// scaled down does not keep the room of its largest size.
func (a *Application) drop(e *Entry) (moved *Entry) {
	last := len(a.entries) - 1
	if m := a.entries[last]; m != e {
		m.pos = e.pos
		a.entries[e.pos] = m
		moved = m
	}
	a.entries[last] = nil
	a.entries = a.entries[:last]
	if cap(a.entries) > 64 && len(a.entries) < cap(a.entries)/4 {
		a.entries = slices.Clone(a.entries)
	}
	return moved
}

// recordDelta appends to the delta queue; every content change calls it, so
// it also advances the application's version.
func (r *Registry) recordDelta(idx uint64, ts int64, app, id, action string, deleted *Entry, c *Change) {
	if a := r.apps[app]; a != nil {
		a.Version = idx
	}
	r.deltaSeq++
	d := &DeltaEntry{App: app, ID: id, Ts: ts, Seq: r.deltaSeq, Action: action, Deleted: deleted, Replicated: c.Replicated}
	if old := r.delta[deltaID{app, id}]; old != nil {
		// deltaOrder keeps the superseded entry until it ages out; its
		// instance's last record need not stay with it.
		old.Deleted = nil
	}
	r.delta[deltaID{app, id}] = d
	c.Keys = append(c.Keys, KeyBody{App: app, ID: id})
	r.deltaOrder = append(r.deltaOrder, d)
}

// pruneDelta drops queue entries older than the retention, measured on the
// command's clock, from the front of the queue (amortised O(1) per change).
func (r *Registry) pruneDelta(ts int64) {
	cutoff := ts - r.retentionMs
	n := 0
	for n < len(r.deltaOrder) && r.deltaOrder[n].Ts < cutoff {
		if d := r.deltaOrder[n]; r.current(d) {
			delete(r.delta, deltaID{d.App, d.ID})
			r.prunedSeq = max(r.prunedSeq, d.Seq)
		}
		r.deltaOrder[n] = nil // let the superseded ones go
		n++
	}
	if n > 0 {
		r.deltaOrder = r.deltaOrder[n:]
		// Compact when superseded items dominate, so the slice stays bounded.
		if cap(r.deltaOrder) > 1024 && len(r.deltaOrder) < cap(r.deltaOrder)/4 {
			r.deltaOrder = append([]*DeltaEntry(nil), r.deltaOrder...)
		}
	}
	if len(r.deltaOrder) > 2*len(r.delta)+1024 {
		live := r.deltaOrder[:0:0]
		for _, d := range r.deltaOrder {
			if r.current(d) {
				live = append(live, d)
			}
		}
		r.deltaOrder = live
	}
}

// effectiveStatus is Eureka's first-match-wins override rule chain
// (docs/eureka-api.md, "Status override rules"). override is the override in
// force; existing is the stored entry, nil for a replicated request (the
// existing-lease rule does not apply to replication).
func effectiveStatus(candidate, override string, existing *Entry) string {
	if candidate != StatusUp && candidate != StatusOutOfService {
		return candidate // DOWN, STARTING, UNKNOWN: trust the instance
	}
	if override != "" {
		return override
	}
	if existing != nil {
		if s := existing.Instance.Status; s == StatusUp || s == StatusOutOfService {
			return s
		}
	}
	return candidate
}

// RenewStatus is the status a heartbeat for e is judged by (docs/eureka-api.md, "Renew"): when
// it is UNKNOWN the heartbeat must answer 404 so the client re-registers.
func RenewStatus(e *Entry) string {
	return effectiveStatus(e.Instance.Status, e.Override, e)
}

func touched(c *Change, in *Instance) {
	c.Apps = append(c.Apps, in.App)
	c.VIPs = append(c.VIPs, VIPs(in.VIPAddress)...)
	c.SVIPs = append(c.SVIPs, VIPs(in.SecureVIPAddress)...)
}

// register applies docs/eureka-api.md, "Register" (with heureka's replicated
// override). A registration an Eureka peer replicated follows Eureka's
// replication rules (docs/migrate-from-eureka.md, "What heureka answers a
// peer"): its overriddenstatus replaces the stored override and the status
// is not taken from the existing lease.
func (r *Registry) register(idx uint64, ts int64, in *Instance, replicated bool, c *Change) {
	in = in.clone()
	app, id := in.App, in.ID()
	existing := r.Get(app, id)
	record := in
	if existing != nil {
		touched(c, existing.Instance)
		if existing.Instance.LastDirtyTimestamp > in.LastDirtyTimestamp {
			// The stored record is newer than the registrant's: keep it.
			record = existing.Instance.clone()
		}
	}
	e := &Entry{App: app, ID: id, Instance: record, RegistrationTs: ts, LastRenewalTs: ts,
		LastUpdatedTs: ts, ActionType: ActionAdded, ModifyIndex: idx}
	if existing != nil {
		e.ServiceUpTs = existing.ServiceUpTs
		e.Override = existing.Override
	}
	if o := in.OverriddenStatus; (e.Override == "" || replicated) && o != "" && o != StatusUnknown && ValidStatus(o) {
		e.Override = o
	}
	record.OverriddenStatus = StatusUnknown
	if e.Override != "" {
		record.OverriddenStatus = e.Override
	}
	leaseRule := existing
	if replicated {
		leaseRule = nil
	}
	record.Status = effectiveStatus(record.Status, e.Override, leaseRule)
	if record.Status == StatusUp && e.ServiceUpTs == 0 {
		e.ServiceUpTs = ts
	}
	r.put(e)
	r.recordDelta(idx, ts, e.App, e.ID, ActionAdded, nil, c)
	r.version = idx
	touched(c, e.Instance)
}

// cancel removes an instance (explicit cancel or eviction): delta DELETED.
func (r *Registry) cancel(idx uint64, ts int64, app, id string, c *Change) error {
	old := r.remove(app, id)
	if old == nil {
		return ErrInstanceNotFound
	}
	gone := *old // the record is shared: sealed, it does not change
	gone.EvictionTs = ts
	gone.LastUpdatedTs = ts
	gone.ActionType = ActionDeleted
	gone.ModifyIndex = idx
	r.recordDelta(idx, ts, old.App, old.ID, ActionDeleted, &gone, c) // the held strings, not views into the command
	r.version = idx
	touched(c, old.Instance)
	return nil
}

// evictLeases removes each of leases whose record and last renewal are as
// the leader found them (EvictLeasesBody), and answers *LeasesKept when it
// left any that changed.
func (r *Registry) evictLeases(idx uint64, ts int64, leases []ExpiredLease, c *Change) error {
	evicted, kept := 0, 0
	for _, l := range leases {
		e := r.Get(l.App, l.ID)
		switch {
		case e == nil: // already gone
		case l.ChangedIn(e):
			kept++
		default:
			_ = r.cancel(idx, ts, l.App, l.ID, c)
			evicted++
		}
	}
	if kept > 0 {
		return &LeasesKept{Evicted: evicted, Kept: kept}
	}
	return nil
}

// renew records heartbeats. Unknown instances are skipped: the leader already
// answered their clients with 404. Renewals change no content (no delta, no
// cache invalidation).
func (r *Registry) renew(renewals []Renewal) {
	// A renewal batch holds every heartbeat of a second (tens of thousands
	// at fleet rate) and is applied on every node: one lookup each (Lease),
	// and the lease moved forward in place (Entry), which allocates nothing
	// and leaves the map as it is.
	//
	// At a million instances each lookup waits on memory several times:
	// for the index's slot, for the place it names in its application's
	// entries, then for the entry. One renewal after the other, those
	// waits queued up (720-800 ns a renewal); in groups, every key's
	// hashes first, then every slot, then every place, then every entry,
	// the waits of a group overlap, as no lookup depends on another's
	// (BenchmarkApplyRenewals at a million).
	var hashes [renewGroup]uint64
	var checks [renewGroup]uint32
	var refs [renewGroup]entryRef
	var found [renewGroup]*Entry
	for len(renewals) > 0 {
		group := renewals[:min(renewGroup, len(renewals))]
		renewals = renewals[len(group):]
		for i, rn := range group {
			hashes[i], checks[i] = r.keys.lookupKeys(rn.App, rn.ID)
		}
		for i := range group {
			refs[i] = r.keys.m[hashes[i]]
		}
		for i := range group {
			found[i] = r.keys.at(refs[i])
		}
		for i, rn := range group {
			e, ok := heldByCheck(refs[i], found[i], checks[i])
			if !ok {
				e = r.scan(rn.App, rn.ID)
			}
			if e != nil && rn.Ts > e.LastRenewalTs {
				atomic.StoreInt64(&e.LastRenewalTs, rn.Ts)
			}
		}
	}
}

// renewGroup is how many renewals renew looks up together.
const renewGroup = 16

// setOverride applies docs/eureka-api.md, "Status override". As in eureka-server, a status equal to
// the instance's current one records nothing (no override, no delta): the
// request only counts as a heartbeat. Otherwise the override is recorded and
// the status changes with it.
func (r *Registry) setOverride(idx uint64, ts int64, b *OverrideBody, c *Change) error {
	e := r.Get(b.App, b.ID)
	if e == nil {
		return ErrInstanceNotFound
	}
	n := *e
	n.LastRenewalTs = max(n.LastRenewalTs, ts) // a status change counts as a heartbeat
	if e.Instance.Status == b.Status {
		r.put(&n)
		return nil
	}
	n.Override = b.Status
	if b.Status == StatusUp && n.ServiceUpTs == 0 {
		n.ServiceUpTs = ts
	}
	r.putModified(idx, ts, &n, b.Status, b.Status, b.LastDirtyTimestamp, c)
	return nil
}

// deleteOverride applies docs/eureka-api.md, "Status override" (DELETE .../status): b.Status is the status left behind
// (UNKNOWN by default, which makes the next heartbeat 404).
func (r *Registry) deleteOverride(idx uint64, ts int64, b *OverrideBody, c *Change) error {
	e := r.Get(b.App, b.ID)
	if e == nil {
		return ErrInstanceNotFound
	}
	n := *e
	n.LastRenewalTs = max(n.LastRenewalTs, ts)
	if e.Override == "" {
		r.put(&n)
		return nil
	}
	n.Override = ""
	r.putModified(idx, ts, &n, b.Status, StatusUnknown, b.LastDirtyTimestamp, c)
	return nil
}

// putModified stores n, a copy of a stored entry, with a new status and
// overriddenStatus as one MODIFIED change: a newer lastDirtyTimestamp is
// adopted, the delta records it and c names what it touched.
func (r *Registry) putModified(idx uint64, ts int64, n *Entry, status, overridden string, lastDirty int64, c *Change) {
	n.Instance = n.Instance.clone()
	n.Instance.Status = status
	n.Instance.OverriddenStatus = overridden
	if lastDirty > n.Instance.LastDirtyTimestamp {
		n.Instance.LastDirtyTimestamp = lastDirty
	}
	n.ActionType = ActionModified
	n.LastUpdatedTs = ts
	n.ModifyIndex = idx
	r.put(n)
	r.recordDelta(idx, ts, n.App, n.ID, ActionModified, nil, c)
	r.version = idx
	touched(c, n.Instance)
}

// updateMetadata merges entries into the instance's metadata in place and
// emits MODIFIED (heureka does not copy Eureka's full re-register, docs/eureka-api.md, "Where heureka differs").
func (r *Registry) updateMetadata(idx uint64, ts int64, b *MetadataBody, c *Change) error {
	e := r.Get(b.App, b.ID)
	if e == nil {
		return ErrInstanceNotFound
	}
	md := e.Instance.Metadata.With(b.Metadata)
	if b.MaxEntries > 0 && md.Len() > b.MaxEntries {
		return fmt.Errorf("metadata would have %d entries after this update; at most %d are allowed: %w", md.Len(), b.MaxEntries, ErrBadCommand)
	}
	n := *e
	n.Instance = e.Instance.clone()
	n.Instance.Metadata = md
	n.ActionType = ActionModified
	n.LastUpdatedTs = ts
	n.ModifyIndex = idx
	r.put(&n)
	r.recordDelta(idx, ts, n.App, n.ID, ActionModified, nil, c)
	r.version = idx
	touched(c, n.Instance)
	return nil
}

// setMember records a member's addresses.
func (r *Registry) setMember(m Member) { r.members[m.ID] = m }

// removeMember forgets a member.
func (r *Registry) removeMember(id string) { delete(r.members, id) }

// setMode records the cluster-wide mode.
func (r *Registry) setMode(mode string) { r.mode = mode }

// setClusterID names the cluster; the first name stands, so that two
// leaders racing to name a new cluster agree on the one the log has first.
func (r *Registry) setClusterID(id string) {
	if r.clusterID == "" {
		r.clusterID = id
	}
}

// Apply applies one decoded command at log index idx, recording what it
// touched in c. The FSM calls it for every log entry; a node in AP fallback
// also calls it on its local overlay, so both follow the same rules.
func (r *Registry) Apply(idx uint64, cmd Command, c *Change) error {
	spec, ok := commands[cmd.Type&^CmdIgnoreUnknown]
	if !ok {
		return fmt.Errorf("%w: unknown type %d", ErrBadCommand, byte(cmd.Type))
	}
	if spec.content || spec.ticks {
		r.pruneDelta(cmd.Ts)
		for _, rc := range r.regions {
			rc.reg.pruneDelta(cmd.Ts)
		}
	}
	return spec.apply(r, idx, cmd, c)
}

// Clone returns an independent copy of the registry. Its entries are
// copies too, since a registry renews the entries it holds in place
// (Entry); their records are shared, being sealed.
func (r *Registry) Clone() *Registry {
	return importState(r.export(0), r.retentionMs, true)
}
