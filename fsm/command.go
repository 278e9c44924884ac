package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// CmdType is the first byte of every Raft log entry heureka writes. Numbers
// are explicit and never reused; a retired command keeps its number.
type CmdType byte

// Command types.
const (
	CmdInvalid        CmdType = 0
	CmdRegister       CmdType = 1
	CmdCancel         CmdType = 2
	CmdRenewBatch     CmdType = 3
	CmdSetOverride    CmdType = 4
	CmdDeleteOverride CmdType = 5
	CmdMetadata       CmdType = 6
	CmdEvict          CmdType = 7
	CmdSetMember      CmdType = 8
	CmdRemoveMember   CmdType = 9
	CmdSetMode        CmdType = 10
	// CmdSetClusterID names the cluster once (the first leader writes it,
	// with CmdIgnoreUnknown set, so a node that predates it skips it).
	CmdSetClusterID CmdType = 11
	// CmdRegionUpdate changes the copy of a remote region (region.go). It
	// is written with CmdIgnoreUnknown set: a node that predates it serves
	// no remote region, and its local registry is the same without it.
	CmdRegionUpdate CmdType = 12
	// CmdBatch packs client writes a leader took together into one entry
	// (packed.go), applied in order under its index as one step. Written
	// only while every server's member record says it reads log format
	// LogFormatPacked: a node that predates it stops on it.
	CmdBatch CmdType = 13
	// CmdEvictLeases evicts expired leases, each only if it is still the
	// lease the leader found expired (EvictLeasesBody). Written only while
	// every server reads log format LogFormatEvictLeases, in place of
	// CmdEvict: a node that predates it stops on it.
	CmdEvictLeases CmdType = 14

	// CmdIgnoreUnknown, set on a type byte, tells an older FSM that does not
	// know the command that skipping it is safe. Without it an unknown command
	// stops the node rather than silently diverging from its peers.
	CmdIgnoreUnknown CmdType = 0x80
)

func (t CmdType) String() string {
	if spec, ok := commands[t&^CmdIgnoreUnknown]; ok {
		return spec.name
	}
	if t == CmdBatch {
		return "batch"
	}
	return fmt.Sprintf("cmd(%d)", byte(t))
}

// Command body versions. Decoders accept every version they know; bump the
// version when a body changes shape and keep decoding the old one.
//
// Version 2 added the Replicated flag of RegisterBody, KeyBody and
// OverrideBody. A body without the flag encodes to the same bytes as in
// version 1, so it is still written as version 1: a cluster that replicates
// nothing from Eureka peers writes entries an older node can read.
const (
	bodyVersion1 = 1
	bodyVersion2 = 2
	bodyVersion  = bodyVersion2
)

// replicatedBody is implemented by the bodies that carry the Replicated flag.
type replicatedBody interface{ replicated() bool }

func (b *RegisterBody) replicated() bool { return b.Replicated }
func (b *KeyBody) replicated() bool      { return b.Replicated }
func (b *OverrideBody) replicated() bool { return b.Replicated }

// versionOf is the body version an entry for body is written with.
func versionOf(body any) byte {
	if rb, ok := body.(replicatedBody); ok && rb.replicated() {
		return bodyVersion2
	}
	return bodyVersion1
}

// headerLen is type byte + version byte + 8-byte timestamp.
const headerLen = 10

// ErrBadCommand is returned for a log entry that cannot be decoded.
var ErrBadCommand = errors.New("bad command")

// RegisterBody registers (or re-registers) one instance.
type RegisterBody struct {
	Instance *Instance `codec:"in"`
	// Replicated marks a registration an Eureka peer replicated to this
	// cluster: Eureka's replication rules apply (its overriddenstatus
	// replaces the stored override, no existing-lease status rule) and it
	// is never replicated out again.
	Replicated bool `codec:"rep,omitempty"`
}

