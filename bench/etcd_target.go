package bench

// EtcdTarget is an etcd cluster to drive with the same workload.
type EtcdTarget struct {
	// Endpoints are the members' client URLs.
	Endpoints []string
	// PIDs, parallel to Endpoints, when known.
	PIDs []int
	// Settings describes how the members run, for the table.
	Settings string
}
