package region

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// Kinds of remote region, as fsm.RegionStatus.Kind names them.
const (
	KindHeureka = "heureka"
	KindEureka  = "eureka"
)

// indexHeader is the header in which a heureka node gives the version of a
// document it serves (its blocking-query index). Its presence is how a
// remote region is known to be heureka.
const indexHeader = "X-Heureka-Index"

// deltaSeqHeader is the header in which a heureka node gives the change
// sequence number an ?after= delta covers.
const deltaSeqHeader = "X-Heureka-Delta-Seq"

// maxDocument bounds a remote region's document.
const maxDocument = 1 << 30

// Remote is one remote region: its name and its Eureka service URLs
// (http://host:8761/eureka/), tried in order.
type Remote struct {
	Name string
	URLs []string
}

// ParseRemote parses NAME=URL[,URL...] (the --remote-region flag).
func ParseRemote(s string) (Remote, error) {
	name, urls, ok := strings.Cut(s, "=")
	name = strings.ToLower(strings.TrimSpace(name))
	if !ok || name == "" || urls == "" {
		return Remote{}, fmt.Errorf("remote region %q: want NAME=URL[,URL...]", s)
	}
	if strings.ContainsAny(name, ", /") {
		return Remote{}, fmt.Errorf("remote region name %q: no commas, spaces or slashes", name)
	}
	r := Remote{Name: name}
	for _, u := range strings.Split(urls, ",") {
		u = strings.TrimSpace(u)
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return Remote{}, fmt.Errorf("remote region %s: URL %q: want http(s)://host:port/eureka/", name, u)
		}
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		r.URLs = append(r.URLs, u)
	}
	return r, nil
}

// ParseRemotes parses a list of NAME=URL[,URL...] values; a region named
// twice is an error.
func ParseRemotes(values []string) ([]Remote, error) {
	var out []Remote
	seen := map[string]bool{}
	for _, v := range values {
		r, err := ParseRemote(v)
		if err != nil {
			return nil, err
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("remote region %s given twice", r.Name)
		}
		seen[r.Name] = true
		out = append(out, r)
	}
	return out, nil
}

// Config tunes the sync loops.
type Config struct {
	Remotes []Remote
	// FetchInterval is how often an eureka-server region's delta is
	// fetched (eureka-server's remoteRegionRegistryFetchInterval, 30 s),
	// and the longest wait between retries of an unreachable region.
	FetchInterval time.Duration
	// BlockingWait is how long one blocking query on a heureka region
	// waits for a change.
	BlockingWait time.Duration
	// StatusEvery is how often the copy's status is confirmed through the
	// log while nothing changes (it moves SyncedAt).
	StatusEvery time.Duration
	// RetryDelay is the first wait after a failed fetch; it doubles up to
	// FetchInterval.
	RetryDelay time.Duration
	// Timeout bounds one request (beyond BlockingWait).
	Timeout time.Duration
	// Chunk bounds the records of one log entry; a larger pass is staged.
	Chunk int
}

// DefaultConfig returns the settings heureka serves with.
func DefaultConfig() Config {
	return Config{FetchInterval: 30 * time.Second, BlockingWait: 10 * time.Second, StatusEvery: 10 * time.Second,
		RetryDelay: time.Second, Timeout: 30 * time.Second, Chunk: 500}
}

// Cluster is what the syncer needs from the node it runs on.
type Cluster interface {
	// ReadRegion runs fn with the copy of region name (ok false when the
	// registry holds none yet) under the registry's read lock.
	ReadRegion(name string, fn func(rr fsm.RemoteRegion, ok bool))
	// ApplyRegion writes an update through the Raft log; it fails rather
	// than journal it when the cluster has no quorum.
	ApplyRegion(ctx context.Context, b *fsm.RegionUpdateBody) error
}

// Syncer follows the remote regions while its node leads.
type Syncer struct {
	cfg    Config
	c      Cluster
	client *http.Client
	log    hclog.Logger
	stats  map[string]*counters
}

