package cluster

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/store"
)

// fullDisk is a log store on a disk that fills up: while full is set, a
// write carrying commands fails with ENOSPC. Writes without data (raft's
// no-op and barrier entries) go through, as on a real full disk, where
// bolt reuses pages it already holds for them.
type fullDisk struct {
	raft.LogStore
	full atomic.Bool
}

func (d *fullDisk) StoreLogs(logs []*raft.Log) error {
	size := 0
	for _, l := range logs {
		size += len(l.Data)
	}
	if d.full.Load() && size > 0 {
		return fmt.Errorf("commit: %w", &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC})
	}
	return d.LogStore.StoreLogs(logs)
}

func (d *fullDisk) StoreLog(l *raft.Log) error { return d.StoreLogs([]*raft.Log{l}) }

// startFullDiskNode starts a single in-memory node whose log store is
// disk; its disk watch's probe finds no room while disk.full is set.
func startFullDiskNode(t *testing.T, mode string, disk *fullDisk) *Node {
	t.Helper()
	self := fsm.Member{ID: "n1", RaftAddr: "127.0.0.1:17951", HTTPAddr: "127.0.0.1:18951"}
	cfg := fastConfig(self, nil, mode, nil)
	cfg.ApplyTimeout = 3 * time.Second
	w := store.NewDiskWatchProbe(func() error {
		if disk.full.Load() {
			return &os.PathError{Op: "write", Path: store.ProbeFile, Err: syscall.ENOSPC}
		}
		return nil
	})
	stable := raft.NewInmemStore()
	_, trans := raft.NewInmemTransport(raft.ServerAddress(self.RaftAddr))
	n, err := New(cfg, Deps{Transport: trans, LogStore: store.WatchLog(disk, w), StableStore: stable,
		SnapshotStore: raft.NewInmemSnapshotStore(), JournalDir: t.TempDir(), Disk: w}, fsm.New(time.Minute, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(); _ = trans.Close() })
	waitFor(t, 2*time.Second, "the node leading", n.IsLeader)
	return n
}

