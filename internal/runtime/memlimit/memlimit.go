// Package memlimit is heureka's memory policy (docs/operations.md,
// "Memory"): it sets the Go runtime's soft memory limit so that a node
// started with default flags holds its memory near what its registry
// needs, instead of letting the heap grow to twice the live data as Go's
// default garbage collector target does. The limit is either fixed
// (--memory-limit 512MiB) or automatic: the live heap after the last
// collection plus a half, followed as the registry grows and shrinks,
// and never above 90 % of the container's cgroup memory limit when one is
// set.
//
// It imports internal/runtime/tick only.
package memlimit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

// Auto and Off are the --memory-limit values besides a size.
const (
	Auto = "auto"
	Off  = "off"
)

// Policy is a parsed --memory-limit.
type Policy struct {
	// Fixed is a fixed limit in bytes; 0 means automatic or off.
	Fixed int64
	// Auto follows the live heap.
	Auto bool
}

// Parse reads a --memory-limit value: "auto", "off", or a size in bytes
// with an optional unit (B, KB, MB, GB, KiB, MiB, GiB), e.g. 512MiB.
func Parse(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case Auto, "":
		return Policy{Auto: true}, nil
	case Off, "0":
		return Policy{}, nil
	}
	n, err := ParseSize(s)
	if err != nil {
		return Policy{}, fmt.Errorf("--memory-limit %q: want auto, off or a size such as 512MiB: %w", s, err)
	}
	if n < minLimit {
		return Policy{}, fmt.Errorf("--memory-limit %q: below the %d MiB a node needs to start", s, minLimit>>20)
	}
	return Policy{Fixed: n}, nil
}

var units = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"b", 1},
}

// ParseSize reads a byte count with an optional unit.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range units {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 {
		return 0, errors.New("not a size")
	}
	if n*float64(mult) > float64(1<<62) {
		return 0, errors.New("size too large")
	}
	return int64(n * float64(mult)), nil
}

const (
	// minLimit is the lowest fixed limit accepted: below it the runtime
	// would collect all the time for nothing (a node holds a few MiB
	// before any registration).
	minLimit = 32 << 20
	// roomShare is the room above the live heap and the runtime's own
	// memory, as a share of the live heap: the limit is live + live/2 +
	// runtime (live + minRoom + runtime for a small heap). Requests,
	// builds and Raft batches allocate into it between collections.
	//
	// The room is a share of the heap, not a fixed size, because a
	// collection marks the whole live heap: with a fixed room the
	// collector's work per write or read grows with the registry. The
	// share trades collections for memory. At 200,000 instances an eighth
	// made the collector the larger part of a registration's CPU, and a
	// restarted node, whose heap grows by the whole registry while it
	// restores its snapshot, was collected back to back and served after
	// 20 s instead of 5 ("Scale: 10,000 to 200,000 instances" in
	// BENCHMARKS.md). At 10,000 instances a third collected 4-5 times as
	// often as a half while renewals came (CPU per renewal 44-54 µs
	// against 36), and a fixed 24 MiB on top of a half held 24 MiB more
	// for nothing ("A half of the live heap as room, and memory returned
	// when quiet" there).
	roomShare = 2
	// minRoom is the least room, whatever the share: a small registry's
	// half is a few tens of MiB, and a burst of writes fills that many
	// times a second. At 10,000 instances a registration burst spent a
	// quarter of each node's CPU collecting with a half; with this floor
	// the cluster's CPU per registration fell by a tenth and its RSS rose
	// by 15-20 MiB a node ("Registrations: the forward batched, a floor
	// under the room" in BENCHMARKS.md). From about 128 MiB of live heap
	// up, the share is the larger and this changes nothing.
	minRoom = 64 << 20
	// cgroupShare is the part of a cgroup memory limit the Go runtime may
	// use: the rest is for bolt's memory-mapped pages and the kernel.
	cgroupShare = 0.9
)

// AutoLimit is the automatic limit for a live heap of live bytes and the
// runtime's memory besides heap objects and free pages (goroutine stacks,
// the collector's metadata, the unused space in the heap's spans; see
// usage) of runtime bytes, under a cgroup limit of cgroup bytes (0:
// none). The Go runtime holds its whole memory to the limit, not only the
// heap: without the runtime's share counted, a small heap would get far
// less room than its share and be collected again and again.
func AutoLimit(live, runtime, cgroup int64) int64 {
	l := live + max(live/roomShare, minRoom) + runtime
	if cgroup > 0 {
		l = min(l, int64(float64(cgroup)*cgroupShare))
	}
	return l
}

// CgroupLimit returns the memory limit of the cgroup this process runs in,
// from the cgroup v2 or v1 file under root ("/" in production), or 0 when
// there is none or it cannot be read.
func CgroupLimit(root string) int64 {
	for _, p := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 reports "no limit" as a huge page-aligned number.
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0
		}
		return n
	}
	return 0
}

