package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// SnapshotFormat is the version of the snapshot layout this code writes.
// Restore accepts every format listed in decodeStream.
//
//   - 1: the whole State as one msgpack value. A reader must hold every
//     decoded entry before it can use the first: restoring a million
//     instances peaked at 1.8 times the registry it built.
//   - 2: the State without its entries (their count in their place), then
//     each entry as a msgpack value of its own, in application and id
//     order. Restore puts each entry into the registry as it is read, so
//     it holds the registry it builds and one entry more.
//   - 3: as format 2, but each entry in a binary record of its own
//     layout (snapcodec.go) instead of a msgpack value: a million
//     instances restore in about a third of the time, and save faster.
//   - 4: as format 3, but a record's metadata block may be held
//     compressed (mdcompress.go), written as the registry holds it: a
//     large registry's snapshot neither inflates nor compresses a block.
const SnapshotFormat = 4

// snapshotFormatWhole, snapshotFormatMsgpackEntries and
// snapshotFormatRecords are formats 1 to 3, still read (snapshots written
// by earlier releases stay on disk until the next one replaces them, and
// backups are restored from files).
const (
	snapshotFormatWhole          = 1
	snapshotFormatMsgpackEntries = 2
	snapshotFormatRecords        = 3
)

// snapshotMagic starts every heureka snapshot, so that a stray file is
// refused with a clear error instead of a decoder panic.
var snapshotMagic = []byte("HEUREKA-SNAP")

// ErrBadSnapshot is returned for a snapshot that cannot be read.
var ErrBadSnapshot = errors.New("bad snapshot")

// State is the whole FSM state in a stable, sorted, encodable form.
type State struct {
	Format    int          `codec:"f"`
	LastIndex uint64       `codec:"li"`
	Version   uint64       `codec:"v"`
	DeltaSeq  uint64       `codec:"ds"`
	Mode      string       `codec:"mode"`
	ClusterID string       `codec:"cid,omitempty"`
	Members   []Member     `codec:"m"`
	Entries   []*Entry     `codec:"e"`
	Delta     []DeltaEntry `codec:"d"`
	// AppVersions is each application's content version.
	AppVersions map[string]uint64 `codec:"av"`
	// Regions are the copies of remote regions (region.go).
	Regions []RegionState `codec:"rg,omitempty"`
}

func (r *Registry) export(lastIndex uint64) *State {
	st := &State{Format: SnapshotFormat, LastIndex: lastIndex, Version: r.version, DeltaSeq: r.deltaSeq,
		Mode: r.mode, ClusterID: r.clusterID, Members: r.Members(), Entries: make([]*Entry, 0, r.count),
		AppVersions: make(map[string]uint64, len(r.apps))}
	for name, a := range r.apps {
		st.AppVersions[name] = a.Version
	}
	// Unsorted: export runs under the FSM's lock, where a sort of the
	// whole registry would hold up applies; Encode and Export sort.
	r.Range(func(e *Entry) { st.Entries = append(st.Entries, e) })
	for _, d := range r.delta {
		st.Delta = append(st.Delta, *d)
	}
	sort.Slice(st.Delta, func(i, j int) bool { return st.Delta[i].Seq < st.Delta[j].Seq })
	st.Regions = r.exportRegions()
	return st
}

// importState builds a registry of st. held says st's entries are held
// by another registry (Clone), which keeps them and renews them in place:
// they are copied, sharing their sealed records and held strings.
// Otherwise they are st's own, read from a snapshot, and sealed as they
// are put in.
func importState(st *State, retentionMs int64, held bool) *Registry {
	r := newRegistry(retentionMs)
	for _, e := range st.Entries {
		if held {
			r.hold(e)
		} else {
			r.put(e)
		}
	}
	r.importHead(st, held)
	return r
}

// importHead sets everything of st but its entries, which r holds
// already; held is as for importState.
func (r *Registry) importHead(st *State, held bool) {
	r.version, r.deltaSeq, r.mode, r.clusterID = st.Version, st.DeltaSeq, st.Mode, st.ClusterID
	for _, m := range st.Members {
		r.members[m.ID] = m
	}
	for name, v := range st.AppVersions {
		if a := r.apps[name]; a != nil {
			a.Version = v
		}
	}
	r.prunedSeq = r.deltaSeq
	for i := range st.Delta {
		d := &st.Delta[i]
		r.delta[deltaID{d.App, d.ID}] = d
		r.deltaOrder = append(r.deltaOrder, d)
		if i == 0 {
			r.prunedSeq = d.Seq - 1
		}
	}
	r.importRegions(st.Regions, held)
}

// sortEntries puts the entries in application and id order, so that the
// same state always encodes to the same bytes.
func (st *State) sortEntries() {
	for _, rs := range st.Regions {
		if rs.Copy != nil {
			rs.Copy.sortEntries()
		}
	}
	sortByAppAndID(st.Entries)
}

