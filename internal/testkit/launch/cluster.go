package launch

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// FastRaftArgs are the Raft timings test clusters get, so that elections
// take well under a second.
var FastRaftArgs = []string{
	"--raft-heartbeat-timeout", "500ms",
	"--raft-election-timeout", "500ms",
	"--raft-leader-lease-timeout", "250ms",
}

// Spec describes a local cluster of `heureka serve` processes.
type Spec struct {
	// Binary is the heureka binary.
	Binary string
	// Dir holds the nodes' data directories (Dir/nK) and logs (Dir/nK.log).
	Dir string
	// Args are added to every node's arguments, after the addresses, the
	// cluster arguments and (with FastRaft) FastRaftArgs, so they win.
	Args []string
	// NodeArgs, if set, returns further arguments for the node with the
	// given id; they come last. It is called whenever a node is planned.
	NodeArgs func(id string) []string
	// FastRaft adds FastRaftArgs.
	FastRaft bool
	// RaftFront, if set, is called with each initial node's id and real
	// Raft address and returns the address the node advertises instead (a
	// faultproxy front): the initial cluster lists the fronts.
	RaftFront func(id, realAddr string) (string, error)
	// Env is added to each node's environment; inherited HEUREKA_*
	// variables are dropped, so a shell cannot change what a node runs.
	Env []string
	// ClientTLS, if set, makes status polls (and BaseURL) use HTTPS with
	// this configuration.
	ClientTLS *tls.Config
	// Credentials, if set ("user:password"), go into every node's BaseURL
	// as user info, which Go's HTTP client sends as basic auth.
	Credentials string
}

// Cluster is a set of nodes planned from one Spec.
type Cluster struct {
	Spec Spec

	mu    sync.Mutex
	nodes []*Node
}

// New returns an empty cluster for spec; Plan, NewNode and Join add nodes.
func New(spec Spec) *Cluster { return &Cluster{Spec: spec} }

// Plan adds n nodes n1..nN that bootstrap together from one
// --initial-cluster list (n=1 lists only itself) and returns them; nothing
// is started yet.
func (c *Cluster) Plan(n int) ([]*Node, error) {
	if n < 1 {
		return nil, fmt.Errorf("plan a cluster of %d nodes", n)
	}
	members := make([]string, 0, n)
	fronts := make([]string, 0, n)
	var nodes []*Node
	for i := 1; i <= n; i++ {
		nd, err := c.newNode(fmt.Sprintf("n%d", i))
		if err != nil {
			return nil, err
		}
		adv := nd.RaftAddr
		if c.Spec.RaftFront != nil {
			if adv, err = c.Spec.RaftFront(nd.ID, nd.RaftAddr); err != nil {
				return nil, fmt.Errorf("raft front of %s: %w", nd.ID, err)
			}
		}
		fronts = append(fronts, adv)
		members = append(members, fmt.Sprintf("%s=%s@%s", nd.ID, adv, nd.HTTPAddr))
		nodes = append(nodes, nd)
	}
	initial := strings.Join(members, ",")
	for i, nd := range nodes {
		clusterArgs := []string{"--initial-cluster", initial}
		if c.Spec.RaftFront != nil {
			clusterArgs = append(clusterArgs, "--raft-advertise", fronts[i])
		}
		nd.Argv = c.ServeArgs(nd, clusterArgs...)
	}
	return nodes, nil
}

// Start plans n nodes, starts them and waits up to ready for each to answer
// GET /v1/status. It does not wait for a leader. On an error the cluster
// returned holds the nodes started so far: stop them with Stop.
func Start(spec Spec, n int, ready time.Duration) (*Cluster, error) {
	c := New(spec)
	if _, err := c.Plan(n); err != nil {
		return c, err
	}
	return c, c.StartAll(ready)
}

// StartAll starts every node that is not running and waits up to ready for
// each to answer GET /v1/status.
func (c *Cluster) StartAll(ready time.Duration) error {
	nodes := c.Nodes()
	for _, nd := range nodes {
		if !nd.Running() {
			if err := nd.Start(); err != nil {
				return err
			}
		}
	}
	for _, nd := range nodes {
		if err := nd.WaitReady(ready); err != nil {
			return err
		}
	}
	return nil
}

// NewNode allocates ports, a data directory and a log for one more node and
// adds it to the cluster with the fixed arguments only (no --initial-cluster
// or --join): set Argv (see ServeArgs) before starting it.
func (c *Cluster) NewNode(id string) (*Node, error) {
	nd, err := c.newNode(id)
	if err != nil {
		return nil, err
	}
	nd.Argv = c.ServeArgs(nd)
	return nd, nil
}