// counters are one region's sync counters (this node's, while it leads).
type counters struct {
	fetches, failures, reconciles, writes, records atomic.Uint64
}

// Stats are one region's sync counters on this node.
type Stats struct {
	Fetches    uint64 `json:"fetches"`
	Failures   uint64 `json:"failures"`
	Reconciles uint64 `json:"reconciles"`
	Writes     uint64 `json:"writes"`
	Records    uint64 `json:"records"`
}

// New returns a syncer of cfg.Remotes on c.
func New(cfg Config, c Cluster, log hclog.Logger) *Syncer {
	d := DefaultConfig()
	cfg.FetchInterval = orDefault(cfg.FetchInterval, d.FetchInterval)
	cfg.BlockingWait = orDefault(cfg.BlockingWait, d.BlockingWait)
	cfg.StatusEvery = orDefault(cfg.StatusEvery, d.StatusEvery)
	cfg.RetryDelay = orDefault(cfg.RetryDelay, d.RetryDelay)
	cfg.Timeout = orDefault(cfg.Timeout, d.Timeout)
	cfg.Chunk = orDefault(cfg.Chunk, d.Chunk)
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Syncer{cfg: cfg, c: c, log: log.Named("region"), stats: map[string]*counters{},
		client: &http.Client{Timeout: cfg.Timeout + cfg.BlockingWait}}
	for _, r := range cfg.Remotes {
		s.stats[r.Name] = &counters{}
	}
	return s
}

// orDefault is v, or d when v is not positive (not set).
func orDefault[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// Stats returns each region's counters.
func (s *Syncer) Stats() map[string]Stats {
	out := make(map[string]Stats, len(s.stats))
	for name, c := range s.stats {
		out[name] = Stats{Fetches: c.fetches.Load(), Failures: c.failures.Load(), Reconciles: c.reconciles.Load(),
			Writes: c.writes.Load(), Records: c.records.Load()}
	}
	return out
}

// Run follows every region until stop closes (the node's leader work).
func (s *Syncer) Run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range s.cfg.Remotes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.follow(ctx, r)
		}()
	}
	wg.Wait()
}

// follower is one region's sync state while this node leads.
type follower struct {
	s     *Syncer
	r     Remote
	stats *counters
	// needFull asks for a full fetch next (at the start, after a failure,
	// after a reconcile hash mismatch).
	needFull bool
	kind     string
	// index is the heureka region's delta version to wait past.
	index uint64
	// seq is the heureka region's change sequence number the copy holds
	// every change up to (seqOK: the region answers ?after=, so only the
	// changes after seq are read).
	seq   uint64
	seqOK bool
	// noDelta: the region refuses its delta (an eureka-server with
	// disable-delta), so every fetch is a full one.
	noDelta bool
	// url is the index in r.URLs of the URL that answered last.
	url  int
	pass uint64
	// status is the status last written (or read at the start).
	status fsm.RegionStatus
	known  bool
}

// localError is a write this node's log refused: the region is not to
// blame, so its status is left alone.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