// sortByAppAndID sorts es by application, then id. export lists each
// application's entries together, so es is a series of runs of one
// application each: the runs are sorted by application name, laid out in
// that order, and each application's few entries sorted by id. One sort
// of the whole list compared pairs of entries twenty times per entry at a
// million, each comparison a miss into an entry somewhere in the heap,
// and was a quarter of a snapshot's CPU
// (docs/benchmarks/2026-12-05-a-fleet-the-machine-carries.md, "The
// snapshot's sort"). Any order of es gives the same result: runs of one
// application that are not together end up next to each other once the
// runs are sorted, and are sorted by id as one.
func sortByAppAndID(es []*Entry) {
	type run struct {
		app       string
		start, to int
	}
	var runs []run
	for i, e := range es {
		if len(runs) > 0 && runs[len(runs)-1].app == e.App {
			runs[len(runs)-1].to = i + 1
			continue
		}
		runs = append(runs, run{e.App, i, i + 1})
	}
	slices.SortFunc(runs, func(a, b run) int { return strings.Compare(a.app, b.app) })
	byID := func(a, b *Entry) int { return strings.Compare(a.ID, b.ID) }
	placed := make([]*Entry, 0, len(es))
	for i := 0; i < len(runs); {
		// The runs of one application, now adjacent, are its entries.
		from := len(placed)
		for app := runs[i].app; i < len(runs) && runs[i].app == app; i++ {
			placed = append(placed, es[runs[i].start:runs[i].to]...)
		}
		slices.SortFunc(placed[from:], byID)
	}
	copy(es, placed)
}

// Encode writes the state in snapshot format, its entries in application
// and id order (it sorts st.Entries).
func (st *State) Encode(w io.Writer) error {
	return st.encodeFormat(w, SnapshotFormat)
}

// stateHead is format 2's first value: the State with the number of
// entries that follow in place of the entries.
type stateHead struct {
	State
	EntryCount int `codec:"n"`
}

// encodeFormat writes the state in the given snapshot format (tests write
// format 1 to prove it still restores).
func (st *State) encodeFormat(w io.Writer, format byte) error {
	st.sortEntries()
	if _, err := w.Write(snapshotMagic); err != nil {
		return err
	}
	if _, err := w.Write([]byte{format}); err != nil {
		return err
	}
	enc := codec.NewEncoder(w, msgpackHandle)
	if format == snapshotFormatWhole {
		return enc.Encode(st)
	}
	head := stateHead{State: *st, EntryCount: len(st.Entries)}
	head.Entries = nil
	if err := enc.Encode(&head); err != nil {
		return err
	}
	if format == snapshotFormatMsgpackEntries {
		for _, e := range st.Entries {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	var rec, scratch []byte
	for _, e := range st.Entries {
		rec, scratch = appendRecord(rec[:0], scratch, e, format)
		if _, err := w.Write(rec); err != nil {
			return err
		}
	}
	return nil
}

// decodeStream reads a snapshot: it passes each entry to each as it is
// decoded, in the stream's order, and returns the rest of the state
// (Entries nil). A format 1 snapshot is decoded whole first, then passed
// on entry by entry the same way. An error from each stops the read.
func decodeStream(r io.Reader, each func(i int, e *Entry) error) (*State, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head := make([]byte, len(snapshotMagic)+1)
	if _, err := io.ReadFull(br, head); err != nil {
		return nil, fmt.Errorf("%w: read header: %v", ErrBadSnapshot, err)
	}
	if string(head[:len(snapshotMagic)]) != string(snapshotMagic) {
		return nil, fmt.Errorf("%w: not a heureka snapshot", ErrBadSnapshot)
	}
	dec := codec.NewDecoder(br, msgpackHandle)
	switch f := head[len(snapshotMagic)]; f {
	case snapshotFormatWhole:
		st := &State{}
		if err := dec.Decode(st); err != nil {
			return nil, fmt.Errorf("%w: decode: %v", ErrBadSnapshot, err)
		}
		for i, e := range st.Entries {
			if err := each(i, e); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
			}
		}
		st.Entries = nil
		return st, nil
	case snapshotFormatMsgpackEntries, snapshotFormatRecords, SnapshotFormat:
		var sh stateHead
		if err := dec.Decode(&sh); err != nil {
			return nil, fmt.Errorf("%w: decode: %v", ErrBadSnapshot, err)
		}
		if sh.EntryCount < 0 || len(sh.Entries) > 0 {
			return nil, fmt.Errorf("%w: bad entry count %d", ErrBadSnapshot, sh.EntryCount)
		}
		for i := range sh.EntryCount {
			e, err := decodeEntry(dec, br, f)
			if err != nil {
				return nil, fmt.Errorf("%w: decode entry %d of %d: %v", ErrBadSnapshot, i, sh.EntryCount, err)
			}
			if err := each(i, e); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
			}
		}
		return &sh.State, nil
	default:
		return nil, fmt.Errorf("%w: unknown format %d", ErrBadSnapshot, f)
	}
}

// decodeEntry reads the next entry of a format 2, 3 or 4 stream.
func decodeEntry(dec *codec.Decoder, br *bufio.Reader, format byte) (*Entry, error) {
	if format == snapshotFormatMsgpackEntries {
		e := &Entry{}
		if err := dec.Decode(e); err != nil {
			return nil, err
		}
		return e, nil
	}
	return readRecord(br, format >= SnapshotFormat)
}

