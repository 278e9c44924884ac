// Package cluster owns the Raft node and everything that depends on being
// leader or not: bootstrap from an initial member list, joining and removing
// members, forwarding writes from followers to the leader (as encoded
// commands over an internal HTTP endpoint), and batching lease renewals into
// one log entry per interval; lease expiry, self-preservation, the AP/CP
// mode and the AP fallback (docs/design.md, "The path of a write").
//
// It imports fsm, store and opapi only; it must not import httpapi, cache or
// any tool package (bench, lab, e2e).
package cluster
