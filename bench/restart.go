package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// restartPoll is how often W9 asks each node while the cluster restarts;
// restartWait bounds the wait for every node to serve again.
const (
	restartPoll = 50 * time.Millisecond
	restartWait = 2 * time.Minute
)

// W9: every node is killed with SIGKILL and restarted (random order) on its
// data. Each node is polled from its restart: an answer 200 listing fewer
// instances than the cluster held before is counted (the readiness gate
// says there must be none), and each node's time from the kill until it
// first serves every instance is sampled. It runs last: it disturbs the
// cluster.
func (r *heurekaRun) restart(ctx context.Context) error {
	s := r.s
	if r.t.Restart == nil {
		r.sys.Set(RowRestart, NotApplicable(cmp.Or(r.t.NoRestart, "needs nodes the bench started (--local)")))
		return nil
	}
	before := 0
	var why string
	for i := range r.t.URLs {
		n, code, err := r.countInstances(ctx, i, "?consistency=linearizable")
		switch {
		case err != nil:
			why = err.Error()
		case code != http.StatusOK:
			why = fmt.Sprintf("GET /eureka/apps?consistency=linearizable on n%d: %d", i+1, code)
		default:
			before = max(before, n)
		}
	}
	if before == 0 {
		r.sys.Set(RowRestart, NotApplicable("could not count the instances before the restart: "+why))
		return nil
	}
	s.logf("heureka", "W9: killing every node (holding %d instances) and restarting them", before)
	start := time.Now()
	pids, err := r.t.Restart()
	if err != nil {
		r.sys.Set(RowRestart, NotApplicable("failed: "+err.Error()))
		return fmt.Errorf("W9 restart: %w", err)
	}
	r.t.PIDs = pids
	r.client.CloseIdleConnections()

	var (
		mu                      sync.Mutex
		ok200, partial, refused int64
		served                  = make([]time.Duration, len(r.t.URLs))
		firstPartial            string
	)
	deadline := start.Add(restartWait)
	var wg sync.WaitGroup
	for i := range r.t.URLs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				n, code, err := r.countInstances(ctx, i, "")
				at := time.Since(start)
				if err == nil {
					mu.Lock()
					switch {
					case code == http.StatusOK && n < before:
						ok200++
						partial++
						if firstPartial == "" {
							firstPartial = fmt.Sprintf("n%d answered %d of %d at +%s", i+1, n, before, fmtDur(at))
						}
					case code == http.StatusOK:
						ok200++
						if served[i] == 0 {
							served[i] = at
						}
					default:
						refused++
					}
					done := served[i] > 0 && at > served[i]+time.Second
					mu.Unlock()
					if done {
						return // a second of full answers after it served
					}
				}
				sleepCtx(ctx, restartPoll)
			}
		}()
	}
	wg.Wait()
	var d []time.Duration
	var never int64
	var all time.Duration
	for _, t := range served {
		if t == 0 {
			never++
			continue
		}
		d = append(d, t)
		all = max(all, t)
	}
	m := FromSamples(d, never)
	m.Note = fmt.Sprintf("answers with fewer instances than before: %d of %d (%s held; %d refused while catching up)",
		partial, ok200, group(int64(before)), refused)
	if never == 0 {
		m.Note += "; every node serving after " + fmtDur(all)
	}
	if firstPartial != "" {
		m.FirstError = firstPartial
	}
	r.sys.Set(RowRestart, m)
	s.logf("heureka", "W9 restart: %s", FormatCell(KindLatency, m))
	return nil
}

// countInstances asks node i for GET /eureka/apps and returns how many
// instances the document lists (the sum of its apps__hashcode counts). It
// reads only the document's head, where the hash code is, and drops the
// connection: at a million instances the document is gigabytes, and
// three nodes polled at once held more than the machine's memory.
func (r *heurekaRun) countInstances(ctx context.Context, i int, query string) (int, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url(i, "/eureka/apps"+query), nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return 0, resp.StatusCode, nil
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, docHead))
	if err != nil {
		return 0, resp.StatusCode, err
	}
	n, err := hashCount(head)
	return n, resp.StatusCode, err
}

// docHead is how much of an applications document countInstances reads:
// the hash code comes right after the document's opening.
const docHead = 4 << 10

// hashCount sums the counts of an applications document's hash code
// ("UP_5_OUT_OF_SERVICE_2_" → 7).
func hashCount(body []byte) (int, error) {
	const key = `"apps__hashcode":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return 0, fmt.Errorf("no apps__hashcode in %.100q", body)
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, fmt.Errorf("unterminated apps__hashcode")
	}
	// Status names hold underscores (OUT_OF_SERVICE) but no digits: every
	// numeric part is a count.
	total := 0
	for _, part := range strings.Split(string(rest[:j]), "_") {
		if n, err := strconv.Atoi(part); err == nil {
			total += n
		}
	}
	return total, nil
}
