package cluster

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkDeadlinesHeld measures what the leader's deadline schedule
// keeps per instance once every lease is scheduled (as at the start of a
// leadership, or after a restore), 20 instances to an application as in
// the million's workload: B/instance and objects/instance of the live
// heap, the keys' strings being the registry's own (they are not counted).
func BenchmarkDeadlinesHeld(b *testing.B) {
	const n = 100000
	apps, ids := make([]string, n), make([]string, n)
	for i := range n {
		apps[i], ids[i] = fmt.Sprintf("APP-%05d", i/20), fmt.Sprintf("app-%05d-host-%02d.example.internal:8080", i/20, i%20)
	}
	var ms runtime.MemStats
	for range b.N {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before, objects := ms.HeapAlloc, ms.HeapObjects
		d := newDeadlines()
		for i := range n {
			d.schedule(apps[i], int64(90_000+i))
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc-before)/n, "B/instance")
		b.ReportMetric(float64(ms.HeapObjects-objects)/n, "objects/instance")
		runtime.KeepAlive(d)
	}
}
