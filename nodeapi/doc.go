// Package nodeapi is heureka's node-to-node HTTP: the endpoints under
// /internal/v1/ that one node serves to the others (a forwarded write or
// batch of writes, a batch of renewals, the read index, the lease status,
// join and remove, snapshot save and restore), the client a node calls them
// with, the cluster secret on both sides, and the wire codes errors travel
// as (docs/design.md, "The path of a write").
//
// It owns the wire only. The work behind each endpoint is a Backend's (the
// cluster's Raft node); the error values the codes stand for are given by
// the caller (Codes), and so is the HTTP status of an error reply (httpapi's
// one table of statuses, handed to Handler).
//
// It imports fsm (forwarded writes are encoded fsm commands, checked here
// before they reach the leader) and opapi only; it must not import cluster
// (which imports it), store, cache or httpapi.
package nodeapi
