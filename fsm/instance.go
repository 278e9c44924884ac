package fsm

import (
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Instance statuses, as Eureka names them.
const (
	StatusUp           = "UP"
	StatusDown         = "DOWN"
	StatusStarting     = "STARTING"
	StatusOutOfService = "OUT_OF_SERVICE"
	StatusUnknown      = "UNKNOWN"
)

// Delta action types.
const (
	ActionAdded    = "ADDED"
	ActionModified = "MODIFIED"
	ActionDeleted  = "DELETED"
)

// Lease defaults applied when a registrant sends none (or a value ≤ 0).
const (
	DefaultRenewalIntervalSecs = 30
	DefaultDurationSecs        = 90
)

// ValidStatus reports whether s is one of Eureka's five status names (case-sensitive).
func ValidStatus(s string) bool {
	switch s {
	case StatusUp, StatusDown, StatusStarting, StatusOutOfService, StatusUnknown:
		return true
	}
	return false
}

// DataCenterInfo is the instance's data center description. Metadata is only
// meaningful for the Amazon data center; nil means the registrant sent none.
type DataCenterInfo struct {
	Class    string   `codec:"c"`
	Name     string   `codec:"n"`
	Metadata Metadata `codec:"m"`
}

// Instance is one registration as the client sent it, normalised only where
// Eureka itself normalises (upper-cased app names, defaulted ports and
// statuses). It holds no server-side lease state. The registry never mutates
// an Instance in place: a change makes a new copy, so readers may keep one.
type Instance struct {
	InstanceID                    string         `codec:"id"`
	HostName                      string         `codec:"h"`
	App                           string         `codec:"a"`
	IPAddr                        string         `codec:"ip"`
	Sid                           string         `codec:"sid"`
	Status                        string         `codec:"s"`
	OverriddenStatus              string         `codec:"os"`
	Port                          int32          `codec:"p"`
	PortEnabled                   bool           `codec:"pe"`
	SecurePort                    int32          `codec:"sp"`
	SecurePortEnabled             bool           `codec:"spe"`
	CountryID                     int32          `codec:"cid"`
	DataCenterInfo                DataCenterInfo `codec:"dc"`
	RenewalIntervalSecs           int32          `codec:"ri"`
	DurationSecs                  int32          `codec:"du"`
	Metadata                      Metadata       `codec:"md"`
	AppGroupName                  string         `codec:"ag"`
	HomePageURL                   string         `codec:"hp"`
	StatusPageURL                 string         `codec:"spu"`
	HealthCheckURL                string         `codec:"hc"`
	SecureHealthCheckURL          string         `codec:"shc"`
	VIPAddress                    string         `codec:"vip"`
	SecureVIPAddress              string         `codec:"svip"`
	IsCoordinatingDiscoveryServer bool           `codec:"cds"`
	LastDirtyTimestamp            int64          `codec:"ldt"`
	ASGName                       string         `codec:"asg"`
}

// ID returns the registry key of the instance: its instanceId if set, else the
// Amazon instance-id, else its host name (Eureka's rule, which clients follow
// when they build their URLs).
func (in *Instance) ID() string {
	if in.InstanceID != "" {
		return in.InstanceID
	}
	if in.DataCenterInfo.Name == "Amazon" {
		if id, _ := in.DataCenterInfo.Metadata.Get("instance-id"); id != "" {
			return id
		}
	}
	return in.HostName
}

// clone returns a copy that shares nothing mutable with in: a plain
// heap copy, which the caller may change before the registry holds it
// (Registry.put seals what it holds).
func (in *Instance) clone() *Instance {
	// Strings and metadata blocks are immutable: the copy may share them.
	c := *in
	return &c
}

// A record the registry holds is sealed: the instance and every string
// it holds are one allocation, made of memory the garbage collector does
// not scan (a []uint64), with the Instance at its start and its strings'
// bytes after it. Strings whose value is one of Eureka's fixed names (the
// statuses, the data center names and classes, "na") point at the
// program's own constants instead. The collector then marks each record
// as one object and follows none of its nineteen string pointers: at a
// million instances those pointers were most of the collector's work,
// and the collector most of what a renewal or a read cost
// (BENCHMARKS.md, "A million instances on one machine").
//
// The rule that makes this safe: a sealed record's strings point only
// into its own allocation or at constants, nothing the collector could
// free while the record lives (checked by sealedOnly, and by the tests
// after every command). So a sealed record is never changed: a change is
// made on a clone, which is an ordinary heap object, and sealed anew.
// Every string-typed field of Instance is listed in sealedStrings; a
// field of any other pointer kind would be a pointer the collector cannot
// see, and the tests refuse one (TestSeal_InstanceHoldsOnlyStrings).

// sealedStrings are the addresses of in's string fields in the order seal
// lays them out: the longer URLs first, as the home page URL, the host and
// the IP address are often parts of them, and the names after them; the
// metadata blocks last, laid out as they are.
func (in *Instance) sealedStrings() [19]*string {
	return [...]*string{&in.StatusPageURL, &in.HealthCheckURL, &in.SecureHealthCheckURL, &in.HomePageURL,
		&in.InstanceID, &in.HostName, &in.IPAddr, &in.App, &in.VIPAddress, &in.SecureVIPAddress,
		&in.AppGroupName, &in.ASGName, &in.Sid, &in.Status, &in.OverriddenStatus,
		&in.DataCenterInfo.Class, &in.DataCenterInfo.Name,
		&in.Metadata.b, &in.DataCenterInfo.Metadata.b}
}

// searched is how many of sealedStrings seal looks for in what it laid
// out before them; metadata blocks are laid out as they are.
const searched = 17

// instanceSize is the room the Instance takes at the start of its sealed
// allocation (a multiple of 8, so the strings after it need no padding).
const instanceSize = unsafe.Sizeof(Instance{})

// fixedName returns the program's constant equal to s for the names most
// records and entries repeat, so that a sealed record points at it instead of holding
// a copy, and ok false for any other value.
func fixedName(s string) (c string, ok bool) {
	switch s {
	case "":
		return "", true
	case StatusUp:
		return StatusUp, true
	case StatusDown:
		return StatusDown, true
	case StatusStarting:
		return StatusStarting, true
	case StatusOutOfService:
		return StatusOutOfService, true
	case StatusUnknown:
		return StatusUnknown, true
	case "na":
		return "na", true
	case "MyOwn":
		return "MyOwn", true
	case "Amazon":
		return "Amazon", true
	case "Netflix":
		return "Netflix", true
	case "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo":
		return "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", true
	case "com.netflix.appinfo.MyDataCenterInfo":
		return "com.netflix.appinfo.MyDataCenterInfo", true
	case "com.netflix.appinfo.AmazonInfo":
		return "com.netflix.appinfo.AmazonInfo", true
	case ActionAdded:
		return ActionAdded, true
	case ActionModified:
		return ActionModified, true
	case ActionDeleted:
		return ActionDeleted, true
	}
	return "", false
}

// seal returns a sealed copy of in (see above), as the registry holds it,
// its metadata compressed when compress is set (mdcompress.go).
func seal(in *Instance, compress bool) *Instance {
	_, sealed := sealWith(in, compress, nil)
	return sealed
}

// sealEntry returns a sealed copy of e with its record: the entry, the
// record and every string of both in one allocation the collector does not
// scan, the Entry at its start and the record after it. A registration's
// entry was an object of its own, with pointers to its key's strings and
// to its record: at a million instances, marking those objects and
// following their pointers was most of a collection's work, and during
// the million's renewals the collector took a fifth of every node's CPU
// (docs/benchmarks/2026-12-05-entries-sealed-with-their-records.md).
//
// The sealed rule holds for the entry as for the record: its strings
// point into the allocation or at constants (sealedEntryOnly), so that a
// sealed entry, like a sealed record, is never changed but for the fields
// that hold no pointers (LastRenewalTs, pos, keyCheck). A change is made
// on a copy, an ordinary heap object that may share the record.
func sealEntry(e *Entry, compress bool) *Entry {
	held, _ := sealWith(e.Instance, compress, e)
	return held
}

// entryStrings is how many string fields an Entry has (sealedStrings).
const entryStrings = 4

// sealedStrings are the addresses of e's string fields, which sealEntry
// lays out after its record's. An entry's only other pointer is its
// record (TestSeal_EntryHoldsOnlyStringsAndItsRecord).
func (e *Entry) sealedStrings() [entryStrings]*string {
	return [...]*string{&e.App, &e.ID, &e.Override, &e.ActionType}
}

// entrySize is the room a sealed entry takes in front of its record (a
// multiple of 8, so the record after it needs no padding).
const entrySize = unsafe.Sizeof(Entry{})

// sealWith lays out in, and e in front of it when e is not nil (its
// Instance is replaced by the sealed record).
func sealWith(in *Instance, compress bool, e *Entry) (*Entry, *Instance) {
	c := *in // the values to lay out; the copy keeps them alive meanwhile
	if compress {
		c.Metadata = compressMetadata(c.Metadata)
	}
	own := c.sealedStrings()
	// The record's strings, its metadata blocks, then the entry's strings,
	// which are looked for in the record's first (an id is the record's
	// instance id or host name, the application its app): the record's
	// strings keep to the first part of the bytes after it (sealedOnly).
	// (Filled by assignment, not copy: the compiler takes what copy
	// copies to escape, and c and ec would each be an allocation more.)
	var fs [len(own) + entryStrings]*string
	n := 0
	for _, f := range own {
		fs[n], n = f, n+1
	}
	var ec Entry
	front := uintptr(0)
	if e != nil {
		ec, front = *e, entrySize
		for _, f := range ec.sealedStrings() {
			fs[n], n = f, n+1
		}
	}
	// Each string's offset in the bytes after the record, or -1 for a
	// constant. The searched strings are laid out in a scratch buffer
	// first, so that the allocation is made at its final size.
	var at [len(fs)]int
	var scratch [1024]byte
	head := scratch[:0]
	search := func(i int) bool {
		f := fs[i]
		if k, ok := fixedName(*f); ok {
			*f, at[i] = k, -1
			return true
		}
		if j := strings.Index(stringOf(head), *f); j >= 0 {
			at[i] = j
			return true
		}
		return false
	}
	for i := range searched {
		if !search(i) {
			at[i] = len(head)
			head = append(head, *fs[i]...)
		}
	}
	size := len(head)
	for i := searched; i < n; i++ {
		if i < len(own) || !search(i) {
			at[i] = size
			size += len(*fs[i])
		}
	}
	words := make([]uint64, (int(front+instanceSize)+size+7)/8)
	base := unsafe.Pointer(unsafe.SliceData(words))
	var tail []byte // nil when there is nothing to lay out: no pointer past the allocation
	if size > 0 {
		tail = unsafe.Slice((*byte)(unsafe.Add(base, front+instanceSize)), size)
	}
	copy(tail, head)
	for i := searched; i < n; i++ {
		if at[i] >= len(head) {
			copy(tail[at[i]:], *fs[i])
		}
	}
	pointInto(tail, fs[:n], at[:n])
	sealed := (*Instance)(unsafe.Add(base, front))
	*sealed = c
	if e == nil {
		return nil, sealed
	}
	ec.Instance = sealed
	held := (*Entry)(base)
	*held = ec
	return held, sealed
}

// pointInto points each of fs at its bytes in tail, at[i] on (-1: it is a
// constant already).
func pointInto(tail []byte, fs []*string, at []int) {
	for i, f := range fs {
		switch {
		case len(*f) == 0:
			// A view of nothing still points into what it was cut from
			// (a decoded command or snapshot record): hidden from the
			// collector here, and followed again in any heap copy made
			// of the record, after that memory was freed.
			*f = ""
		case at[i] >= 0:
			*f = unsafe.String(&tail[at[i]], len(*f))
		}
	}
}

// sealedOnly reports whether every string of in is empty and points
// nowhere, is a constant, or lies in the bytes after it that seal lays
// out (at most the sum of the strings' lengths): the rule every record
// the registry holds must keep, which the tests check after every
// command.
func sealedOnly(in *Instance) bool {
	fs := in.sealedStrings()
	n := uintptr(0)
	for _, f := range fs {
		n += uintptr(len(*f))
	}
	lo := uintptr(unsafe.Pointer(in)) + instanceSize
	return stringsWithin(fs[:], lo, lo+n)
}

// sealedEntryOnly reports whether e is a sealed entry (sealEntry) that
// keeps the rule: its record sealed right after it, and its own strings
// empty, constants, or in the bytes after its record. A copy of a held
// entry, an ordinary heap object, is not a sealed entry.
func sealedEntryOnly(e *Entry) bool {
	if !laidOutBefore(e) || !sealedOnly(e.Instance) {
		return false
	}
	own, es := e.Instance.sealedStrings(), e.sealedStrings()
	n := uintptr(0)
	for _, f := range append(own[:], es[:]...) {
		n += uintptr(len(*f))
	}
	lo := uintptr(unsafe.Pointer(e.Instance)) + instanceSize
	return stringsWithin(es[:], lo, lo+n)
}

// laidOutBefore reports whether e lies right in front of its record, as
// sealEntry lays out a sealed entry.
func laidOutBefore(e *Entry) bool {
	return uintptr(unsafe.Pointer(e.Instance)) == uintptr(unsafe.Pointer(e))+entrySize
}

// stringsWithin reports whether each of fs is empty and points nowhere, is
// a constant, or lies within [lo, hi).
func stringsWithin(fs []*string, lo, hi uintptr) bool {
	for _, f := range fs {
		if *f == "" {
			if unsafe.StringData(*f) != nil {
				return false
			}
			continue
		}
		if k, ok := fixedName(*f); ok && unsafe.StringData(k) == unsafe.StringData(*f) {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(*f)))
		if p < lo || p+uintptr(len(*f)) > hi {
			return false
		}
	}
	return true
}

