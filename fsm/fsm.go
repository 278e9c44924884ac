package fsm

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// FSM is the raft.FSM adapter around Registry: it decodes log entries,
// applies them under a lock, publishes what changed, and snapshots and
// restores the whole state.
type FSM struct {
	mu          sync.RWMutex
	reg         *Registry
	retentionMs int64
	lastIndex   uint64

	// appliedBytes and appliedEntries count command entries applied (for
	// log-volume measurements).
	appliedBytes   atomic.Uint64
	appliedEntries atomic.Uint64
	// appliedCommands counts the commands applied (a packed entry's each),
	// and snapCommands what it was at the last snapshot or restore: the
	// log a restart replays is counted in commands (CommandsSinceSnapshot).
	appliedCommands, snapCommands atomic.Uint64

	obsMu     sync.RWMutex
	observers []func(Change)

	log hclog.Logger
}

// New returns an FSM holding an empty registry whose delta queue keeps a
// change for deltaRetention (≤ 0 selects DefaultDeltaRetention).
func New(deltaRetention time.Duration, log hclog.Logger) *FSM {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	reg := NewRegistry(deltaRetention)
	return &FSM{reg: reg, retentionMs: reg.retentionMs, log: log.Named("fsm")}
}

// Observe registers fn to be called, in log order, after every applied
// command and after a restore. fn runs on the apply path: it must be quick.
func (f *FSM) Observe(fn func(Change)) {
	f.obsMu.Lock()
	f.observers = append(f.observers, fn)
	f.obsMu.Unlock()
}

func (f *FSM) publish(c Change) {
	f.obsMu.RLock()
	defer f.obsMu.RUnlock()
	for _, fn := range f.observers {
		fn(c)
	}
}

// Read runs fn with the registry under a read lock. fn must not keep the
// *Registry, but may keep the *Entry values it returns (they are immutable).
func (f *FSM) Read(fn func(r *Registry)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.reg)
}

// AppliedIndex is the index of the last log entry applied.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.lastIndex
}

// Apply implements raft.FSM. It returns nil or an error value (a domain
// error such as ErrInstanceNotFound); a log entry that cannot be decoded
// panics, because skipping it would let this node diverge from its peers.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.appliedBytes.Add(uint64(len(l.Data)))
	f.appliedEntries.Add(1)
	if TypeOf(l.Data) == CmdBatch {
		return f.applyBatch(l)
	}
	f.appliedCommands.Add(1)
	cmd, err := decodeApplied(l.Data)
	if err != nil {
		if errors.Is(err, ErrBadCommand) && cmd.Type&CmdIgnoreUnknown != 0 {
			f.log.Warn("skipping unknown command", "index", l.Index, "type", byte(cmd.Type))
			f.mu.Lock()
			f.lastIndex = l.Index
			f.mu.Unlock()
			return nil
		}
		panic(fmt.Sprintf("heureka fsm: cannot apply log entry %d: %v", l.Index, err))
	}
	change := Change{Index: l.Index, Type: cmd.Type}
	f.mu.Lock()
	res := f.applyLocked(l.Index, cmd, &change)
	f.lastIndex = l.Index
	f.mu.Unlock()
	f.publish(change)
	return res
}

func (f *FSM) applyLocked(idx uint64, cmd Command, c *Change) error {
	return f.reg.Apply(idx, cmd, c)
}

// Snapshot implements raft.FSM: it copies the state (entries are immutable,
// so the copy is shallow and quick) and lets Persist encode it while applies
// continue.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	f.snapCommands.Store(f.appliedCommands.Load())
	return &snapshot{state: f.reg.export(f.lastIndex)}, nil
}

// CommandsSinceSnapshot is how many commands the FSM applied since its
// last snapshot (or restore): what a restart would replay from the log.
// Raft's snapshot threshold counts entries, and a packed entry holds many
// commands.
func (f *FSM) CommandsSinceSnapshot() uint64 {
	return f.appliedCommands.Load() - f.snapCommands.Load()
}

// Restore implements raft.FSM: it builds a new registry from the snapshot
// as it reads it (restoreSnapshot) and swaps it in atomically; a snapshot
// refused part way leaves the current registry as it was.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	reg, st, err := restoreSnapshot(rc, f.retentionMs)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.mu.Lock()
	f.reg = reg
	f.lastIndex = st.LastIndex
	f.snapCommands.Store(f.appliedCommands.Load())
	f.mu.Unlock()
	f.log.Info("restored snapshot", "last_index", st.LastIndex, "instances", reg.count)
	f.publish(Change{Index: st.LastIndex, All: true})
	return nil
}

// AppliedVolume returns how many command entries, and bytes of them, this
// FSM applied since it started (replays after a restart included).
func (f *FSM) AppliedVolume() (entries, bytes uint64) {
	return f.appliedEntries.Load(), f.appliedBytes.Load()
}