// KeyBody names one instance.
type KeyBody struct {
	App string `codec:"a"`
	ID  string `codec:"id"`
	// Replicated marks a cancel an Eureka peer replicated to this cluster.
	Replicated bool `codec:"rep,omitempty"`
	// RegisteredAt, when set on a cancel, makes it apply only to the
	// record registered at that time (the leader's RegistrationTs): a
	// node cut off from the cluster sets it on a cancel it journals, so
	// that when the journal is replayed a registration of the instance
	// made elsewhere meanwhile stands. Status overrides and metadata
	// changes carry the same condition. An FSM that predates the field
	// applies the command as it is.
	RegisteredAt int64 `codec:"ra,omitempty"`
	// JournaledAt is when the node that journaled the command acknowledged
	// it (epoch ms). Only a registration made after that time stands
	// against the command; one made before it, which the cut-off node
	// could not see, is what the command now applies to, as it would have
	// in real-time order. 0: any other registration stands.
	JournaledAt int64 `codec:"ja,omitempty"`
}

// Renewal is one heartbeat inside a renew batch, stamped with the time the
// leader accepted it.
type Renewal struct {
	App string `codec:"a"`
	ID  string `codec:"id"`
	Ts  int64  `codec:"t"`
}

// RenewBatchBody carries every renewal the leader accepted in one interval.
type RenewBatchBody struct {
	Renewals []Renewal `codec:"r"`
}

// OverrideBody sets (CmdSetOverride) or deletes (CmdDeleteOverride) a status
// override. For a delete, Status is the status the instance is left in.
type OverrideBody struct {
	App                string `codec:"a"`
	ID                 string `codec:"id"`
	Status             string `codec:"s"`
	LastDirtyTimestamp int64  `codec:"ldt"`
	// Replicated marks a change an Eureka peer replicated to this cluster.
	Replicated bool `codec:"rep,omitempty"`
	// RegisteredAt and JournaledAt, as on KeyBody: a change journaled by a
	// node cut off does not apply to a registration made after it.
	RegisteredAt int64 `codec:"ra,omitempty"`
	JournaledAt  int64 `codec:"ja,omitempty"`
}

// MetadataBody merges entries into an instance's metadata.
type MetadataBody struct {
	App      string            `codec:"a"`
	ID       string            `codec:"id"`
	Metadata map[string]string `codec:"md"`
	// MaxEntries, when set, refuses the update (ErrBadCommand) if the
	// instance would hold more entries after it: the limit is on the
	// merged map, decided in log order, so updates racing on different
	// nodes cannot pass it together. An FSM that predates the field
	// applies the update as it is.
	MaxEntries int `codec:"max,omitempty"`
	// RegisteredAt and JournaledAt, as on KeyBody: a change journaled by a
	// node cut off does not apply to a registration made after it.
	RegisteredAt int64 `codec:"ra,omitempty"`
	JournaledAt  int64 `codec:"ja,omitempty"`
}

// EvictBody removes expired instances, whatever happened to them after
// the leader found them expired (see EvictLeasesBody).
type EvictBody struct {
	Keys []KeyBody `codec:"k"`
}

// EvictLeasesBody removes the instances whose leases the leader found
// expired, each only if nothing changed it since: not a renewal, a
// registration, nor any other write the log put between the leader's look
// and the eviction. The leader looks at the registry, then appends the
// eviction; a heartbeat that reaches the log in between renewed a live
// lease, and an eviction that applied regardless (CmdEvict) removed the
// instance its client had just kept alive, until its next heartbeat was
// answered 404 and it registered again. The FSM compares the state the
// leader saw with the state it holds, both from the log, so every node
// keeps the same leases.
type EvictLeasesBody struct {
	Leases []ExpiredLease `codec:"l"`
}

// ExpiredLease is an instance whose lease the leader found expired, with
// the lease as it found it: the record's last change (ModifyIndex) and
// last renewal.
type ExpiredLease struct {
	App         string `codec:"a"`
	ID          string `codec:"id"`
	ModifyIndex uint64 `codec:"mi"`
	RenewedAt   int64  `codec:"lr"`
}

