// Package opapi holds the wire types of heureka's operator API under /v1
// (docs/operations.md): the body of GET /v1/status and GET /v1/members. The
// server encodes them (cluster, cache and httpapi fill them in) and every
// client decodes the same types: the operator CLI, the system-test harness,
// heureka bench and heureka lab. One definition means a field cannot drift
// between the server and its readers.
//
// It owns only these types. It imports no heureka package (it is the
// bottom of the import graph, below fsm), and must import none, nor
// anything outside the standard library.
package opapi
