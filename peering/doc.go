// Package peering makes a heureka cluster one more peer of an eureka-server
// ring (docs/migrate-from-eureka.md).
//
// Outbound, a Replicator replays the changes heureka's own clients make
// (registers, cancels, status changes, heartbeats) to the ring's servers
// through POST /peerreplication/batch, the way one eureka-server replicates
// to another: in batches, per peer, with retries and a bounded queue. It
// runs on the Raft leader only and is handed over with leadership: a new
// leader first replays the registry's recently-changed queue, so a change
// the previous leader had not sent yet is not lost. Changes a peer
// replicated to heureka are marked in the log and never replayed.
//
// Initial sync and import copy a peer's registry (GET /apps) into the
// cluster as replicated registrations, keeping each instance's
// lastDirtyTimestamp and status.
//
// It reads the cluster only through the narrow Cluster interface. It
// imports eureka (the codec), fsm and internal/runtime/collect only.
package peering