// interned holds the registry-wide copy of each string intern has seen:
// the application names the entries and the application table are keyed
// by, overrides and actions. (unique.Make alone does not keep one: its
// table forgets a string once no Handle refers to it, that is at the next
// collection, and every record registered after it got copies of its
// own.)
var interned = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// internedMax bounds the table: past it the table starts again, so that
// the names of applications long gone do not pile up. Entries keep the
// copies they hold. The bound is well above what a large registry holds
// at once: a table of 65,536 started again every few thousand
// registrations once a registry of a million instances repeated more
// strings than that, and each entry then got copies of its own, more heap
// objects for the collector to mark. Full of names of applications long
// gone, the table holds about 70 MB.
const internedMax = 1 << 20

// intern replaces each string with its registry-wide copy. Equal strings
// are equal whichever copy is kept, so Apply stays deterministic.
func intern(fs ...*string) {
	interned.Lock()
	defer interned.Unlock()
	for _, f := range fs {
		if *f == "" {
			continue
		}
		c, ok := interned.m[*f]
		if !ok {
			if len(interned.m) >= internedMax {
				clear(interned.m)
			}
			c = strings.Clone(*f)
			interned.m[c] = c
		}
		*f = c
	}
}

// VIPs splits a comma-separated VIP address list into its non-empty elements.
func VIPs(list string) []string {
	if list == "" {
		return nil
	}
	parts := strings.Split(list, ",")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// HasVIP reports whether the comma-separated VIP address list holds vip,
// as VIPs would split it, without allocating: a VIP document's build asks
// it of every instance in the registry.
func HasVIP(list, vip string) bool {
	if vip == "" {
		return false
	}
	for p := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(p) == vip {
			return true
		}
	}
	return false
}

