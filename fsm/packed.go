package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/raft"
)

// Log formats: what a release writes into the log and can read back.
// Every node records the newest it reads in its member record
// (Member.LogFormat), and a leader writes a newer kind of entry only once
// every server in the configuration reads it: a rolling upgrade runs on
// the old format until its last node is upgraded.
const (
	// LogFormatPacked adds CmdBatch.
	LogFormatPacked = 2
	// LogFormatEvictLeases adds CmdEvictLeases.
	LogFormatEvictLeases = 3
	// LogFormat is the newest log format this release reads.
	LogFormat = LogFormatEvictLeases
)

// A CmdBatch entry is the usual header (type, version, the leader's
// timestamp) followed by whole entries, each a uvarint length and the
// entry, each stamped by the leader. It packs the client writes that
// reached the leader together: one log entry, one append, one replication
// and one apply where there would be as many as writes (a registration
// burst's log writes hold about a tenth of the entries; each entry costs
// raft an encoding, a bolt key and a transport frame).
//
// The FSM applies the packed entries in order under the batch's index and
// its lock, as one step: no read sees part of a batch, so a version (the
// index) names one state. Only client writes are packed (Packable): the
// control entries (members, mode, cluster id, regions, evictions, renewal
// batches) are read from the log by themselves (scanLogMode, ModeOf) or
// are large already.

// Packable reports whether an entry of type t may be packed: a client's
// write.
func Packable(t CmdType) bool {
	switch t {
	case CmdRegister, CmdCancel, CmdSetOverride, CmdDeleteOverride, CmdMetadata:
		return true
	}
	return false
}

// maxPacked bounds the entries of one batch, so that a damaged length
// cannot make a reader allocate without limit.
const maxPacked = 1 << 16

// EncodeBatch packs entries, each a whole packable entry, into one
// CmdBatch entry with a zero timestamp (Stamp it). The entries are
// copied.
func EncodeBatch(entries [][]byte) ([]byte, error) {
	if len(entries) == 0 || len(entries) > maxPacked {
		return nil, fmt.Errorf("%w: a batch of %d entries", ErrBadCommand, len(entries))
	}
	n := headerLen
	for _, e := range entries {
		if len(e) < headerLen || !Packable(TypeOf(e)) {
			return nil, fmt.Errorf("%w: %s entry cannot be packed", ErrBadCommand, TypeOf(e))
		}
		n += binary.MaxVarintLen64 + len(e)
	}
	out := make([]byte, headerLen, n)
	out[0], out[1] = byte(CmdBatch), bodyVersion1
	for _, e := range entries {
		out = binary.AppendUvarint(out, uint64(len(e)))
		out = append(out, e...)
	}
	return out, nil
}

// splitBatch returns the entries packed in a CmdBatch entry: views of its
// bytes.
func splitBatch(entry []byte) ([][]byte, error) {
	if len(entry) < headerLen || TypeOf(entry) != CmdBatch || entry[1] != bodyVersion1 {
		return nil, fmt.Errorf("%w: not a batch", ErrBadCommand)
	}
	b := entry[headerLen:]
	var out [][]byte
	for len(b) > 0 {
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l || len(out) == maxPacked {
			return nil, fmt.Errorf("%w: batch cut short or too long after %d entries", ErrBadCommand, len(out))
		}
		e := b[k : k+int(l)]
		if len(e) < headerLen || !Packable(TypeOf(e)) {
			return nil, fmt.Errorf("%w: batch packs a %s entry", ErrBadCommand, TypeOf(e))
		}
		out = append(out, e)
		b = b[k+int(l):]
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty batch", ErrBadCommand)
	}
	return out, nil
}

// DecodeEntry decodes a log entry into its commands: its own, or the ones
// a CmdBatch packs, in order, to be applied under the entry's index.
func DecodeEntry(entry []byte) ([]Command, error) {
	if TypeOf(entry) != CmdBatch {
		cmd, err := Decode(entry)
		if err != nil {
			return nil, err
		}
		return []Command{cmd}, nil
	}
	return decodeBatch(entry, false)
}

func decodeBatch(entry []byte, view bool) ([]Command, error) {
	packed, err := splitBatch(entry)
	if err != nil {
		return nil, err
	}
	cmds := make([]Command, len(packed))
	for i, e := range packed {
		if cmds[i], err = decode(e, view); err != nil {
			return nil, fmt.Errorf("batch entry %d: %w", i, err)
		}
	}
	return cmds, nil
}

// BatchResults is FSM.Apply's answer to a CmdBatch entry: each packed
// entry's, in order.
type BatchResults []error

// applyBatch applies a CmdBatch entry's commands as one step.
func (f *FSM) applyBatch(l *raft.Log) any {
	cmds, err := decodeBatch(l.Data, true)
	if err != nil {
		panic(fmt.Sprintf("heureka fsm: cannot apply log entry %d: %v", l.Index, err))
	}
	f.appliedCommands.Add(uint64(len(cmds)))
	res := make(BatchResults, len(cmds))
	changes := make([]Change, len(cmds))
	f.mu.Lock()
	for i, cmd := range cmds {
		changes[i] = Change{Index: l.Index, Type: cmd.Type}
		res[i] = f.applyLocked(l.Index, cmd, &changes[i])
	}
	f.lastIndex = l.Index
	f.mu.Unlock()
	for _, c := range changes {
		f.publish(c)
	}
	return res
}
