package fsm_test

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/bench"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

// BenchmarkSnapshotScale measures a snapshot of a large registry as a node
// takes and restores it: Snapshot and Persist into a file (as Raft's file
// store does, fsynced), then, with the registry dropped, Restore from the
// file into an empty FSM, as a restarted node does. It reports the
// seconds of each, the file's size, the registry's live heap, and the
// peak heap (objects in use, sampled every 5 ms) during each. The size
// is BENCH_SNAPSHOT_INSTANCES (20 to an application); without it the
// benchmark is skipped, for a million takes minutes and gigabytes:
//
//	BENCH_SNAPSHOT_INSTANCES=1000000 go test ./fsm -run XXX -bench SnapshotScale -benchtime 1x -timeout 30m
func BenchmarkSnapshotScale(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("BENCH_SNAPSHOT_INSTANCES"))
	if n <= 0 {
		b.Skip("set BENCH_SNAPSHOT_INSTANCES (e.g. 1000000) to run it")
	}
	w := bench.DefaultWorkload()
	w.Instances, w.Apps = n, max(1, n/20)
	for range b.N {
		f := fsm.New(0, nil)
		for i := range n {
			applyRegister(b, f, uint64(i+1), w.Spec(i))
		}
		live := liveHeap().HeapAlloc
		path := filepath.Join(b.TempDir(), "state.bin")

		peak := sampleHeap()
		start := time.Now()
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		sink, err := newFileSink(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Persist(sink); err != nil {
			b.Fatal(err)
		}
		snap.Release()
		save, savePeak := time.Since(start), peak()
		info, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}

		f = nil
		runtime.KeepAlive(f)
		base := liveHeap().HeapAlloc
		peak = sampleHeap()
		start = time.Now()
		g := fsm.New(0, nil)
		rf, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Restore(rf); err != nil {
			b.Fatal(err)
		}
		restore, restorePeak := time.Since(start), peak()
		restored := liveHeap().HeapAlloc - base
		runtime.KeepAlive(g)

		const mib = 1 << 20
		b.ReportMetric(save.Seconds(), "save-s")
		b.ReportMetric(restore.Seconds(), "restore-s")
		b.ReportMetric(float64(info.Size())/mib, "file-MiB")
		b.ReportMetric(float64(live)/mib, "live-MiB")
		b.ReportMetric(float64(savePeak)/mib, "save-peak-heap-MiB")
		b.ReportMetric(float64(restorePeak)/mib, "restore-peak-heap-MiB")
		b.ReportMetric(float64(restored)/mib, "restored-live-MiB")
	}
}

// sampleHeap samples the heap's objects in use every 5 ms until the
// returned function is called, which returns the highest sample.
func sampleHeap() func() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var mu sync.Mutex
	var top uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	read := func() {
		metrics.Read(s)
		mu.Lock()
		top = max(top, s[0].Value.Uint64())
		mu.Unlock()
	}
	go func() {
		defer close(done)
		tick.Every(stop, 5*time.Millisecond, read)
	}()
	return func() uint64 {
		close(stop)
		<-done
		read()
		mu.Lock()
		defer mu.Unlock()
		return top
	}
}

// fileSink is a raft.SnapshotSink writing to a file, fsynced on Close.
type fileSink struct {
	f *os.File
	*bufio.Writer
}

func newFileSink(path string) (*fileSink, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &fileSink{f: f, Writer: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (s *fileSink) ID() string { return "bench" }

func (s *fileSink) Cancel() error { return s.f.Close() }

func (s *fileSink) Close() error {
	if err := s.Flush(); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		return err
	}
	return s.f.Close()
}
