//go:build etcdclient

package bench

// EtcdClient reports whether this build can drive etcd (the etcd column of
// heureka bench). It is true only with the build tag etcdclient: the etcd
// Go client brings gRPC and zap, which the server binary operators deploy
// must not carry (docs/bench.md, "The etcd column").
const EtcdClient = true
