package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/limits"
	"github.com/heureka-registry/heureka/peering"
)

// nodePeering adapts a node to peering.Cluster; with strict, it applies
// the input limits (--strict-input) to what it copies from a peer, as the
// Eureka API does to a peer's batch and the leader to what followers send.
type nodePeering struct {
	n      *cluster.Node
	strict bool
}

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
	if a.strict {
		if err := limits.CheckInstance(in); err != nil {
			return err
		}
	}
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
func startPeering(node *cluster.Node, strict bool, peers []string, syncTimeout time.Duration, synced chan struct{}, log hclog.Logger) *peering.Replicator {
	cfg := peering.DefaultConfig()
	cfg.Peers = peers
	c := nodePeering{n: node, strict: strict}
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

// importFailuresShown is how many refused instances import names.
const importFailuresShown = 20

// importCmd is `heureka import --from URL [--to URL]`. It exits 0 when
// every instance was recorded, 1 when one was not or the copy stopped (the
// summary goes to stdout only when the copy ran to its end), 2 on bad usage.
func importCmd(args []string, stdout, stderr io.Writer) int {
	const synopsis = "--from URL [--to URL] [--timeout D]"
	fs := newFlagSet("import")
	from := fs.String("from", "", "service URL of the eureka-server to copy (http://host:8761/eureka/)")
	to := fs.String("to", "http://127.0.0.1:8761/eureka/", "service URL of a heureka node")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if code, ok := parseCommand(fs, synopsis, args, stdout, stderr); !ok {
		return code
	}
	if *from == "" {
		fmt.Fprintf(stderr, "heureka import: --from is required (usage: heureka import %s)\n", synopsis)
		return 2
	}
	for _, u := range []struct{ name, url string }{{"--from", *from}, {"--to", *to}} {
		if err := checkOpsAddr(u.url); err != nil {
			fmt.Fprintf(stderr, "heureka import: %s %q: %v\n", u.name, redactedAddr(u.url), err)
			return 2
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := peering.Import(ctx, &http.Client{Timeout: time.Minute}, *from, *to, 0)
	for i, f := range res.Failures {
		if i == importFailuresShown {
			fmt.Fprintf(stderr, "heureka import: ... and %d more not registered\n", len(res.Failures)-i)
			break
		}
		fmt.Fprintf(stderr, "heureka import: %s/%s not registered: %s\n", f.App, f.ID, f.Reason)
	}
	if err != nil {
		fmt.Fprintf(stderr, "heureka import: %v (registered %d, failed %d)\n", err, res.Registered, res.Failed)
		return 1
	}
	fmt.Fprintf(stdout, "instances %d registered %d failed %d\n", res.Instances, res.Registered, res.Failed)
	if res.Failed > 0 {
		fmt.Fprintf(stderr, "heureka import: %d of %d instances not registered\n", res.Failed, res.Instances)
		return 1
	}
	return 0
}
