package e2e

// Real clients across a whole-cluster restart: eureka-js-client
// (full and delta fetching) and fargo (Go; JSON and XML) each poll while all
// three nodes are killed and restarted in random order. A client's local
// view must never lose an instance registered before the restart: a node
// that has not caught up refuses with a bodiless 503, which both keep their
// registry on (fargo decodes any body whatever the status).
//
// fargo's AppSource is not used: it replaces its application with nil on
// any failed poll (a refused connection included), so it cannot keep a view
// across any outage; the pattern that can is ScheduleAppUpdates keeping the
// last update without an error, or GetApps doing the same.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hudl/fargo"

	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

const (
	rcApps      = 4
	rcPerApp    = 25
	rcDuration  = 25 * time.Second // the js script's run
	rcReadyWait = 15 * time.Second
)

// rcView is one client's local view, as instance counts over time.
type rcView struct {
	name  string
	mu    sync.Mutex
	ready bool
	min   int
	polls int
	errs  int
}

func (v *rcView) observe(n, want int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.polls++
	if !v.ready && n >= want {
		v.ready = true
		v.min = n
	}
	if v.ready {
		v.min = min(v.min, n)
	}
}

func (v *rcView) failed() {
	v.mu.Lock()
	v.errs++
	v.mu.Unlock()
}

func (v *rcView) check(t *testing.T, want int) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	t.Logf("%s: %d polls, %d failed (view kept), smallest view %d of %d", v.name, v.polls, v.errs, v.min, want)
	if !v.ready || v.min < want {
		t.Errorf("%s: local view dropped to %d instances (ready=%v), want %d throughout", v.name, v.min, v.ready, want)
	}
}

func TestClientsKeepViewAcrossClusterRestart(t *testing.T) {
	node, jsErr := jsTools()
	if jsErr != nil && os.Getenv(RequireToolsEnv) == "1" {
		t.Fatalf("%s=1 and eureka-js-client cannot run: %v", RequireToolsEnv, jsErr)
	}
	fgQuietLogs()
	c := StartCluster(t, 3, Options{})
	leader := c.WaitLeader(t, 15*time.Second)
	var regs []reg
	var apps []string
	lease := map[string]any{"renewalIntervalInSecs": 30, "durationInSecs": 900}
	for a := range rcApps {
		app := fmt.Sprintf("RC%d", a)
		apps = append(apps, app)
		for i := range rcPerApp {
			regs = append(regs, reg{app: app, id: fmt.Sprintf("rc-%d-%02d", a, i), extra: map[string]any{"leaseInfo": lease}})
		}
	}
	want := len(regs)
	registerAll(t, leader.BaseURL(), regs, 8)
	urls := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		WaitFor(t, rsServeWait, func() bool {
			code, body, _, err := TryDo("GET", nd.URL("/eureka/apps?consistency=linearizable"), nil, "Accept", "application/json")
			return err == nil && code == 200 && rsCount(body) == want
		}, nd.ID+" holding every instance")
		urls[i] = nd.BaseURL()
	}

	// eureka-js-client.
	var jsOut *bufio.Scanner
	var jsCmd *exec.Cmd
	if jsErr != nil {
		t.Logf("eureka-js-client part skipped: %v", jsErr)
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), rcDuration+30*time.Second)
		defer cancel()
		jsCmd = exec.CommandContext(ctx, node, "restart.js", "--urls", strings.Join(urls, ","),
			"--apps", strings.Join(apps, ","), "--want", fmt.Sprint(want), "--duration-ms", fmt.Sprint(rcDuration.Milliseconds()))
		jsCmd.Dir = jsDir
		jsCmd.Env = jsEnv()
		jsCmd.Stderr = os.Stderr
		out, err := jsCmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := jsCmd.Start(); err != nil {
			t.Fatalf("start node restart.js: %v", err)
		}
		defer func() { _ = jsCmd.Wait() }()
		jsOut = bufio.NewScanner(out)
		ready := make(chan bool, 1)
		go func() { ready <- jsOut.Scan() && jsOut.Text() == "ready" }()
		select {
		case ok := <-ready:
			if !ok {
				t.Fatalf("restart.js did not report ready: %q", jsOut.Text())
			}
		case <-time.After(rcReadyWait):
			t.Fatal("restart.js: clients did not see every instance within 15 s")
		}
	}

	// fargo: JSON per application with ScheduleAppUpdates, XML with GetApps;
	// each keeps the last answer that was not an error.
	done := make(chan struct{})
	var wg sync.WaitGroup
	fgJSON := fargo.NewConn(urlsWithPath(urls)...)
	fgJSON.UseJson = true
	fgJSON.PollInterval = 100 * time.Millisecond
	perApp := make([]int, len(apps))
	var perMu sync.Mutex
	jsonView := &rcView{name: "fargo JSON (ScheduleAppUpdates)"}
	for i, app := range apps {
		updates := fgJSON.ScheduleAppUpdates(app, true, done)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range updates {
				if u.Err != nil {
					jsonView.failed()
					continue
				}
				perMu.Lock()
				perApp[i] = len(u.App.Instances)
				total := 0
				for _, n := range perApp {
					total += n
				}
				perMu.Unlock()
				jsonView.observe(total, want)
			}
		}()
	}
	fgXML := fargo.NewConn(urlsWithPath(urls)...)
	xmlView := &rcView{name: "fargo XML (GetApps)"}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick.Every(done, 100*time.Millisecond, func() {
			got, err := fgXML.GetApps()
			if err != nil {
				xmlView.failed()
				return
			}
			n := 0
			for _, a := range apps {
				if app := got[a]; app != nil {
					n += len(app.Instances)
				}
			}
			xmlView.observe(n, want)
		})
	}()
	WaitFor(t, rcReadyWait, func() bool {
		jsonView.mu.Lock()
		defer jsonView.mu.Unlock()
		xmlView.mu.Lock()
		defer xmlView.mu.Unlock()
		return jsonView.ready && xmlView.ready
	}, "fargo seeing every instance")

	// The whole cluster restarts.
	for _, nd := range c.Nodes {
		nd.Kill()
	}
	time.Sleep(500 * time.Millisecond)
	order := rand.Perm(len(c.Nodes))
	for _, i := range order {
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond)
		rsStart(t, c.Nodes[i])
	}
	for _, nd := range c.Nodes {
		rsWaitServingN(t, nd, want)
	}
	time.Sleep(2 * time.Second)
	close(done)
	wg.Wait()
	jsonView.check(t, want)
	xmlView.check(t, want)

	if jsOut != nil {
		if !jsOut.Scan() {
			t.Fatalf("restart.js printed no result (%v)", jsOut.Err())
		}
		var res struct {
			OK      bool `json:"ok"`
			Clients []struct {
				Delta   bool `json:"delta"`
				Ready   bool `json:"ready"`
				Min     int  `json:"min"`
				Samples int  `json:"samples"`
			} `json:"clients"`
		}
		if err := json.Unmarshal(jsOut.Bytes(), &res); err != nil {
			t.Fatalf("restart.js result %q: %v", jsOut.Text(), err)
		}
		for _, cl := range res.Clients {
			t.Logf("eureka-js-client (delta=%v): %d samples, smallest view %d of %d", cl.Delta, cl.Samples, cl.Min, want)
		}
		if !res.OK {
			t.Errorf("eureka-js-client's local view dropped instances: %s", jsOut.Text())
		}
	}
}

func urlsWithPath(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = u + "/eureka"
	}
	return out
}
