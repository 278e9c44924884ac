package bench

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/heureka-registry/heureka/internal/testkit/instance"
)

// Workload is the fixed, documented population `heureka bench` registers
// (docs/bench.md): Instances instances spread round-robin over Apps
// applications, each with about MetadataBytes bytes of metadata.
type Workload struct {
	Instances     int
	Apps          int
	MetadataBytes int
	// LeaseSecs is leaseInfo.durationInSecs of the W1 population (and the
	// TTL of its etcd leases); long, so that no W1 instance expires while
	// the run lasts.
	LeaseSecs int
	// RenewalSecs is leaseInfo.renewalIntervalInSecs of the W1 population.
	RenewalSecs int
}

// DefaultWorkload is W1's population: 10,000 instances in 500 apps with
// about 1 KB of metadata each.
func DefaultWorkload() Workload {
	return Workload{Instances: 10000, Apps: 500, MetadataBytes: 1024, LeaseSecs: 3600, RenewalSecs: 30}
}

// Validate reports a workload that cannot be generated.
func (w Workload) Validate() error {
	switch {
	case w.Instances < 1 || w.Instances >= 1<<22:
		return fmt.Errorf("instances must be between 1 and %d, got %d", 1<<22-1, w.Instances)
	case w.Apps < 1 || w.Apps > w.Instances:
		return fmt.Errorf("apps must be between 1 and the number of instances (%d), got %d", w.Instances, w.Apps)
	case w.MetadataBytes < 0 || w.MetadataBytes > 64<<10:
		return fmt.Errorf("metadata bytes must be between 0 and 65536, got %d", w.MetadataBytes)
	case w.LeaseSecs < 1 || w.RenewalSecs < 1:
		return fmt.Errorf("lease and renewal interval must be at least 1 s")
	}
	return nil
}

// Special applications of the phases that add instances of their own.
const (
	// PropApp holds W6's instances.
	PropApp = "BENCH-PROP"
	// CrashApp holds W8's instances.
	CrashApp = "BENCH-CRASH"
)

// AppName is the name of application a (0 ≤ a < Apps): BENCH-000,
// BENCH-001, ... zero-padded to the width of Apps-1 (at least 3 digits).
func (w Workload) AppName(a int) string {
	width := len(strconv.Itoa(max(w.Apps-1, 0)))
	return fmt.Sprintf("BENCH-%0*d", max(width, 3), a)
}

// App is the application instance i belongs to.
func (w Workload) App(i int) string { return w.AppName(i % w.Apps) }

// ID is instance i's instanceId: ip:app:port, as Spring Cloud names them.
func (w Workload) ID(i int) string {
	return fmt.Sprintf("%s:%s:8080", ipOf(i), strings.ToLower(w.App(i)))
}

// ipOf is a distinct 10.x.y.z address for every i below 2^24.
func ipOf(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", (i>>16)&255, (i>>8)&255, i&255)
}

// Spec describes one instance document.
type Spec struct {
	App         string
	ID          string
	IP          string
	Status      string // UP if empty
	LeaseSecs   int
	RenewalSecs int
	Metadata    map[string]string
	// DirtyMillis is lastDirtyTimestamp and lastUpdatedTimestamp.
	DirtyMillis int64
}

// Spec returns instance i of the W1 population.
func (w Workload) Spec(i int) Spec {
	return Spec{App: w.App(i), ID: w.ID(i), IP: ipOf(i), LeaseSecs: w.LeaseSecs, RenewalSecs: w.RenewalSecs,
		Metadata: Metadata(i, w.MetadataBytes)}
}

// Metadata returns instance i's metadata: a few realistic keys (version,
// git commit, zone, management port) and tag.N keys of hex filler, about
// size bytes in all when encoded as a JSON object. Values are derived from i
// only, so every run registers the same bytes; hex compresses about as
// much as real metadata does, unlike a repeated letter.
func Metadata(i, size int) map[string]string {
	md := map[string]string{}
	if size <= 0 {
		return md
	}
	md["version"] = fmt.Sprintf("1.%d.%d", i%17, i%101)
	md["git.commit"] = hexFill(i, 0, 40)
	md["zone"] = "zone-" + string(rune('a'+i%3))
	md["management.port"] = "8081"
	used := 1 // the closing brace; every entry costs "key":"value" plus a comma or the opening brace
	for k, v := range md {
		used += len(k) + len(v) + 6
	}
	for k := 0; ; k++ {
		key := fmt.Sprintf("tag.%d", k)
		left := size - used - len(key) - 6
		if left <= 0 {
			return md
		}
		v := hexFill(i, k+1, min(left, 120))
		md[key] = v
		used += len(key) + len(v) + 6
	}
}

// hexFill returns n hex digits determined by (i, k).
func hexFill(i, k, n int) string {
	var sb strings.Builder
	for c := 0; sb.Len() < n; c++ {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d/%d", i, k, c)
		fmt.Fprintf(&sb, "%016x", h.Sum64())
	}
	return sb.String()[:n]
}

// InstanceJSON returns the instance object as a Eureka client's JSON codec
// writes it (the value of "instance" in a register body; the value of an
// etcd key).
func InstanceJSON(s Spec) []byte {
	status := s.Status
	if status == "" {
		status = "UP"
	}
	var md map[string]any // nil: the empty-map marker
	if len(s.Metadata) > 0 {
		md = make(map[string]any, len(s.Metadata))
		for k, v := range s.Metadata {
			md[k] = v
		}
	}
	doc := instance.Doc(instance.Fields{
		ID: s.ID, App: s.App, Host: strings.ReplaceAll(s.IP, ".", "-") + ".bench.internal", IP: s.IP, Status: status,
		VIP: strings.ToLower(s.App), RenewalSecs: s.RenewalSecs, LeaseSecs: s.LeaseSecs, Metadata: md,
		Timestamp: strconv.FormatInt(s.DirtyMillis, 10),
	})
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err) // only strings, numbers and maps of them go in
	}
	return b
}

// RegisterBody wraps InstanceJSON as a Eureka register body
// {"instance": {...}}.
func RegisterBody(s Spec) []byte {
	inst := InstanceJSON(s)
	b := make([]byte, 0, len(inst)+14)
	b = append(b, `{"instance":`...)
	b = append(b, inst...)
	return append(b, '}')
}

// EtcdPrefix is the key prefix under which the etcd mapping stores the
// registry: /registry/<APP>/<instanceId>.
const EtcdPrefix = "/registry/"

// EtcdKey is the etcd key of an instance.
func EtcdKey(app, id string) string { return EtcdPrefix + app + "/" + id }

// EtcdAppPrefix is the etcd key prefix of one application's instances.
func EtcdAppPrefix(app string) string { return EtcdPrefix + app + "/" }

// PrefixEnd returns the smallest key greater than every key starting with
// prefix (etcd's range end for a prefix), or "\x00" when there is none.
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}
