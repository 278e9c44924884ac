// Package limits holds the input limits on application names, instance ids,
// VIP addresses and metadata (--strict-input, docs/security.md, "Input
// limits") and the check of a decoded log command against them. The HTTP
// edge applies them to what clients send (httpapi), and the leader applies
// them again to every command a peer hands it over the node-to-node API
// (cluster), so a command cannot skip them by arriving from a follower.
//
// It imports fsm only; it knows nothing of HTTP or of the cluster.
package limits
