package fsm

import (
	"strings"
	"sync"
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

// clone returns a copy that shares nothing mutable with in.
func (in *Instance) clone() *Instance {
	// Strings and metadata blocks are immutable: the copy may share them.
	c := *in
	c.pack()
	// The strings many instances repeat (application, VIPs, statuses,
	// data center) are held once per registry, as eureka-server's string
	// cache does, rather than once per instance as the log decoder makes
	// them. (Metadata keys and values stay in the instance's block: one
	// allocation costs less than a shared string header per entry.)
	intern(&c.App, &c.Status, &c.OverriddenStatus, &c.VIPAddress, &c.SecureVIPAddress,
		&c.AppGroupName, &c.ASGName, &c.Sid, &c.DataCenterInfo.Class, &c.DataCenterInfo.Name)
	return &c
}

// ownStrings are the instance's strings that other instances do not
// repeat (its names, URLs and metadata), in the order pack lays them out:
// the longer URLs first, as the home page URL, the host and the IP address
// are often parts of them.
func (in *Instance) ownStrings() [9]*string {
	return [...]*string{&in.StatusPageURL, &in.HealthCheckURL, &in.SecureHealthCheckURL, &in.HomePageURL,
		&in.InstanceID, &in.HostName, &in.IPAddr, &in.Metadata.b, &in.DataCenterInfo.Metadata.b}
}

// searched is how many of ownStrings pack looks for in what it laid out
// before them; metadata blocks are laid out as they are.
const searched = 7

// pack makes the instance's own strings substrings of one string, a
// string that is part of one laid out before it (a home page URL of its
// status page URL, a host of its URLs) taking no room of its own. The log
// decoder allocates every string of a registration apart; a record held
// for the lease's lifetime then costs one heap object (and one size-class
// rounding) for all of them instead of nine, and the collector has fewer
// objects to mark. A record that is already packed (the copy made for a
// status change or a cancel) keeps sharing its string.
func (in *Instance) pack() {
	fs := in.ownStrings()
	if packed(fs) {
		return
	}
	// The searched strings are laid out in a scratch buffer first, so
	// that the packed string is allocated at its final length.
	var at [len(fs)]int // each string's offset in the packed string
	var scratch [512]byte
	head := scratch[:0]
	for i, f := range fs[:searched] {
		if j := strings.Index(unsafe.String(unsafe.SliceData(head), len(head)), *f); j >= 0 {
			at[i] = j
			continue
		}
		at[i] = len(head)
		head = append(head, *f...)
	}
	n := len(head)
	for _, f := range fs[searched:] {
		n += len(*f)
	}
	buf := append(make([]byte, 0, n), head...)
	for i, f := range fs[searched:] {
		at[searched+i] = len(buf)
		buf = append(buf, *f...)
	}
	all := unsafe.String(unsafe.SliceData(buf), len(buf)) // buf is not written after this
	for i, f := range fs {
		if l := len(*f); l > 0 {
			*f = all[at[i] : at[i]+l]
		}
	}
}

// packed reports whether the strings lie in memory as pack leaves them:
// each one either right after the ones before it or inside them (empty
// ones aside).
func packed(fs [9]*string) bool {
	var base, end uintptr
	for _, f := range fs {
		if *f == "" {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(*f)))
		switch {
		case end == 0:
			base, end = p, p+uintptr(len(*f))
		case p == end:
			end += uintptr(len(*f))
		case p < base || p+uintptr(len(*f)) > end:
			return false
		}
	}
	return true
}

// interned holds the registry-wide copy of each string intern has seen.
// (unique.Make alone does not keep one: its table forgets a string once no
// Handle refers to it, that is at the next collection, and every record
// registered after it got copies of its own.)
var interned = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// internedMax bounds the table: past it the table starts again, so that
// the names of applications long gone do not pile up. Records keep the
// copies they hold. The bound is well above what a large registry holds
// at once: a million instances in 50,000 applications repeat over 100,000
// strings (each application's name and VIP), and a table of 65,536
// started again every few thousand registrations, so most records got
// copies of their own, two more heap objects per instance (a third of
// the registry's objects, each one more for the collector to mark). Full
// of names of applications long gone, the table holds about 70 MB.
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
// them, so a reader holding an *Entry sees a consistent record.
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

	RegistrationTs int64  `codec:"rt"`
	LastRenewalTs  int64  `codec:"lr"`
	EvictionTs     int64  `codec:"ev"`
	ServiceUpTs    int64  `codec:"su"`
	LastUpdatedTs  int64  `codec:"lu"`
	ActionType     string `codec:"act"`
	// ModifyIndex is the Raft index of the last change to the record (renewals excluded).
	ModifyIndex uint64 `codec:"mi"`
}

// DurationMs is the lease duration in milliseconds.
func (e *Entry) DurationMs() int64 {
	return int64(leaseDuration(e.Instance.DurationSecs)) * 1000
}

// ExpiresAt is the time (epoch ms) after which the lease is expired: last
// renewal plus one lease duration. (Eureka adds the duration twice; heureka
// does not. See docs/leases.md.)
func (e *Entry) ExpiresAt() int64 { return e.LastRenewalTs + e.DurationMs() }

func leaseDuration(secs int32) int32 {
	if secs <= 0 {
		return DefaultDurationSecs
	}
	return secs
}