// readSnapshot decodes a whole snapshot into a State and checks it.
func readSnapshot(r io.Reader) (*State, error) {
	var entries []*Entry
	st, err := decodeStream(r, func(_ int, e *Entry) error {
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	st.Entries = entries
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	return st, nil
}

// restoreSnapshot builds a registry from a snapshot stream as it reads it,
// each entry checked and put in as it comes, its strings interned: the
// registry and one entry are held, never the decoded state besides. It
// refuses what readSnapshot refuses.
func restoreSnapshot(r io.Reader, retentionMs int64) (*Registry, *State, error) {
	reg := newRegistry(retentionMs)
	st, err := decodeStream(r, func(i int, e *Entry) error {
		if err := checkEntry(i, e); err != nil {
			return err
		}
		if reg.Get(e.App, e.ID) != nil {
			return fmt.Errorf("entry %s/%s appears twice", e.App, e.ID)
		}
		// put seals the record and interns the key, as for a
		// registration: nothing of the entry points into what was read.
		reg.put(e)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if err := st.check(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	reg.importHead(st, false) // the regions' copies are sealed as importState puts them
	return reg, st, nil
}

// checkEntry refuses entry i when the registry's readers could not rely
// on it: no record, or keyed by other names than its record's.
func checkEntry(i int, e *Entry) error {
	switch {
	case e == nil || e.Instance == nil:
		return fmt.Errorf("entry %d has no instance", i)
	case e.App == "" || e.ID == "":
		return fmt.Errorf("entry %d has an empty application or id", i)
	case e.Instance.App != e.App || e.Instance.ID() != e.ID:
		return fmt.Errorf("entry %s/%s holds the record of %s/%s", e.App, e.ID, e.Instance.App, e.Instance.ID())
	}
	return nil
}

// check refuses a state that no sequence of commands can produce and that
// the registry's readers rely on never meeting: an entry without its
// record, or keyed by other names than its record's; a key twice; a change
// in the delta queue with an unknown action, or a deletion without the
// deleted record (the delta document lists that record). A snapshot comes
// from this node's own log, or from an operator's restore of a file.
func (st *State) check() error {
	keys := make(map[deltaID]bool, len(st.Entries))
	for i, e := range st.Entries {
		if err := checkEntry(i, e); err != nil {
			return err
		}
		if keys[deltaID{e.App, e.ID}] {
			return fmt.Errorf("entry %s/%s appears twice", e.App, e.ID)
		}
		keys[deltaID{e.App, e.ID}] = true
	}
	clear(keys)
	for i := range st.Delta {
		d := &st.Delta[i]
		switch {
		case d.App == "" || d.ID == "":
			return fmt.Errorf("delta change %d has an empty application or id", i)
		case d.Action != ActionAdded && d.Action != ActionModified && d.Action != ActionDeleted:
			return fmt.Errorf("delta change %s/%s has unknown action %q", d.App, d.ID, d.Action)
		case d.Action == ActionDeleted && d.Deleted == nil:
			return fmt.Errorf("delta deletion of %s/%s has no record", d.App, d.ID)
		case d.Deleted != nil && (d.Deleted.Instance == nil || d.Deleted.App != d.App || d.Deleted.ID != d.ID):
			return fmt.Errorf("delta change %s/%s holds a record without an instance or of another key", d.App, d.ID)
		case keys[deltaID{d.App, d.ID}]:
			return fmt.Errorf("delta change %s/%s appears twice", d.App, d.ID)
		}
		keys[deltaID{d.App, d.ID}] = true
	}
	return st.checkRegions()
}

// ReadSnapshot decodes a snapshot stream that comes from outside the
// cluster (an operator's restore, tools) and checks it in full: beyond
// what a restore checks, every compressed metadata block must inflate to
// the canonical block its header says. A node's own snapshots and its
// leader's pass their blocks' CRCs instead (see mdcompress.go): inflating
// a million blocks would add seconds to every restart.
func ReadSnapshot(r io.Reader) (*State, error) {
	st, err := readSnapshot(r)
	if err != nil {
		return nil, err
	}
	if err := st.checkBlocks(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	return st, nil
}

// Applications is how many applications the state's entries belong to.
func (st *State) Applications() int {
	names := make(map[string]struct{})
	for _, e := range st.Entries {
		names[e.App] = struct{}{}
	}
	return len(names)
}

type snapshot struct{ state *State }

// Persist implements raft.FSMSnapshot.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 1<<16)
	if err := s.state.Encode(w); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	if err := w.Flush(); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}

// Export is the registry in snapshot form as of log index lastIndex, its
// entries sorted (for a registry other than the FSM's own, such as a node's
// AP fallback overlay).
func (r *Registry) Export(lastIndex uint64) *State {
	st := r.export(lastIndex)
	st.sortEntries()
	return st
}

// Export returns the FSM's current state (for tests and tools), its
// entries in application and id order.
func (f *FSM) Export() *State {
	f.mu.RLock()
	st := f.reg.export(f.lastIndex)
	f.mu.RUnlock()
	st.sortEntries()
	return st
}