// usage is the heap marked live by the last collection and the rest of
// the memory the Go runtime counts against its limit besides heap
// objects: its own (goroutine stacks, the collector's metadata) and the
// unused space in the heap's spans (fragmentation, and slots freed by the
// last collection). Free pages are left out: new objects fill them without
// growing the process.
//
// The runtime turns a limit into a heap goal by taking off everything it
// maps that is neither heap objects nor free pages (runtime/mgcpacer.go,
// memoryLimitHeapGoal), span space included. Left out here, that space
// (26–28 MiB at 10,000 instances) came out of the room the limit means to
// leave: the room was about 20 MB instead of 45, and a node serving one
// application's document was collected twice as often as intended
// (BENCHMARKS.md, "The merged tree (compressed fragments, snapshots
// charged to writes)").
func usage() (live, runtime int64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	var v [5]int64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = int64(s[i].Value.Uint64())
		}
	}
	return v[0], max(v[1]-v[2]-v[3]-v[4], 0)
}

// autoLimit is the automatic limit now.
func autoLimit(cgroup int64) int64 {
	live, runtime := usage()
	return AutoLimit(live, runtime, cgroup)
}

// Apply puts policy p in force until ctx ends. A fixed limit is set once;
// an automatic one is set now and then followed every interval. When the
// GOMEMLIMIT environment variable is set and the policy is automatic, the
// operator's setting wins and nothing is changed. Unless the policy is
// off, a node that goes quiet after a busy spell collects once and gives
// its free memory back (idleReturn). The log says what is in force.
func Apply(ctx context.Context, p Policy, interval time.Duration, log hclog.Logger) {
	cgroup := CgroupLimit("/")
	follow := false
	undo := func() {} // what to put back once ctx ends and nothing follows
	switch {
	case p.Fixed > 0:
		debug.SetMemoryLimit(p.Fixed)
		log.Info("memory limit", "limit_mib", p.Fixed>>20)
	case !p.Auto:
		log.Info("memory limit off: Go runtime defaults")
		return
	case os.Getenv("GOMEMLIMIT") != "":
		log.Info("memory limit from GOMEMLIMIT", "limit_mib", debug.SetMemoryLimit(-1)>>20)
	default:
		debug.SetMemoryLimit(autoLimit(cgroup))
		// The limit alone paces the collector. With Go's GOGC=100 beside
		// it, a heap under minRoom was collected at twice its live size,
		// before the limit's room was used: at 10,000 instances
		// (30-60 MB live) a registration burst collected twice as often
		// as the floor means to. A GOGC set in the environment is the
		// operator's and stays.
		gcPercent := "GOGC"
		if os.Getenv("GOGC") == "" {
			prev := debug.SetGCPercent(-1)
			undo = func() { debug.SetGCPercent(prev) }
			gcPercent = "off (the limit paces the collector)"
		}
		log.Info("memory limit automatic: live heap + 1/2 (at least 64 MiB) + the runtime's own",
			"cgroup_limit_mib", cgroup>>20, "gc_percent", gcPercent)
		follow = true
	}
	go func() {
		watch(ctx, cgroup, interval, follow, log)
		undo()
	}()
}

// watch returns memory when the node goes quiet and, when follow is set,
// re-sets the automatic limit after every collection, as soon as the live
// heap it measured is known, and every interval besides (the runtime's
// own share moves between collections). Following only by the interval,
// the limit in force after a collection would be the one set for the heap
// of up to a tenth of a second before, and a node restoring a large
// snapshot grows its live heap by hundreds of MB a second.
func watch(ctx context.Context, cgroup int64, interval time.Duration, follow bool, log hclog.Logger) {
	set := func() { debug.SetMemoryLimit(autoLimit(cgroup)) }
	if follow {
		afterEachGC(ctx.Done(), set)
	}
	idle := newIdleReturn()
	tick.Every(ctx.Done(), interval, func() {
		if follow {
			set()
		}
		if idle.tick() {
			log.Debug("quiet after a busy spell: collected and returned free memory to the system")
		}
	})
}

// afterEachGC calls fn after every garbage collection until stop is
// closed: a cleanup attached to an object nothing refers to runs once a
// collection has found it unreachable, and attaches the next one.
func afterEachGC(stop <-chan struct{}, fn func()) {
	runtime.AddCleanup(new(gcMark), func(struct{}) {
		select {
		case <-stop:
			return
		default:
		}
		fn()
		afterEachGC(stop, fn)
	}, struct{}{})
}

// gcMark is the object afterEachGC's cleanups hang on; 32 bytes, so that
// the runtime's tiny allocator, whose blocks live as long as any object
// in them, does not share it.
type gcMark [32]byte