// ExpiredLeaseOf is e's lease as the leader finds it expired.
func ExpiredLeaseOf(e *Entry) ExpiredLease {
	return ExpiredLease{App: e.App, ID: e.ID, ModifyIndex: e.ModifyIndex, RenewedAt: e.RenewedAt()}
}

// ChangedIn reports whether e, the registry's entry under l's key, changed
// after the leader found l expired: registered or updated again (its modify
// index moved) or renewed (its renewal time moved).
func (l ExpiredLease) ChangedIn(e *Entry) bool {
	return e.ModifyIndex != l.ModifyIndex || e.RenewedAt() != l.RenewedAt
}

// LeasesKept answers an eviction (CmdEvictLeases) that left some of its
// leases, because they changed after the leader found them expired. It is
// an answer, not a refusal: Evicted of them were evicted.
type LeasesKept struct {
	Evicted, Kept int
}

// Error says how many of the eviction's leases it evicted and kept.
func (k *LeasesKept) Error() string {
	return fmt.Sprintf("evicted %d leases; kept %d renewed or changed after they were found expired", k.Evicted, k.Kept)
}

// Member is a cluster member's addresses, kept in the FSM so that every node
// knows where to forward writes.
type Member struct {
	ID       string `codec:"id" json:"id"`
	RaftAddr string `codec:"r" json:"raft_addr"`
	HTTPAddr string `codec:"h" json:"http_addr"`
	// LogFormat is the newest log format the member's release reads
	// (LogFormat); 0 for a release that predates the field. A leader
	// writes what every server reads.
	LogFormat int `codec:"lf,omitempty" json:"log_format,omitempty"`
}

// ClusterIDBody names the cluster (CmdSetClusterID).
type ClusterIDBody struct {
	ID string `codec:"id"`
}

// ModeBody sets the cluster-wide consistency mode.
type ModeBody struct {
	Mode string `codec:"m"`
	// IfUnset makes it the bootstrap mode: applied only while no mode is
	// set, so that a first leader writing it cannot undo an operator's
	// change that reached the log first. An FSM that predates the field
	// applies it as it is.
	IfUnset bool `codec:"iu,omitempty"`
}

// Command is a decoded log entry.
type Command struct {
	Type    CmdType
	Version byte
	// Ts is the leader's clock (epoch ms) when it accepted the command; the
	// FSM uses it wherever it needs "now".
	Ts   int64
	Body any
}

var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.Canonical = true // sorted map keys: equal states encode to equal bytes
	h.WriteExt = true
	return h
}()

// Encode encodes a command body into a log entry with a zero timestamp; the
// leader stamps the time with Stamp just before it appends the entry.
func Encode(t CmdType, body any) ([]byte, error) {
	if rb, ok := body.(*RegisterBody); ok {
		return encodeRegister(t, rb), nil
	}
	return encodeByCodec(t, body)
}

// encodeByCodec is Encode by reflection, for every body without a direct
// encoder (and for the tests that check those against it).
func encodeByCodec(t CmdType, body any) ([]byte, error) {
	buf := encodeBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledEncodeBuffer {
			encodeBuffers.Put(buf)
		}
	}()
	buf.Reset()
	buf.Write([]byte{byte(t), versionOf(body), 0, 0, 0, 0, 0, 0, 0, 0})
	if err := codec.NewEncoder(buf, msgpackHandle).Encode(body); err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	return bytes.Clone(buf.Bytes()), nil
}

// encodeBuffers are Encode's buffers: an entry is encoded into a pooled
// one and copied out at its size. Grown from a fresh buffer, a
// registration's entry (mostly its metadata) left about three times its
// size behind as garbage.
var encodeBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledEncodeBuffer bounds the buffers kept: one grown by a rare
// large entry is left to the collector.
const maxPooledEncodeBuffer = 64 << 10

// Stamp writes the leader's timestamp into an encoded entry.
func Stamp(entry []byte, ts int64) error {
	if len(entry) < headerLen {
		return fmt.Errorf("%w: entry of %d bytes", ErrBadCommand, len(entry))
	}
	binary.BigEndian.PutUint64(entry[2:headerLen], uint64(ts))
	return nil
}

