// Package cluster owns the Raft node and everything that depends on being
// leader or not: bootstrap from an initial member list, joining and removing
// members, forwarding writes from followers to the leader (as encoded
// commands over the node-to-node HTTP of package nodeapi, whose Backend the
// node is and whose client it calls with), and batching lease renewals into
// log entries once per interval; lease expiry, self-preservation, the AP/CP
// mode and the AP fallback (docs/design.md, "The path of a write").
//
// It imports fsm, internal/runtime/tick, limits, nodeapi, opapi and store
// only; it must not import httpapi, cache or any tool package (bench, lab,
// e2e). It writes no HTTP status of
// its own: InternalHandler takes httpapi's table.
package cluster
