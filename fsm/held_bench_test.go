package fsm_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/heureka-registry/heureka/bench"
	"github.com/heureka-registry/heureka/fsm"
)

// BenchmarkRegistryHeldPerInstance measures what the registry keeps per
// instance: the live heap and heap objects after registering the benchmark
// workload's instances (about 1 KB of metadata in 11 keys each) through
// Apply, as a follower holds them, with a collection every 1,000
// registrations. The figures are B/instance and
// objects/instance; ns/op is the time to build the registry.
func BenchmarkRegistryHeldPerInstance(b *testing.B) {
	for _, n := range []int{10000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			w := bench.DefaultWorkload()
			w.Instances = n
			for range b.N {
				before := liveHeap()
				f := fsm.New(0, nil)
				for i := range n {
					applyRegister(b, f, uint64(i+1), w.Spec(i))
					if i%1000 == 999 {
						// A node collects many times while its instances
						// register; what a record keeps must not depend
						// on how many registrations fell between two
						// collections.
						runtime.GC()
					}
				}
				after := liveHeap()
				runtime.KeepAlive(f)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/instance")
				b.ReportMetric(float64(after.HeapObjects-before.HeapObjects)/float64(n), "objects/instance")
			}
		})
	}
}

// BenchmarkRegistryCollect measures one full garbage collection with the
// registry of n workload instances held (its wall time, and the CPU it
// took as gc-cpu-ms/op): the marking work every collection repeats,
// which is the part of a registration's CPU that grows with the
// registry. It also reports what the heap holds for them: the bytes of
// live objects and of the spans holding them (the difference is the
// slack of their size classes, and any free slots), and the objects, per
// instance. BENCH_COLLECT_INSTANCES runs one more size, 20 instances to
// an application as in the scale runs; at a million it builds for about
// half a minute and holds 2 GB:
//
//	BENCH_COLLECT_INSTANCES=1000000 go test ./fsm -run XXX -bench RegistryCollect -benchtime 5x
func BenchmarkRegistryCollect(b *testing.B) {
	type size struct{ instances, apps int }
	sizes := []size{{10000, 500}, {100000, 500}}
	if n, _ := strconv.Atoi(os.Getenv("BENCH_COLLECT_INSTANCES")); n > 0 {
		sizes = append(sizes, size{n, max(1, n/20)})
	}
	for _, sz := range sizes {
		b.Run(fmt.Sprintf("instances=%d", sz.instances), func(b *testing.B) {
			w := bench.DefaultWorkload()
			w.Instances, w.Apps = sz.instances, sz.apps
			f := fsm.New(0, nil)
			for i := range sz.instances {
				applyRegister(b, f, uint64(i+1), w.Spec(i))
			}
			held := liveHeap()
			gcCPU := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
			metrics.Read(gcCPU)
			before := gcCPU[0].Value.Float64()
			b.ResetTimer()
			for range b.N {
				runtime.GC()
			}
			b.StopTimer()
			metrics.Read(gcCPU)
			runtime.KeepAlive(f)
			// The wall time per collection depends on how many cores
			// mark; the CPU it took does not.
			b.ReportMetric((gcCPU[0].Value.Float64()-before)*1000/float64(b.N), "gc-cpu-ms/op")
			b.ReportMetric(float64(held.HeapAlloc)/(1<<20), "live-MiB")
			b.ReportMetric(float64(held.HeapInuse)/(1<<20), "spans-MiB")
			b.ReportMetric(float64(held.HeapObjects)/float64(sz.instances), "objects/instance")
		})
	}
}

