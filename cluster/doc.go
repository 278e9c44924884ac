// Package cluster owns the Raft node and everything that depends on being
// leader or not: bootstrap from an initial member list, joining and removing
// members, forwarding writes from followers to the leader (as encoded
// commands over an internal HTTP endpoint), and batching lease renewals into
// one log entry per interval.
package cluster
