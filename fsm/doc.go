// Package fsm holds heureka's registry state and the Raft state machine
// around it.
//
// Registry is the pure model: applications → instances → leases, the delta
// queue, the members' addresses, the consistency mode and the cluster's
// identity. Every mutation
// takes the Raft index and the leader's timestamp from the command, so
// applying the same log always yields the same state, byte for byte.
//
// FSM adapts Registry to raft.FSM. A log entry is a type byte, a body
// version byte, the leader's 8-byte timestamp and a msgpack body (see
// command.go); snapshots are a magic header, a format byte and the msgpack
// encoding of State. After each apply FSM publishes a Change naming the
// applications and VIPs touched, so caches invalidate exactly those keys.
//
// fsm owns the registry state and nothing else. It imports no heureka
// package, and must import none; Apply must touch no clock, random source,
// file or network (docs/design.md, "Invariants").
package fsm
