// Package httpapi is heureka's HTTP surface: the Eureka REST API under
// /eureka, the operator API under /v1, and the node-to-node endpoints under
// /internal/v1. Handlers are thin: decode, call the cluster or read a view,
// encode. errorStatus in errors.go is the one place errors become status
// codes.
package httpapi