// Entry is an instance together with its server-side lease state. Like
// Instance it is copy-on-write: the registry replaces entries, never edits
// them, so a reader holding an *Entry sees a consistent record, with one
// exception besides where its application keeps it (pos). A heartbeat
// only moves LastRenewalTs forward, and the registry holding the entry
// writes it in place (atomically, under the FSM's write lock): a million
// instances renewing every 30 s are most of what every node applies, and
// a copy of the entry for each heartbeat was most of what applying one
// cost (BENCHMARKS.md, "A million instances on one machine"). Read it
// with RenewedAt wherever the FSM's lock is not held. An entry is renewed
// in place only by the one registry holding it: Clone copies the entries
// it takes.
type Entry struct {
	// Key is the registry key (upper-cased app name, instance id).
	App string `codec:"app"`
	ID  string `codec:"id"`
	// Instance is the record; its Status is the effective status and its
	// OverriddenStatus the override in force (UNKNOWN when none).
	Instance *Instance `codec:"in"`
	// Override is the replicated status override ("" when none). It outlives
	// re-registrations and is dropped on cancel and eviction.
	Override string `codec:"ov"`

	RegistrationTs int64 `codec:"rt"`
	// LastRenewalTs is the time of the last heartbeat (see Entry about
	// reading it).
	LastRenewalTs int64  `codec:"lr"`
	EvictionTs    int64  `codec:"ev"`
	ServiceUpTs   int64  `codec:"su"`
	LastUpdatedTs int64  `codec:"lu"`
	ActionType    string `codec:"act"`
	// ModifyIndex is the Raft index of the last change to the record (renewals excluded).
	ModifyIndex uint64 `codec:"mi"`

	// pos is the entry's position in its application's entries
	// (Application). Unlike the rest of a held entry it may change in
	// place, when another entry of the application is removed, and only
	// under the registry's write lock; nothing reads it without that lock.
	pos int32
	// keyCheck is 32 bits of hash of the key, which the registry's key
	// index sets when it takes the entry (keyindex.go) and a heartbeat's
	// lookup compares instead of the key's bytes (keyIndex.probe): in
	// the cache line of LastRenewalTs, which the heartbeat writes anyway.
	keyCheck uint32
}

// DurationMs is the lease duration in milliseconds.
func (e *Entry) DurationMs() int64 {
	return int64(leaseDuration(e.Instance.DurationSecs)) * 1000
}

// ExpiresAt is the time (epoch ms) after which the lease is expired: last
// renewal plus one lease duration. (Eureka adds the duration twice; heureka
// does not. See docs/leases.md.)
func (e *Entry) ExpiresAt() int64 { return e.RenewedAt() + e.DurationMs() }

// SameRecord reports whether e and o hold the same registration unchanged:
// o is e, or a copy of it (Clone) that nothing but heartbeats has changed
// since. Entries are compared so, not by pointer, because Clone copies them.
func (e *Entry) SameRecord(o *Entry) bool {
	return e == o || (e.Instance == o.Instance && e.RegistrationTs == o.RegistrationTs && e.Override == o.Override)
}

// RenewedAt is LastRenewalTs, read so that it may race with the registry
// renewing the entry in place.
func (e *Entry) RenewedAt() int64 { return atomic.LoadInt64(&e.LastRenewalTs) }

func leaseDuration(secs int32) int32 {
	if secs <= 0 {
		return DefaultDurationSecs
	}
	return secs
}