// BenchmarkSnapshot measures writing and restoring a snapshot of 10,000
// workload instances (about 1 KB of metadata each).
func BenchmarkSnapshot(b *testing.B) {
	w := bench.DefaultWorkload()
	f := fsm.New(0, nil)
	for i := range w.Instances {
		applyRegister(b, f, uint64(i+1), w.Spec(i))
	}
	var snap bytes.Buffer
	if err := f.Export().Encode(&snap); err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(snap.Len()))
		b.ReportAllocs()
		for range b.N {
			if err := f.Export().Encode(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("restore", func(b *testing.B) {
		b.SetBytes(int64(snap.Len()))
		b.ReportAllocs()
		for range b.N {
			if err := fsm.New(0, nil).Restore(io.NopCloser(bytes.NewReader(snap.Bytes()))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// liveHeap returns the memory statistics after a full collection.
func liveHeap() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

// applyRegister registers s as a Eureka Java client describes itself.
func applyRegister(b *testing.B, f *fsm.FSM, idx uint64, s bench.Spec) {
	host := strings.ReplaceAll(s.IP, ".", "-") + ".bench.internal"
	base := "http://" + host + ":8080"
	in := &fsm.Instance{InstanceID: s.ID, HostName: host, App: s.App, IPAddr: s.IP, Sid: "na",
		Status: fsm.StatusUp, OverriddenStatus: fsm.StatusUnknown, Port: 8080, PortEnabled: true, SecurePort: 8443,
		CountryID: 1, DataCenterInfo: fsm.DataCenterInfo{Class: "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", Name: "MyOwn"},
		RenewalIntervalSecs: 30, DurationSecs: 90, Metadata: heldMetadata(s.Metadata),
		HomePageURL: base + "/", StatusPageURL: base + "/actuator/info", HealthCheckURL: base + "/actuator/health",
		VIPAddress: strings.ToLower(s.App), SecureVIPAddress: strings.ToLower(s.App), LastDirtyTimestamp: 1700000000000 + int64(idx)}
	e, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: in})
	if err != nil {
		b.Fatal(err)
	}
	if err := fsm.Stamp(e, 1700000000000+int64(idx)); err != nil {
		b.Fatal(err)
	}
	if res := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: e}); res != nil {
		b.Fatal(res)
	}
}

// heldMetadata converts the workload's metadata to the Instance field.
func heldMetadata(m map[string]string) fsm.Metadata { return fsm.MetadataOf(m) }

// BenchmarkApplyRenewals measures applying renewal batches to a registry
// of 210,000 workload instances (20 to an application), which every node
// does for every heartbeat: entries of 700 renewals (about the 48 KiB a
// leader writes an entry of), each instance once a round, in random order
// (a fleet's instances renew each on its own timer), so that lookups find
// the registry cold. ns/renewal is the figure. BENCH_RENEW_INSTANCES
// sets another size, such as the million:
//
//	BENCH_RENEW_INSTANCES=1000000 go test ./fsm -run XXX -bench ApplyRenewals -benchtime 20000x
func BenchmarkApplyRenewals(b *testing.B) {
	const perEntry = 700
	f, w, n := renewedRegistry(b, perEntry)
	order := rand.New(rand.NewPCG(1, 2)).Perm(n)
	// round encodes one round of renewals, each a millisecond later than
	// the round before, so that every renewal moves a lease.
	round := func(ts int64) [][]byte {
		var entries [][]byte
		for start := 0; start < n; start += perEntry {
			var rs []fsm.Renewal
			for _, i := range order[start : start+perEntry] {
				s := w.Spec(i)
				rs = append(rs, fsm.Renewal{App: s.App, ID: s.ID, Ts: ts})
			}
			e, err := fsm.Encode(fsm.CmdRenewBatch, &fsm.RenewBatchBody{Renewals: rs})
			if err != nil {
				b.Fatal(err)
			}
			if err := fsm.Stamp(e, ts); err != nil {
				b.Fatal(err)
			}
			entries = append(entries, e)
		}
		return entries
	}
	ts, idx := int64(1700000000000+2*n), uint64(n)
	var entries [][]byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%(n/perEntry) == 0 {
			b.StopTimer()
			ts++
			entries = round(ts)
			b.StartTimer()
		}
		idx++
		if res := f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: entries[i%len(entries)]}); res != nil {
			b.Fatal(res)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perEntry), "ns/renewal")
}

// renewedRegistry registers the instances BenchmarkApplyRenewals and
// BenchmarkLease renew: 210,000 or BENCH_RENEW_INSTANCES, rounded down to
// a multiple of perEntry, 20 to an application.
func renewedRegistry(b *testing.B, perEntry int) (*fsm.FSM, bench.Workload, int) {
	n := 210000
	if v, _ := strconv.Atoi(os.Getenv("BENCH_RENEW_INSTANCES")); v > 0 {
		n = v / perEntry * perEntry
	}
	w := bench.DefaultWorkload()
	w.Instances, w.Apps = n, n/20
	f := fsm.New(0, nil)
	for i := range n {
		applyRegister(b, f, uint64(i+1), w.Spec(i))
	}
	return f, w, n
}

// BenchmarkLease measures the lookup a node makes for every heartbeat it
// answers (Registry.Lease, under the FSM's read lock), one at a time and in
// random order, in the registry of BenchmarkApplyRenewals:
//
//	BENCH_RENEW_INSTANCES=1000000 go test ./fsm -run XXX -bench 'Lease$' -benchtime 2000000x
func BenchmarkLease(b *testing.B) {
	f, w, n := renewedRegistry(b, 1)
	order := rand.New(rand.NewPCG(3, 4)).Perm(n)
	keys := make([][2]string, n)
	for i, j := range order {
		s := w.Spec(j)
		keys[i] = [2]string{s.App, s.ID}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := keys[i%n]
		var e *fsm.Entry
		f.Read(func(r *fsm.Registry) { e = r.Lease(k[0], k[1]) })
		if e == nil {
			b.Fatalf("%s/%s is not held", k[0], k[1])
		}
	}
}
