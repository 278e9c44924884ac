//go:build chaos

package e2e

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestUnmarkedBehindProbe is TestPausedOrPartitionedNodeNeverServesUnmarkedBehind
// with the probe settings: N=2000 instances, the follower paused or
// partitioned for 40 s, 5 runs of each fault in ap and in cp (about 20
// minutes); the HEUREKA_TOUCH_* variables override them as there.
//
//	go test -tags chaos ./e2e -run '^TestUnmarkedBehindProbe$' -count=1 -timeout 90m -v
func TestUnmarkedBehindProbe(t *testing.T) {
	runTouchProbes(t, touchParamsFromEnv(touchParams{
		instances: 2000, fault: 40 * time.Second, watch: 5 * time.Second, runs: 5,
		modes: []string{"ap", "cp"}, faults: []string{"pause", "partition"}, writeEvery: 10 * time.Millisecond,
	}))
}

// TestElectionReadCost measures what an ordinary leader election costs the
// followers' reads: 3 nodes with the Raft timings `heureka serve` has by
// default (1 s heartbeat and election timeouts, 500 ms leader lease),
// 10,000 instances; the leader is killed with SIGKILL while each follower
// is read every 20 ms with GET /eureka/apps (JSON, gzip accepted, as Eureka
// clients read). For each follower it reports how long its reads were
// marked stale (ap) or refused (cp), from the start of the first such read
// after the kill to the end of the last, how many there were, when the
// follower first named the new leader, and how long its reads took. It
// measures; it fails only if a follower never serves unmarked again. Set
// HEUREKA_E2E_BINARY to measure another build (e.g. one from before a
// change) with the same test; HEUREKA_ELECTION_INSTANCES, _RUNS and _MODES
// change the defaults (10000, 3, ap,cp).
//
//	go test -tags chaos ./e2e -run '^TestElectionReadCost$' -count=1 -timeout 60m -v
func TestElectionReadCost(t *testing.T) {
	n := envInt("HEUREKA_ELECTION_INSTANCES", 10000)
	runs := envInt("HEUREKA_ELECTION_RUNS", 3)
	modes := strings.Split(cmp.Or(strings.TrimSpace(os.Getenv("HEUREKA_ELECTION_MODES")), "ap,cp"), ",")
	var summary []string
	for _, mode := range modes {
		var spans, again, lat []time.Duration
		for run := 1; run <= runs; run++ {
			t.Run(fmt.Sprintf("%s-%d", mode, run), func(t *testing.T) {
				for _, f := range electionRun(t, mode, n) {
					summary = append(summary, fmt.Sprintf("%s run %d %s", mode, run, f))
					spans, again, lat = append(spans, f.span), append(again, f.unmarkedAgain), append(lat, f.badLatency)
				}
			})
		}
		if len(spans) > 0 {
			med := func(ds []time.Duration) string {
				slices.Sort(ds)
				return fmt.Sprintf("median %v, max %v", pct(ds, 50).Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
			}
			summary = append(summary, fmt.Sprintf("%s, %d followers: marked/refused for %s; unmarked again after the kill %s; each follower's median marked/refused read took %s",
				mode, len(spans), med(spans), med(again), med(lat)))
		}
	}
	t.Logf("binary %s\nsummary:\n%s", Binary(t), strings.Join(summary, "\n"))
}

// electionSample is one read of a follower.
type electionSample struct {
	start, end time.Time
	code       int
	stale      bool
	leader     string
	err        error
}

// electionFollower is what one follower's reads showed around the kill.
type electionFollower struct {
	id string
	// span runs from the start of the first read after the kill that was
	// not an unmarked 200 to the end of the last one.
	span                  time.Duration
	firstBad              time.Duration // start of the first such read, after the kill
	marked, refused, errs int
	reads                 int
	newLeader             time.Duration // first answer naming the new leader, after the kill
	slowest               time.Duration
	slow                  int           // reads after the kill that took over 100 ms
	badLatency            time.Duration // median time to answer a marked or refused read
	unmarkedAgain         time.Duration // end of the first unmarked 200 after the span, after the kill
	election              time.Duration // from the kill until the harness saw the nodes agree on a leader
}

func (f electionFollower) String() string {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return fmt.Sprintf("%s: marked/refused for %s (first at +%s, unmarked again at +%s; %d marked, %d 503, %d errors of %d reads after the kill); names the new leader at +%s; agreed leader at +%s; marked/refused reads took %s (median), slowest read %s, %d reads over 100 ms",
		f.id, ms(f.span), ms(f.firstBad), ms(f.unmarkedAgain), f.marked, f.refused, f.errs, f.reads, ms(f.newLeader), ms(f.election), ms(f.badLatency), ms(f.slowest), f.slow)
}

// electionRun runs one measurement and returns each follower's figures.
func electionRun(t *testing.T, mode string, n int) []electionFollower {
	c := StartCluster(t, 3, Options{DefaultRaftTimings: true, ExtraArgs: []string{"--mode", mode}})
	leader := c.WaitLeader(t, 30*time.Second)
	regs := make([]reg, n)
	for i := range regs {
		regs[i] = reg{app: fmt.Sprintf("ELECT-%02d", i%50), id: fmt.Sprintf("e-%05d", i), extra: longLease}
	}
	start := time.Now()
	registerAll(t, leader.BaseURL(), regs, 32)
	t.Logf("registered %d instances in %v", n, time.Since(start).Round(time.Millisecond))
	for _, nd := range c.Nodes {
		WaitFor(t, 60*time.Second, func() bool {
			st, err := nd.TryStatus()
			return err == nil && st.Instances == n
		}, nd.ID+" holding every instance")
	}
	followers := c.Followers(leader)

	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: nil, DisableCompression: true}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	samples := make([][]electionSample, len(followers))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, nd := range followers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := electionRead(client, nd)
				mu.Lock()
				samples[i] = append(samples[i], s)
				mu.Unlock()
				time.Sleep(time.Until(s.start.Add(20 * time.Millisecond)))
			}
		}()
	}
	time.Sleep(2 * time.Second)
	killAt := time.Now()
	leader.Kill()
	newLeader := c.WaitLeader(t, 30*time.Second)
	election := time.Since(killAt)
	// Read on until each follower has answered unmarked for 3 s after a
	// leader is agreed on, or 30 s after the kill.
	deadline := killAt.Add(30 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		mu.Lock()
		done := time.Since(killAt) > election+3*time.Second && allUnmarkedSince(samples, time.Now().Add(-3*time.Second))
		mu.Unlock()
		if done {
			break
		}
	}
	close(stop)
	wg.Wait()

	var out []electionFollower
	for i, nd := range followers {
		f := electionFollower{id: nd.ID, election: election, newLeader: -1, unmarkedAgain: -1}
		first, last := -1, -1
		var badLat []time.Duration
		for j, s := range samples[i] {
			if s.end.Before(killAt) {
				continue
			}
			f.reads++
			lat := s.end.Sub(s.start)
			f.slowest = max(f.slowest, lat)
			if lat > 100*time.Millisecond {
				f.slow++
			}
			if f.newLeader < 0 && s.leader == newLeader.ID {
				f.newLeader = s.end.Sub(killAt)
			}
			switch {
			case s.err != nil || (s.code != http.StatusOK && s.code != http.StatusServiceUnavailable):
				f.errs++
			case s.code == http.StatusServiceUnavailable:
				f.refused++
			case s.stale:
				f.marked++
			default:
				continue
			}
			badLat = append(badLat, lat)
			if first < 0 {
				first = j
			}
			last = j
		}
		slices.Sort(badLat)
		f.badLatency = pct(badLat, 50)
		if first >= 0 {
			f.span = samples[i][last].end.Sub(samples[i][first].start)
			f.firstBad = samples[i][first].start.Sub(killAt)
			for _, s := range samples[i][last+1:] {
				if s.err == nil && s.code == http.StatusOK && !s.stale {
					f.unmarkedAgain = s.end.Sub(killAt)
					break
				}
			}
			if f.unmarkedAgain < 0 {
				t.Errorf("%s never answered an unmarked 200 again after the election", nd.ID)
			}
		}
		t.Logf("%s %s", mode, f)
		out = append(out, f)
	}
	return out
}

// allUnmarkedSince reports whether every series has reads begun since t and
// all of them unmarked 200s.
func allUnmarkedSince(series [][]electionSample, t time.Time) bool {
	for _, ss := range series {
		seen := false
		for i := len(ss) - 1; i >= 0 && ss[i].start.After(t); i-- {
			if ss[i].err != nil || ss[i].code != http.StatusOK || ss[i].stale {
				return false
			}
			seen = true
		}
		if !seen {
			return false
		}
	}
	return true
}

// electionRead reads GET /eureka/apps on nd once, gzip accepted, the body
// read and dropped.
func electionRead(client *http.Client, nd *Node) electionSample {
	s := electionSample{start: time.Now()}
	req, err := http.NewRequest("GET", nd.URL("/eureka/apps"), nil)
	if err != nil {
		s.err = err
		return s
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := client.Do(req)
	if err != nil {
		s.end, s.err = time.Now(), err
		return s
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s.end, s.err, s.code = time.Now(), err, resp.StatusCode
	s.stale = resp.Header.Get("X-Heureka-Stale") == "true"
	s.leader = resp.Header.Get("X-Heureka-Leader")
	return s
}