func (s *Syncer) follow(ctx context.Context, r Remote) {
	f := &follower{s: s, r: r, stats: s.stats[r.Name], needFull: true, pass: uint64(time.Now().UnixNano())}
	s.c.ReadRegion(r.Name, func(rr fsm.RemoteRegion, ok bool) { f.status, f.known = rr.Status, ok })
	f.kind = f.status.Kind
	delay := s.cfg.RetryDelay
	for ctx.Err() == nil {
		err := f.step(ctx)
		if err == nil {
			delay = s.cfg.RetryDelay
			continue
		}
		if ctx.Err() != nil {
			return
		}
		f.needFull = true
		var local *localError
		if errors.As(err, &local) {
			s.log.Debug("writing the copy of a remote region failed: trying again", "region", r.Name, "error", err)
		} else {
			f.stats.failures.Add(1)
			if werr := f.unreachable(ctx, err); werr != nil && ctx.Err() == nil {
				s.log.Debug("recording an unreachable region failed", "region", r.Name, "error", werr)
			}
		}
		if !sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, s.cfg.FetchInterval)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// step runs one fetch and writes what it found.
func (f *follower) step(ctx context.Context) error {
	if f.needFull {
		return f.full(ctx)
	}
	if f.kind != KindHeureka && !sleep(ctx, f.s.cfg.FetchInterval) {
		return ctx.Err()
	}
	if f.noDelta {
		return f.full(ctx) // the region serves no delta: copy it whole each time
	}
	err := f.delta(ctx)
	if errors.Is(err, errRefused) && f.kind == KindEureka {
		// An eureka-server with its delta off (disable-delta) answers it
		// 403; its own remote regions then fetch the whole registry.
		f.noDelta = true
		return f.full(ctx)
	}
	return err
}

// latest asks for the changes after the largest sequence number: a heureka
// region answers with none and its latest sequence number, where the copy
// about to be taken starts. Anything else answers without one.
const latest = "after=18446744073709551615"

// full copies the whole registry and writes the difference from the copy.
// Of a heureka region it first takes the position in its change queue, so
// the changes read after the copy cover everything the copy may lack.
func (f *follower) full(ctx context.Context) error {
	var base answer
	if f.kind != KindEureka {
		// A server that refuses it (an eureka-server with its delta off)
		// is followed by full fetches' differences all the same.
		base, _ = f.get(ctx, "apps/delta", latest)
	}
	a, err := f.get(ctx, "apps", "")
	if err != nil {
		return err
	}
	have := f.snapshot()
	var puts []*fsm.Entry
	var dels []fsm.KeyBody
	seen := make(map[[2]string]bool, len(have))
	for _, app := range a.doc.Applications {
		for _, e := range app.Instances {
			k := [2]string{e.App, e.ID}
			if seen[k] {
				continue
			}
			seen[k] = true
			if !fsm.SameRecord(have[k], e) {
				puts = append(puts, e)
			}
		}
	}
	for k := range have {
		if !seen[k] {
			dels = append(dels, fsm.KeyBody{App: k[0], ID: k[1]})
		}
	}
	f.kind, f.index = a.kind, a.index
	f.seq, f.seqOK = base.seq, base.hasSeq && a.kind == KindHeureka
	if err := f.write(ctx, puts, dels, f.synced(a.src, true)); err != nil {
		return err
	}
	f.needFull = false
	f.s.log.Debug("copied remote region", "region", f.r.Name, "kind", a.kind, "from", a.src,
		"instances", len(seen), "changed", len(puts), "removed", len(dels))
	return nil
}

// delta applies the region's changes: of a heureka region those after the
// last sequence number read, once one comes (a blocking query); of an
// eureka-server its recently-changed queue.
func (f *follower) delta(ctx context.Context) error {
	query := ""
	if f.kind == KindHeureka {
		query = "index=" + strconv.FormatUint(f.index, 10) + "&wait=" + f.s.cfg.BlockingWait.String()
		if f.seqOK {
			query += "&after=" + strconv.FormatUint(f.seq, 10)
		}
	}
	a, err := f.get(ctx, "apps/delta", query)
	if errors.Is(err, errGone) {
		f.needFull = true // changes after f.seq aged out there
		return nil
	}
	if err != nil {
		return err
	}
	if a.kind != f.kind {
		f.needFull = true // the region was replaced by another kind of server
		return nil
	}
	f.index = a.index
	if f.seqOK && !a.hasSeq {
		f.seqOK = false // a heureka without ?after=: its whole queue came
	}
	// Only the records the delta names are looked up, and the copy's
	// status counts are moved along: a change costs its own size, not the
	// region's.
	cur := map[[2]string]*fsm.Entry{}
	counts := map[string]int{}
	f.s.c.ReadRegion(f.r.Name, func(rr fsm.RemoteRegion, ok bool) {
		if !ok {
			return
		}
		counts = rr.Copy.StatusCounts()
		for _, app := range a.doc.Applications {
			for _, e := range app.Instances {
				cur[[2]string{e.App, e.ID}] = rr.Copy.Get(e.App, e.ID)
			}
		}
	})
	// An instance may come more than once (eureka-server's queue keeps
	// every change): the last one decides, and each instance is written
	// once, so that a put and a delete of one instance in one pass cannot
	// be applied in the wrong order.
	var order [][2]string
	final := map[[2]string]bool{} // key → deleted
	for _, app := range a.doc.Applications {
		for _, e := range app.Instances {
			k := [2]string{e.App, e.ID}
			old := cur[k]
			switch {
			case e.ActionType == fsm.ActionDeleted:
				if old == nil {
					continue
				}
				counts[old.Instance.Status]--
				cur[k] = nil
			case !fsm.SameRecord(old, e):
				if old != nil {
					counts[old.Instance.Status]--
				}
				counts[e.Instance.Status]++
				cur[k] = e
			default:
				continue
			}
			if _, seen := final[k]; !seen {
				order = append(order, k)
			}
			final[k] = cur[k] == nil
		}
	}
	var puts []*fsm.Entry
	var dels []fsm.KeyBody
	for _, k := range order {
		if final[k] {
			dels = append(dels, fsm.KeyBody{App: k[0], ID: k[1]})
		} else {
			puts = append(puts, cur[k])
		}
	}
	// The copy as it will be after this delta must hash like the region.
	if got := fsm.HashCode(counts); a.doc.AppsHashCode != "" && got != a.doc.AppsHashCode {
		f.stats.reconciles.Add(1)
		f.s.log.Debug("remote region hash differs after a delta: fetching it whole", "region", f.r.Name,
			"copy", got, "region_hash", a.doc.AppsHashCode)
		f.needFull = true
		return nil
	}
	if len(puts)+len(dels) > 0 || !f.status.Reachable || f.status.Source != a.src ||
		time.Since(time.UnixMilli(f.status.SyncedAt)) >= f.s.cfg.StatusEvery {
		if err := f.write(ctx, puts, dels, f.synced(a.src, f.status.Loaded)); err != nil {
			return err
		}
	}
	if a.hasSeq {
		f.seq = a.seq
	}
	return nil
}

// snapshot returns the copy's records by key (entries are immutable, so
// they are compared outside the registry's lock).
func (f *follower) snapshot() map[[2]string]*fsm.Entry {
	var have map[[2]string]*fsm.Entry
	f.s.c.ReadRegion(f.r.Name, func(rr fsm.RemoteRegion, ok bool) {
		if !ok {
			have = map[[2]string]*fsm.Entry{}
			return
		}
		have = make(map[[2]string]*fsm.Entry, rr.Copy.Count())
		rr.Copy.Range(func(e *fsm.Entry) { have[[2]string{e.App, e.ID}] = e })
	})
	return have
}

// synced is the status of a copy just confirmed equal to the region's.
func (f *follower) synced(src string, loaded bool) *fsm.RegionStatus {
	now := time.Now().UnixMilli()
	since := f.status.Since
	if !f.status.Reachable || !f.known {
		since = now
	}
	return &fsm.RegionStatus{Loaded: loaded, Reachable: true, Kind: f.kind, Source: src, SyncedAt: now, Since: since}
}

// unreachable records that no URL of the region answered, once per
// outage (and again when the reason changes); the copy stays.
func (f *follower) unreachable(ctx context.Context, cause error) error {
	msg := cause.Error()
	if f.known && !f.status.Reachable && f.status.Error == msg {
		return nil
	}
	f.s.log.Warn("remote region unreachable: serving its last copy", "region", f.r.Name, "error", msg)
	st := f.status
	st.Reachable, st.Error = false, msg
	if f.status.Reachable || !f.known {
		st.Since = time.Now().UnixMilli()
	}
	return f.write(ctx, nil, nil, &st)
}

// write writes one pass: chunks of at most cfg.Chunk records, staged, and
// a final entry with the status.
func (f *follower) write(ctx context.Context, puts []*fsm.Entry, dels []fsm.KeyBody, st *fsm.RegionStatus) error {
	f.pass++
	n := f.s.cfg.Chunk
	for len(puts)+len(dels) > n {
		b := &fsm.RegionUpdateBody{Region: f.r.Name, Pass: f.pass}
		k := min(n, len(puts))
		b.Put, puts = puts[:k], puts[k:]
		if k < n {
			d := min(n-k, len(dels))
			b.Delete, dels = dels[:d], dels[d:]
		}
		if err := f.apply(ctx, b); err != nil {
			return err
		}
	}
	if err := f.apply(ctx, &fsm.RegionUpdateBody{Region: f.r.Name, Pass: f.pass, Put: puts, Delete: dels, Final: true, Status: st}); err != nil {
		return err
	}
	f.status, f.known = *st, true
	return nil
}

func (f *follower) apply(ctx context.Context, b *fsm.RegionUpdateBody) error {
	if err := f.s.c.ApplyRegion(ctx, b); err != nil {
		return &localError{fmt.Errorf("write the copy of region %s: %w", f.r.Name, err)}
	}
	f.stats.writes.Add(1)
	f.stats.records.Add(uint64(len(b.Put) + len(b.Delete)))
	return nil
}

// errRefused is a 403: the region refuses the document (an eureka-server
// with its delta off, or one not ready to serve).
var errRefused = errors.New("refused")

// errGone is a heureka region's 410 to ?after=: the changes after the
// sequence number asked for aged out of its queue.
var errGone = errors.New("changes aged out of the region's queue")

// answer is one document a region served.
type answer struct {
	doc   *eureka.Applications
	index uint64 // the heureka index (0 for eureka-server)
	kind  string
	src   string // the URL that answered
	// seq is the heureka change sequence number of an ?after= answer.
	seq    uint64
	hasSeq bool
}

// get fetches a document of the region from the first URL that answers,
// starting with the one that answered last.
func (f *follower) get(ctx context.Context, path, query string) (answer, error) {
	var errs []string
	refused := true
	for i := range f.r.URLs {
		u := f.r.URLs[(f.url+i)%len(f.r.URLs)]
		a, err := f.fetch(ctx, u+path, query)
		f.stats.fetches.Add(1)
		if err == nil || errors.Is(err, errGone) {
			f.url = (f.url + i) % len(f.r.URLs)
			a.src = u
			return a, err
		}
		if ctx.Err() != nil {
			return answer{}, ctx.Err()
		}
		refused = refused && errors.Is(err, errRefused)
		errs = append(errs, err.Error())
	}
	if refused {
		return answer{}, fmt.Errorf("region %s: %s: %w", f.r.Name, strings.Join(errs, "; "), errRefused)
	}
	return answer{}, fmt.Errorf("region %s: %s", f.r.Name, strings.Join(errs, "; "))
}

func (f *follower) fetch(ctx context.Context, u, query string) (answer, error) {
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.s.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		return answer{}, fmt.Errorf("read %s: %w", u, err)
	}
	if resp.StatusCode == http.StatusGone {
		return answer{}, fmt.Errorf("GET %s: %w", u, errGone)
	}
	if resp.StatusCode == http.StatusForbidden {
		return answer{}, fmt.Errorf("GET %s: %s: %w", u, resp.Status, errRefused)
	}
	if resp.StatusCode != http.StatusOK {
		return answer{}, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	doc, err := eureka.DecodeApplications(body, eureka.JSON)
	if err != nil {
		return answer{}, fmt.Errorf("decode %s: %w", u, err)
	}
	a := answer{doc: doc, kind: KindEureka}
	if h := resp.Header.Get(indexHeader); h != "" {
		a.kind = KindHeureka
		if a.index, err = strconv.ParseUint(h, 10, 64); err != nil {
			return answer{}, fmt.Errorf("GET %s: %s %q: %w", u, indexHeader, h, err)
		}
	}
	if h := resp.Header.Get(deltaSeqHeader); h != "" {
		if a.seq, err = strconv.ParseUint(h, 10, 64); err != nil {
			return answer{}, fmt.Errorf("GET %s: %s %q: %w", u, deltaSeqHeader, h, err)
		}
		a.hasSeq = true
	}
	return a, nil
}
