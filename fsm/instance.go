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
// repeat (its names, URLs and metadata), in the order pack lays them out.
func (in *Instance) ownStrings() [9]*string {
	return [...]*string{&in.InstanceID, &in.HostName, &in.IPAddr, &in.HomePageURL, &in.StatusPageURL,
		&in.HealthCheckURL, &in.SecureHealthCheckURL, &in.Metadata.b, &in.DataCenterInfo.Metadata.b}
}

// pack makes the instance's own strings substrings of one string. The log
// decoder allocates every string of a registration apart; a record held
// for the lease's lifetime then costs one heap object (and one size-class
// rounding) for all of them instead of nine, and the collector has fewer
// objects to mark. A record that is already packed (the copy made for a
// status change or a cancel) keeps sharing its string.
func (in *Instance) pack() {
	fs := in.ownStrings()
	n, packed := packedLen(fs)
	if packed {
		return
	}
	buf := make([]byte, 0, n)
	for _, f := range fs {
		buf = append(buf, *f...)
	}
	all := unsafe.String(unsafe.SliceData(buf), n) // buf is not used after this
	off := 0
	for _, f := range fs {
		if l := len(*f); l > 0 {
			*f, off = all[off:off+l], off+l
		}
	}
}

// packedLen returns the total length of the strings and whether they lie
// one after the other in memory, as pack leaves them (empty ones aside).
func packedLen(fs [9]*string) (n int, packed bool) {
	packed = true
	var base uintptr
	for _, f := range fs {
		if *f == "" {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(*f)))
		if n == 0 {
			base = p
		} else if p != base+uintptr(n) {
			packed = false
		}
		n += len(*f)
	}
	return n, packed
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
// copies they hold.
const internedMax = 1 << 16

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
