package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/heureka-registry/heureka/internal/runtime/collect"
)

// fileBacked is a process's resident file-backed memory by mapping, in
// MiB: the binary's own text and data, bolt's mmapped Raft log, and every
// other file.
type fileBacked struct{ binary, bolt, other float64 }

// fileBackedMiB reads /proc/pid/smaps and sums the Rss of each file
// mapping by kind (bolt's log is the mapping of a file named logFile), so a
// footprint report can tell the log's pages from the binary's.
func fileBackedMiB(pid int, logFile string) (fileBacked, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return fileBacked{}, fmt.Errorf("read exe link: %w", err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return fileBacked{}, fmt.Errorf("open smaps: %w", err)
	}
	defer f.Close()
	var fb fileBacked
	var into *float64 // the sum the current mapping's Rss goes to, nil for anonymous memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok {
			var kb float64
			if into != nil {
				if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb); err == nil {
					*into += kb / 1024
				}
			}
			continue
		}
		// A mapping's header: address range, perms, offset, device,
		// inode, then the path (none for anonymous memory).
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			into = nil
			if len(fields) < 6 || !strings.HasPrefix(fields[5], "/") {
				continue
			}
			switch path := strings.Join(fields[5:], " "); {
			case path == exe:
				into = &fb.binary
			case strings.HasSuffix(path, "/"+logFile):
				into = &fb.bolt
			default:
				into = &fb.other
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fileBacked{}, fmt.Errorf("read smaps: %w", err)
	}
	return fb, nil
}

// logFootprint is one node's file-backed memory by mapping next to the Raft
// log it holds: the bolt file's size and the entries in it.
func logFootprint(nd *Node) string {
	fb, err := fileBackedMiB(nd.PID(), "raft.db")
	if err != nil {
		return fmt.Sprintf("%s: %v", nd.ID, err)
	}
	st, err := nd.TryStatus()
	if err != nil {
		return fmt.Sprintf("%s: %v", nd.ID, err)
	}
	entries := uint64(0)
	if st.LastLogIndex >= st.FirstLogIndex && st.FirstLogIndex > 0 {
		entries = st.LastLogIndex - st.FirstLogIndex + 1
	}
	return fmt.Sprintf("%s: RSS %.0f MiB, file-backed %.1f MiB (binary %.1f, bolt log %.1f, other %.1f); log file %.1f MiB holding %d entries (%d..%d), %d since the last snapshot; Go runtime: %s",
		nd.ID, rssMB(nd.PID()), fb.binary+fb.bolt+fb.other, fb.binary, fb.bolt, fb.other,
		float64(st.LogBytes)/(1<<20), entries, st.FirstLogIndex, st.LastLogIndex, st.LastLogIndex-st.LastSnapshotIndex, runtimeMemory(nd))
}

// runtimeMemory says where the Go runtime's memory is, in MiB, from the
// node's /metrics: heap objects, the rest of the spans in use (free slots
// and fragmentation), free pages not yet returned to the system, stacks,
// the runtime's metadata, and the memory limit in force.
func runtimeMemory(nd *Node) string {
	fams, err := scrape(nd)
	if err != nil {
		return err.Error()
	}
	mib := func(names ...string) float64 {
		sum := 0.0
		for _, name := range names {
			v, _ := collect.Find(fams, name, nil)
			sum += v
		}
		return sum / (1 << 20)
	}
	gcs, _ := collect.Find(fams, "go_gc_duration_seconds", nil)
	return fmt.Sprintf("objects %.1f, span slack %.1f, free unreturned %.1f, stacks %.1f, metadata %.1f, limit %.0f, GCs %.0f",
		mib("go_memstats_heap_alloc_bytes"), mib("go_memstats_heap_inuse_bytes")-mib("go_memstats_heap_alloc_bytes"),
		mib("go_memstats_heap_idle_bytes")-mib("go_memstats_heap_released_bytes"), mib("go_memstats_stack_inuse_bytes"),
		mib("go_memstats_gc_sys_bytes", "go_memstats_mspan_inuse_bytes", "go_memstats_mcache_inuse_bytes", "go_memstats_other_sys_bytes"),
		mib("go_gc_gomemlimit_bytes"), gcs)
}
