package lab

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/heureka-registry/heureka/faultproxy"
	"github.com/heureka-registry/heureka/internal/testkit/launch"
)

// cluster is the lab's set of processes (started by internal/testkit/launch) and
// their Raft proxy.
type cluster struct {
	lc    *launch.Cluster
	nodes []*launch.Node
	proxy *faultproxy.Proxy
}

// startCluster starts n nodes in mode with their Raft links through a proxy.
// It does not wait for them: the caller waits for a leader.
func startCluster(bin, dir string, n int, mode string) (*cluster, error) {
	c := &cluster{proxy: faultproxy.New()}
	c.lc = launch.New(launch.Spec{
		Binary:    bin,
		Dir:       dir,
		FastRaft:  true,
		RaftFront: c.proxy.Front,
		Args:      []string{"--mode", mode, "--response-cache-update-interval", "200ms", "--log-level", "warn"},
	})
	nodes, err := c.lc.Plan(n)
	c.nodes = nodes
	if err != nil {
		return c, err
	}
	for _, nd := range nodes {
		if err := nd.Start(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// stop ends every process (SIGTERM, then SIGKILL) and the proxy.
func (c *cluster) stop() {
	c.lc.Stop(5*time.Second, nil)
	c.proxy.Close()
}

// client carries the lab's workload.
var client = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

// leader returns the node every running node agrees leads, or nil.
func (c *cluster) leader() *launch.Node {
	nd, _ := c.lc.LeaderOnce(context.Background())
	return nd
}

// logTail is the last lines of a node's log on one line.
func logTail(nd *launch.Node) string {
	return strings.ReplaceAll(nd.LogTail(3), "\n", " | ")
}

var errTimeout = errors.New("timed out")

// waitFor polls cond every 50 ms until it holds, d passes (errTimeout) or
// ctx ends (its error).
func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return errTimeout
}

// sleep waits d, or until ctx ends (its error): an interrupted run stops
// in its current phase instead of playing the rest.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
