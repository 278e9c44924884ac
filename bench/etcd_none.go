//go:build !etcdclient

package bench

import (
	"context"
	"errors"
)

// EtcdClient reports whether this build can drive etcd (the etcd column of
// heureka bench). It is true only with the build tag etcdclient: the etcd
// Go client brings gRPC and zap, which the server binary operators deploy
// must not carry (docs/bench.md, "The etcd column").
const EtcdClient = false

// errNoEtcdClient says how to get a build that has the etcd column.
var errNoEtcdClient = errors.New("this heureka was built without the etcd client: build it with `go build -tags etcdclient ./cmd/heureka` (or `make build-bench`)")

func (s *Suite) etcdSteps(context.Context, *EtcdTarget, *System) ([]step, func(), error) {
	return nil, nil, errNoEtcdClient
}

// StartEtcd needs the etcd client to see the cluster come up; without it
// it refuses.
func StartEtcd(context.Context, string, int, string) (*Local, error) {
	return nil, errNoEtcdClient
}

func etcdVersion(string) string { return "" }