// A single node whose disk fills up refuses writes with ErrDiskFull (503
// with Retry-After in httpapi), says so in its status, keeps its
// leadership while the disk stays full, and takes writes again by itself
// once there is room; what it acknowledged is all there.
func TestDiskFull_RefusedVisibleAndRecovered(t *testing.T) {
	disk := &fullDisk{LogStore: raft.NewInmemStore()}
	n := startFullDiskNode(t, ModeAP, disk)
	if _, err := n.Apply(t.Context(), registerEntry(t, "orders", "o1")); err != nil {
		t.Fatal(err)
	}

	disk.full.Store(true)
	// The first write reaches the log store and fails there; raft steps the
	// leader down on it and the future only has the error's text.
	before := n.raft.CurrentTerm()
	_, err := n.Apply(t.Context(), registerEntry(t, "orders", "o2"))
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("register on a full disk: %v, want ErrDiskFull", err)
	}
	// The step-down may come after the answer: wait for the next term's
	// leadership, not for a leadership that is about to end.
	waitFor(t, 2*time.Second, "the node leading again", func() bool { return n.IsLeader() && n.raft.CurrentTerm() > before })
	term := n.raft.CurrentTerm()
	for i := range 5 {
		start := time.Now()
		_, err := n.Apply(t.Context(), registerEntry(t, "orders", fmt.Sprintf("r%d", i)))
		if !errors.Is(err, ErrDiskFull) {
			t.Fatalf("register %d while the disk is full: %v, want ErrDiskFull", i, err)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Fatalf("refusal %d took %v: it waited for a leader instead of refusing", i, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !n.IsLeader() || n.raft.CurrentTerm() != term {
		t.Fatalf("leadership moved while writes were refused: leader %v, term %d -> %d", n.IsLeader(), term, n.raft.CurrentTerm())
	}
	st := n.Status()
	if !st.DiskFull || st.DiskFullForMs <= 0 || st.DiskFullRefused < 6 || st.DiskWriteFailures == 0 ||
		!strings.Contains(st.DiskFullCause, syscall.ENOSPC.Error()) {
		t.Fatalf("status while full: disk_full %v for %d ms, cause %q, refused %d, failures %d",
			st.DiskFull, st.DiskFullForMs, st.DiskFullCause, st.DiskFullRefused, st.DiskWriteFailures)
	}
	// A heartbeat renews the lease the leader holds in memory; the log
	// gets it once there is room (renewBatcher.requeue).
	if err := n.Renew(t.Context(), "orders", "o1", 0); err != nil {
		t.Fatalf("renew while the disk is full: %v", err)
	}

	disk.full.Store(false)
	waitFor(t, 3*time.Second, "the node to find room again", func() bool { return !n.Status().DiskFull })
	if _, err := n.Apply(t.Context(), registerEntry(t, "orders", "o3")); err != nil {
		t.Fatalf("register after space was freed: %v", err)
	}
	if err := n.ReadBarrier(t.Context()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	n.Read(func(r *fsm.Registry) {
		for _, e := range r.AppEntries("orders") {
			ids = append(ids, e.Instance.InstanceID)
		}
	})
	if strings.Join(ids, ",") != "o1,o3" {
		t.Fatalf("instances after recovery: %v, want o1 and o3 (the writes refused are not there)", ids)
	}
	if st := n.Status(); st.DiskFull || st.DiskFullForMs != 0 || st.DiskFullCause != "" {
		t.Fatalf("status after recovery: %+v", st)
	}
}

// In AP mode without quorum, a node whose disk is full refuses the write
// rather than journal it: the journal is on the same disk. Once there is
// room, the same write is journaled.
func TestDiskFull_NotJournaledWithoutRoom(t *testing.T) {
	self := fsm.Member{ID: "n1", RaftAddr: "127.0.0.1:17961", HTTPAddr: "127.0.0.1:18961"}
	absent := fsm.Member{ID: "n2", RaftAddr: "127.0.0.1:17962", HTTPAddr: "127.0.0.1:18962"}
	cfg := fastConfig(self, []fsm.Member{self, absent}, ModeAP, nil)
	var noRoom atomic.Bool
	w := store.NewDiskWatchProbe(func() error {
		if noRoom.Load() {
			return &os.PathError{Op: "write", Path: store.ProbeFile, Err: syscall.ENOSPC}
		}
		return nil
	})
	logs := raft.NewInmemStore()
	_, trans := raft.NewInmemTransport(raft.ServerAddress(self.RaftAddr))
	n, err := New(cfg, Deps{Transport: trans, LogStore: logs, StableStore: logs,
		SnapshotStore: raft.NewInmemSnapshotStore(), JournalDir: t.TempDir(), Disk: w}, fsm.New(time.Minute, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Shutdown(); _ = trans.Close() })
	waitFor(t, 3*time.Second, "quorum lost", n.QuorumLost)

	noRoom.Store(true)
	w.Check(&os.PathError{Op: "write", Path: store.JournalFile, Err: syscall.ENOSPC})
	if _, err := n.Apply(t.Context(), registerEntry(t, "orders", "o1")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("write without quorum on a full disk: %v, want ErrDiskFull", err)
	}
	if n.fb.journal.Len() != 0 || visible(n, "orders", "o1") {
		t.Fatalf("the refused write was journaled (%d entries) or shown", n.fb.journal.Len())
	}

	noRoom.Store(false)
	waitFor(t, 3*time.Second, "the node to find room again", func() bool { return !n.Status().DiskFull })
	if _, err := n.Apply(t.Context(), registerEntry(t, "orders", "o1")); err != nil {
		t.Fatalf("write without quorum once there is room: %v", err)
	}
	if n.fb.journal.Len() != 1 {
		t.Fatalf("journal holds %d entries, want the write", n.fb.journal.Len())
	}
}