func (c *Cluster) newNode(id string) (*Node, error) {
	httpAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	raftAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	nd := &Node{
		Proc: &Proc{
			Name:    id,
			LogPath: filepath.Join(c.Spec.Dir, id+".log"),
			Bin:     c.Spec.Binary,
			Env:     Env(c.Spec.Env, "HEUREKA_"),
		},
		ID:          id,
		HTTPAddr:    httpAddr,
		RaftAddr:    raftAddr,
		DataDir:     filepath.Join(c.Spec.Dir, id),
		credentials: c.Spec.Credentials,
		clientTLS:   c.Spec.ClientTLS,
	}
	if c.Spec.ClientTLS != nil {
		nd.client = newStatusClient(c.Spec.ClientTLS)
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, nd)
	c.mu.Unlock()
	return nd, nil
}

// ServeArgs is the `heureka serve` argument list of nd: its addresses and
// data directory, clusterArgs (--initial-cluster or --join ...), FastRaftArgs
// with Spec.FastRaft, Spec.Args and Spec.NodeArgs.
func (c *Cluster) ServeArgs(nd *Node, clusterArgs ...string) []string {
	args := []string{"serve",
		"--node-id", nd.ID,
		"--http-addr", nd.HTTPAddr,
		"--raft-addr", nd.RaftAddr,
		"--data-dir", nd.DataDir,
	}
	args = append(args, clusterArgs...)
	if c.Spec.FastRaft {
		args = append(args, FastRaftArgs...)
	}
	args = append(args, c.Spec.Args...)
	if c.Spec.NodeArgs != nil {
		args = append(args, c.Spec.NodeArgs(nd.ID)...)
	}
	return args
}

// Join starts one more node with the given id that joins through
// `--join joinHTTPAddr` (the HTTP address of any member) and waits up to
// ready until it answers GET /v1/status. It does not wait for the join.
func (c *Cluster) Join(id, joinHTTPAddr string, ready time.Duration) (*Node, error) {
	nd, err := c.newNode(id)
	if err != nil {
		return nil, err
	}
	nd.Argv = c.ServeArgs(nd, "--join", joinHTTPAddr)
	if err := nd.Start(); err != nil {
		return nd, err
	}
	return nd, nd.WaitReady(ready)
}

// Nodes returns the nodes in the order they were planned.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Live returns the nodes whose process is running and not paused.
func (c *Cluster) Live() []*Node {
	var live []*Node
	for _, nd := range c.Nodes() {
		if nd.Running() && !nd.Paused() {
			live = append(live, nd)
		}
	}
	return live
}

// LeaderOnce asks the live nodes once (see Leader) and returns the leader
// they agree on, or nil and what each node said.
func (c *Cluster) LeaderOnce(ctx context.Context) (*Node, string) {
	live := c.Live()
	i, desc := Leader(ctx, live)
	if i < 0 {
		return nil, desc
	}
	return live[i], desc
}

// WaitLeader polls the live nodes every 50 ms until they agree on one
// leader (see Leader) and returns it, or an error naming what each node
// last said once timeout passes or ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context, timeout time.Duration) (*Node, error) {
	deadline := time.Now().Add(timeout)
	for {
		nd, desc := c.LeaderOnce(ctx)
		if nd != nil {
			return nd, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no agreed leader after %v: %s", timeout, desc)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no agreed leader: %w: %s", ctx.Err(), desc)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops every running node concurrently (SIGTERM, SIGKILL after
// grace) and calls report, if set, with each one's outcome.
func (c *Cluster) Stop(grace time.Duration, report func(nd *Node, code int, killed bool)) {
	var wg sync.WaitGroup
	for _, nd := range c.Nodes() {
		if !nd.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, killed := nd.Stop(grace)
			if report != nil {
				report(nd, code, killed)
			}
		}()
	}
	wg.Wait()
}

// Leader asks each node once for its status and returns the index of the
// node that every one of them agrees leads (it says it is Leader, and all
// name it), or -1; desc says what each node said.
func Leader(ctx context.Context, nodes []*Node) (int, string) {
	if len(nodes) == 0 {
		return -1, "no live nodes"
	}
	var (
		leaders []int
		named   = map[string]bool{}
		parts   []string
		ok      = true
	)
	for i, nd := range nodes {
		st, _, err := nd.Status(ctx)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", nd.ID, err))
			ok = false
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: state=%s leader=%q term=%d", nd.ID, st.State, st.Leader, st.Term))
		if st.State == "Leader" {
			leaders = append(leaders, i)
		}
		named[st.Leader] = true
	}
	desc := strings.Join(parts, "; ")
	if !ok || len(leaders) != 1 || len(named) != 1 || !named[nodes[leaders[0]].ID] {
		return -1, desc
	}
	return leaders[0], desc
}
