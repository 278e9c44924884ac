package peering

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
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
// lastDirtyTimestamp, status and override). An instance the cluster refuses
// as a bad command (its input limits, fsm.ErrBadCommand) is left out, as the
// cluster's Eureka API leaves out such an instance in a peer's batch; any
// other refusal stops the copy. It returns how many it wrote.
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
			if err := c.RegisterReplicated(ctx, in); errors.Is(err, fsm.ErrBadCommand) {
				continue
			} else if err != nil {
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
	// Instances the source listed, Registered of them the target recorded,
	// Failed of them it did not.
	Instances, Registered, Failed int
	// Failures says, for each failed instance, why (in the order the
	// answers came).
	Failures []ImportFailure
}

// ImportFailure is an instance the target did not record.
type ImportFailure struct {
	App, ID string
	// Reason is the target's answer: its status and message.
	Reason string
}

// DefaultImportParallel is how many registrations Import has in flight.
const DefaultImportParallel = 8

// Import copies every instance of the server at from into the heureka
// cluster at to (service URLs), each as a replicated registration: it goes
// through Raft there, keeping its lastDirtyTimestamp, status and override,
// and is not replicated out.
//
// Each instance is its own POST {to}/apps/{app} with the replication
// header, not an item of a /peerreplication/batch: a batch answers 200 for
// a register the target refused (eureka-server's semantics, which heureka
// keeps for its peers), so its item codes cannot say what was recorded,
// while a single register answers 204 only once the registration is
// committed, and 4xx or 5xx with the reason otherwise. Only 204 counts as
// registered. An error (the source unreadable, the target not answering)
// stops the import; the result then counts what was done so far. Importing
// again is safe: a record the target holds with a newer lastDirtyTimestamp
// is kept.
func Import(ctx context.Context, client *http.Client, from, to string, parallel int) (ImportResult, error) {
	var res ImportResult
	list, err := FetchApps(ctx, client, from)
	if err != nil {
		return res, err
	}
	res.Instances = len(list)
	if parallel <= 0 {
		parallel = DefaultImportParallel
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		in     *fsm.Instance
		reason string // why the target did not record it; "" when it did
		err    error  // no answer at all
	}
	work, answers := make(chan *fsm.Instance), make(chan answer)
	go func() {
		defer close(work)
		for _, in := range list {
			select {
			case work <- in:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range min(parallel, len(list)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for in := range work {
				reason, err := importOne(ctx, client, to, in)
				answers <- answer{in, reason, err}
			}
		}()
	}
	go func() { wg.Wait(); close(answers) }()
	var firstErr error
	for a := range answers {
		switch {
		case a.err != nil:
			if firstErr == nil {
				firstErr = a.err
				cancel() // the target does not answer: send no more
			}
		case a.reason == "":
			res.Registered++
		default:
			res.Failed++
			res.Failures = append(res.Failures, ImportFailure{App: a.in.App, ID: a.in.ID(), Reason: a.reason})
		}
	}
	if firstErr != nil {
		return res, fmt.Errorf("import stopped after %d of %d instances: %w", res.Registered+res.Failed, res.Instances, firstErr)
	}
	return res, nil
}

// importOne registers one instance at the service URL to. It returns the
// reason the target did not record it ("" when it answered 204), or an
// error when there was no answer.
func importOne(ctx context.Context, client *http.Client, to string, in *fsm.Instance) (string, error) {
	u := strings.TrimSuffix(to, "/") + "/apps/" + url.PathEscape(in.App)
	body := eureka.AppendInstanceDoc(nil, eureka.JSON, &fsm.Entry{App: in.App, ID: in.ID(), Instance: in})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("register %s/%s: %w", in.App, in.ID(), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(eureka.ReplicationHeader, "true")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("register %s/%s: %w", in.App, in.ID(), err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode == http.StatusNoContent {
		return "", nil
	}
	// heureka answers {"error": "..."}; another server may answer text.
	var e struct {
		Error string `json:"error"`
	}
	text := string(msg)
	if json.Unmarshal(msg, &e) == nil && e.Error != "" {
		text = e.Error
	}
	reason := resp.Status
	if t := strings.Join(strings.Fields(text), " "); t != "" {
		reason += ": " + t
	}
	return reason, nil
}
