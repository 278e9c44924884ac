package peering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/httpapi/eureka"
)

// FetchApps reads a server's whole registry (GET {serviceURL}/apps, JSON)
// and returns every instance it lists.
func FetchApps(ctx context.Context, client *http.Client, serviceURL string) ([]*fsm.Instance, error) {
	url := strings.TrimSuffix(serviceURL, "/") + "/apps"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch apps: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch apps from %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512<<20))
	if err != nil {
		return nil, fmt.Errorf("read apps from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch apps from %s: %s", url, resp.Status)
	}
	doc, err := eureka.DecodeApplications(body, eureka.JSON)
	if err != nil {
		return nil, fmt.Errorf("decode apps from %s: %w", url, err)
	}
	var out []*fsm.Instance
	for _, a := range doc.Applications {
		for _, e := range a.Instances {
			out = append(out, e.Instance)
		}
	}
	return out, nil
}

// SyncOnce copies the registry of the first peer that answers into the
// cluster: every instance the cluster lacks, or holds with an older
// lastDirtyTimestamp, is registered as replicated (keeping its
// lastDirtyTimestamp, status and override). It returns how many it wrote.
func SyncOnce(ctx context.Context, c Cluster, client *http.Client, peers []string) (int, error) {
	var errs []error
	for _, p := range peers {
		list, err := FetchApps(ctx, client, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n := 0
		for _, in := range list {
			if e := c.Get(in.App, in.ID()); e != nil && e.Instance.LastDirtyTimestamp >= in.LastDirtyTimestamp {
				continue
			}
			if err := c.RegisterReplicated(ctx, in); err != nil {
				return n, fmt.Errorf("copy %s/%s from %s: %w", in.App, in.ID(), p, err)
			}
			n++
		}
		return n, nil
	}
	return 0, fmt.Errorf("no peer answered: %w", errors.Join(errs...))
}

// InitialSync runs SyncOnce until it succeeds or timeout passes, then
// closes done (whether it succeeded or not: a ring that cannot be reached
// must not keep the cluster from serving). The caller holds reads on done.
// It compares against the cluster's registry only once caughtUp reports
// that this node holds every committed change: a restarted node must not
// take its partly replayed registry for the cluster's and copy instances
// the cluster already holds.
func InitialSync(c Cluster, client *http.Client, peers []string, timeout time.Duration, caughtUp func() bool, log hclog.Logger, done chan<- struct{}) {
	defer close(done)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	for !caughtUp() {
		select {
		case <-ctx.Done():
			log.Error("gave up waiting to catch up before copying the eureka peers' registry", "after", time.Since(start))
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	for {
		n, err := SyncOnce(ctx, c, client, peers)
		if err == nil {
			log.Info("copied the eureka peers' registry", "written", n, "after", time.Since(start))
			return
		}
		log.Warn("copying the eureka peers' registry failed; retrying", "error", err)
		select {
		case <-ctx.Done():
			log.Error("gave up copying the eureka peers' registry; serving without it", "after", time.Since(start))
			return
		case <-time.After(time.Second):
		}
	}
}

// ImportResult counts what Import did.
type ImportResult struct {
	Instances, Registered, Failed int
}

// Import copies every instance of the server at from into the heureka
// cluster at to (service URLs), as replicated registrations sent through
// to's /peerreplication/batch: each goes through Raft there, keeping its
// lastDirtyTimestamp, status and override.
func Import(ctx context.Context, client *http.Client, from, to string, batchSize int) (ImportResult, error) {
	var res ImportResult
	list, err := FetchApps(ctx, client, from)
	if err != nil {
		return res, err
	}
	res.Instances = len(list)
	if batchSize <= 0 {
		batchSize = DefaultConfig().BatchSize
	}
	action := eureka.ActionRegister
	for start := 0; start < len(list); start += batchSize {
		part := list[start:min(start+batchSize, len(list))]
		items := make([]eureka.ReplicationInstance, len(part))
		for i, in := range part {
			ldt := eureka.Millis(in.LastDirtyTimestamp)
			items[i] = eureka.ReplicationInstance{AppName: in.App, ID: in.ID(), LastDirtyTimestamp: &ldt, Action: &action,
				InstanceInfo: eureka.AppendInstance(nil, eureka.JSON, &fsm.Entry{App: in.App, ID: in.ID(), Instance: in})}
		}
		body, err := json.Marshal(eureka.ReplicationList{ReplicationList: items})
		if err != nil {
			return res, fmt.Errorf("encode import batch: %w", err)
		}
		resp, err := postBatch(ctx, client, batchURL(to), body)
		if err != nil {
			return res, fmt.Errorf("import batch at instance %d: %w", start, err)
		}
		for _, r := range resp.ResponseList {
			if r.StatusCode >= 200 && r.StatusCode < 300 {
				res.Registered++
			} else {
				res.Failed++
			}
		}
	}
	return res, nil
}