// TypeOf returns the type byte of an encoded entry.
func TypeOf(entry []byte) CmdType {
	if len(entry) == 0 {
		return CmdInvalid
	}
	return CmdType(entry[0])
}

// Decode decodes a log entry. Unknown types yield ErrBadCommand; callers check
// the CmdIgnoreUnknown bit themselves.
func Decode(entry []byte) (Command, error) { return decode(entry, false) }

// decodeApplied is Decode for FSM.Apply: the renewals of a batch are views
// of the entry's bytes instead of a copy of them (decodeRenewBatchBody).
// Every node applies every batch, a second of a fleet's heartbeats each.
func decodeApplied(entry []byte) (Command, error) { return decode(entry, true) }

func decode(entry []byte, view bool) (Command, error) {
	if len(entry) < headerLen {
		return Command{}, fmt.Errorf("%w: entry of %d bytes", ErrBadCommand, len(entry))
	}
	c := Command{
		Type:    CmdType(entry[0]),
		Version: entry[1],
		Ts:      int64(binary.BigEndian.Uint64(entry[2:headerLen])),
	}
	if c.Version != bodyVersion1 && c.Version != bodyVersion2 {
		return c, fmt.Errorf("%w: %s body version %d", ErrBadCommand, c.Type, c.Version)
	}
	spec, ok := commands[c.Type&^CmdIgnoreUnknown]
	if !ok {
		return c, fmt.Errorf("%w: unknown type %d", ErrBadCommand, entry[0])
	}
	switch c.Type &^ CmdIgnoreUnknown {
	case CmdRegister:
		if body, ok := decodeRegisterBody(entry[headerLen:]); ok {
			c.Body = body
			return c, nil
		}
	case CmdRenewBatch:
		if body, ok := decodeRenewBatchBody(entry[headerLen:], view); ok {
			c.Body = body
			return c, nil
		}
	}
	body := spec.newBody()
	if err := codec.NewDecoderBytes(entry[headerLen:], msgpackHandle).Decode(body); err != nil {
		return c, fmt.Errorf("%w: decode %s: %v", ErrBadCommand, c.Type, err)
	}
	if rb, ok := body.(*RegisterBody); ok && rb.Instance == nil {
		return c, fmt.Errorf("%w: register without instance", ErrBadCommand)
	}
	c.Body = body
	return c, nil
}

// InstanceKey returns the instance a command acts on, for commands that
// require it to exist (cancel, status override set and delete, metadata).
// The leader checks it before appending, so a write for an unknown instance
// answers 404 without reaching the log.
func InstanceKey(entry []byte) (app, id string, ok bool) {
	if !commands[TypeOf(entry)&^CmdIgnoreUnknown].onInstance {
		return "", "", false
	}
	switch TypeOf(entry) &^ CmdIgnoreUnknown {
	case CmdCancel, CmdSetOverride, CmdDeleteOverride, CmdMetadata:
	default:
		return "", "", false
	}
	cmd, err := Decode(entry)
	if err != nil {
		return "", "", false
	}
	switch b := cmd.Body.(type) {
	case *KeyBody:
		return b.App, b.ID, true
	case *OverrideBody:
		return b.App, b.ID, true
	case *MetadataBody:
		return b.App, b.ID, true
	}
	return "", "", false
}

// ModeOf returns the mode a set-mode entry sets, and false for any other
// entry (or one that does not decode). It decodes only set-mode entries, so
// scanning a long log for mode changes reads little more than type bytes.
func ModeOf(entry []byte) (string, bool) {
	if TypeOf(entry)&^CmdIgnoreUnknown != CmdSetMode {
		return "", false
	}
	cmd, err := Decode(entry)
	if err != nil {
		return "", false
	}
	body, ok := cmd.Body.(*ModeBody)
	if !ok {
		return "", false
	}
	return body.Mode, true
}
