package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/httpapi"
	"github.com/heureka-registry/heureka/region"
)

// listFlag is a repeatable flag; one value may also hold several items
// separated by semicolons (how the environment variable lists them).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ";") }

func (l *listFlag) Set(v string) error {
	for _, item := range strings.Split(v, ";") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

// regionFlags are the remote-region settings of `heureka serve`.
type regionFlags struct {
	remotes       listFlag
	whitelist     listFlag
	noFallback    bool
	fetchInterval time.Duration

	// Derived by check.
	parsed []region.Remote
	read   httpapi.RegionConfig
}

func addRegionFlags(fs *flag.FlagSet, r *regionFlags) {
	fs.Var(&r.remotes, "remote-region", "a remote region to copy and serve to regions= reads, NAME=URL[,URL...] (repeatable; HEUREKA_REMOTE_REGIONS takes several separated by ';'); its URLs are the Eureka service URLs of heureka or eureka-server nodes (docs/regions.md)")
	fs.Var(&r.whitelist, "remote-region-whitelist", "REGION=APP[,APP...] or global=APP[,APP...]: the applications of a remote region regions= reads merge (repeatable; a region's list replaces the global one; none: every application)")
	fs.BoolVar(&r.noFallback, "remote-region-no-fallback", false, "GET /apps/{app} answers 404 when the local region has no instance of the application, instead of the first remote region's (eureka-server's disable-transparent-fallback-to-other-region)")
	fs.DurationVar(&r.fetchInterval, "remote-region-fetch-interval", 30*time.Second, "how often an eureka-server remote region's delta is fetched (heureka regions are followed by blocking queries)")
}

// envRegions reads HEUREKA_REMOTE_REGIONS (several regions separated by
// ';') when no --remote-region was given.
func (r *regionFlags) envRegions(given map[string]bool, env func(string) string) {
	if v := env("HEUREKA_REMOTE_REGIONS"); v != "" && !given["remote-region"] && len(r.remotes) == 0 {
		_ = r.remotes.Set(v)
	}
}

func (r *regionFlags) check() error {
	remotes, err := region.ParseRemotes(r.remotes)
	if err != nil {
		return fmt.Errorf("--remote-region: %w", err)
	}
	r.parsed = remotes
	r.read = httpapi.RegionConfig{NoFallback: r.noFallback}
	for _, rm := range remotes {
		r.read.Names = append(r.read.Names, rm.Name)
	}
	for _, w := range r.whitelist {
		name, apps, ok := strings.Cut(w, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		if !ok || name == "" {
			return fmt.Errorf("--remote-region-whitelist %q: want REGION=APP[,APP...]", w)
		}
		if name != "global" && !containsRegion(remotes, name) {
			return fmt.Errorf("--remote-region-whitelist %q: no --remote-region %s", w, name)
		}
		if r.read.Whitelist == nil {
			r.read.Whitelist = map[string][]string{}
		}
		list := []string{}
		for _, a := range strings.Split(apps, ",") {
			if a = strings.TrimSpace(a); a != "" {
				list = append(list, strings.ToUpper(a))
			}
		}
		r.read.Whitelist[name] = append(r.read.Whitelist[name], list...)
	}
	if r.fetchInterval < time.Second {
		return fmt.Errorf("--remote-region-fetch-interval %v: must be at least 1s", r.fetchInterval)
	}
	return nil
}

func containsRegion(rs []region.Remote, name string) bool {
	for _, r := range rs {
		if r.Name == name {
			return true
		}
	}
	return false
}

// nodeRegions adapts a node to region.Cluster.
type nodeRegions struct{ n *cluster.Node }

func (a nodeRegions) ReadRegion(name string, fn func(fsm.RemoteRegion, bool)) {
	a.n.Read(func(r *fsm.Registry) { fn(r.RemoteRegion(name)) })
}

func (a nodeRegions) ApplyRegion(ctx context.Context, b *fsm.RegionUpdateBody) error {
	entry, err := fsm.Encode(fsm.CmdRegionUpdate|fsm.CmdIgnoreUnknown, b)
	if err != nil {
		return err
	}
	_, err = a.n.ApplyCommitted(ctx, entry)
	return err
}

// startRegions follows the remote regions while the node leads.
func startRegions(node *cluster.Node, r *regionFlags, log hclog.Logger) {
	if len(r.parsed) == 0 {
		return
	}
	cfg := region.DefaultConfig()
	cfg.Remotes = r.parsed
	cfg.FetchInterval = r.fetchInterval
	s := region.New(cfg, nodeRegions{node}, log)
	node.AddLeaderWork(s.Run)
	if err := prometheus.DefaultRegisterer.Register(s.Collector(node.Read)); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			log.Warn("registering the remote region metrics failed", "error", err)
		}
	}
}
