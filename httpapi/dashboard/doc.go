// Package dashboard is the page a node serves at / (httpapi mounts it): a
// server-rendered page in the spirit of Eureka's status page, with this
// node and the cluster (each other member probed for its state), the
// self-preservation EMERGENCY banner, the registered applications with
// their instances, the response cache, and trend charts of the node's
// recent history (trends.go samples it, trendchart.go draws inline SVG).
// It only reads (the registry through the node's Read) and reloads itself
// with a meta refresh; its template and stylesheet are embedded.
//
// It imports cache, cluster, fsm and nodeapi only; it must not import
// httpapi, which imports it.
package dashboard
