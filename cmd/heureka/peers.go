package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/peering"
)

// nodePeering adapts a node to peering.Cluster.
type nodePeering struct{ n *cluster.Node }

func (a nodePeering) Get(app, id string) *fsm.Entry {
	var e *fsm.Entry
	a.n.Read(func(r *fsm.Registry) { e = r.Get(app, id) })
	return e
}

func (a nodePeering) Recent() []fsm.DeltaView {
	var d []fsm.DeltaView
	a.n.Read(func(r *fsm.Registry) { d = r.Delta(0) })
	return d
}

func (a nodePeering) RegisterReplicated(ctx context.Context, in *fsm.Instance) error {
	entry, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: in, Replicated: true})
	if err != nil {
		return err
	}
	_, err = a.n.Apply(ctx, entry)
	return err
}

// startPeering joins the node to an eureka-server ring: it copies the
// ring's registry (closing synced when done, which opens the read gate)
// and replicates the cluster's own changes while this node leads.
func startPeering(node *cluster.Node, peers []string, syncTimeout time.Duration, synced chan struct{}, log hclog.Logger) *peering.Replicator {
	cfg := peering.DefaultConfig()
	cfg.Peers = peers
	c := nodePeering{node}
	r := peering.New(cfg, c, log)
	node.Observe(r.Changed)
	node.OnLocalRenew(r.Renewed)
	node.AddLeaderWork(r.Run)
	if err := prometheus.DefaultRegisterer.Register(r.Collector()); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			log.Warn("registering the peer replication metrics failed", "error", err)
		}
	}
	go peering.InitialSync(c, &http.Client{Timeout: 30 * time.Second}, peers, syncTimeout, node.CaughtUp, log.Named("peering"), synced)
	return r
}

// importCmd is `heureka import --from URL [--to URL]`.
func importCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "service URL of the eureka-server to copy (http://host:8761/eureka/)")
	to := fs.String("to", "http://127.0.0.1:8761/eureka/", "service URL of a heureka node")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *from == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: heureka import --from URL [--to URL] [--timeout D]")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := peering.Import(ctx, &http.Client{Timeout: time.Minute}, *from, *to, 0)
	fmt.Fprintf(stdout, "instances %d registered %d failed %d\n", res.Instances, res.Registered, res.Failed)
	if err != nil {
		fmt.Fprintf(stderr, "heureka import: %v\n", err)
		return 1
	}
	if res.Failed > 0 {
		return 1
	}
	return 0
}
