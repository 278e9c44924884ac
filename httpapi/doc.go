// Package httpapi is heureka's HTTP surface: the Eureka REST API under
// /eureka, the operator API under /v1, and it mounts the node-to-node
// endpoints (package nodeapi, through the cluster) under /internal/v1.
// Handlers are thin: decode, call the cluster or read a view, encode.
// errorStatus in errors.go is the one place errors become status codes, for
// the node-to-node replies too.
//
// It imports cache, cluster, eureka, fsm, httpapi/dashboard (the page at
// /), internal/runtime/collect, internal/runtime/tick, limits, nodeapi and
// opapi; it must not import store (the data directory is cluster's) or any
// tool package (bench, lab, e2e), and nothing below it may import it.
package httpapi
