package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// visibleWithin registers one instance through writer and returns, per
// node, how long after the 204 the instance showed up in that node's
// GET /eureka/apps (polled every 5 ms, bounded by limit).
func visibleWithin(t *testing.T, nodes []*Node, writer *Node, id string, limit time.Duration) map[string]time.Duration {
	t.Helper()
	RegisterJSON(t, writer.BaseURL(), "STALE", id, nil)
	acked := time.Now()
	out := map[string]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, nd := range nodes {
		wg.Add(1)
		go func(nd *Node) {
			defer wg.Done()
			for time.Since(acked) < limit {
				if ok, err := present(nd, "STALE/"+id); err == nil && ok {
					mu.Lock()
					out[nd.ID] = time.Since(acked)
					mu.Unlock()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}(nd)
	}
	wg.Wait()
	return out
}

// TestCacheStalenessBound: with the push off (eureka-server's behaviour) and
// a 100 ms readOnly refresh interval a registration is visible in every
// node's cached reads within 300 ms; with default flags (changes pushed into
// readOnly) within a generous 2 s (BENCHMARKS.md has the measured figures).
func TestCacheStalenessBound(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		bound   time.Duration
		samples int
	}{
		{"timer-only-100ms", []string{"--response-cache-push-window", "0", "--response-cache-update-interval", "100ms"}, 300 * time.Millisecond, 5},
		{"default", nil, 2 * time.Second, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := StartCluster(t, 3, Options{ExtraArgs: tc.args})
			c.WaitLeader(t, 10*time.Second)
			RegisterJSON(t, c.Nodes[0].BaseURL(), "STALE", "warm", nil)
			for _, nd := range c.Nodes { // warm every node's readOnly level
				WaitFor(t, 10*time.Second, func() bool {
					ok, err := present(nd, "STALE/warm")
					return err == nil && ok
				}, "warm-up on "+nd.ID)
			}
			var worst time.Duration
			for i := 0; i < tc.samples; i++ {
				seen := visibleWithin(t, c.Nodes, c.Nodes[i%3], fmt.Sprint("i-", i), tc.bound+2*time.Second)
				for _, nd := range c.Nodes {
					d, ok := seen[nd.ID]
					if !ok {
						t.Fatalf("sample %d: not visible on %s within %s", i, nd.ID, tc.bound+2*time.Second)
					}
					worst = max(worst, d)
				}
			}
			t.Logf("%s: worst visibility %s over %d samples × 3 nodes (bound %s)", tc.name, worst.Round(time.Millisecond), tc.samples, tc.bound)
			if worst > tc.bound {
				t.Fatalf("a change took %s to reach cached reads, bound %s", worst, tc.bound)
			}
		})
	}
}

// docState is what one cached document on a node says about an instance.
type docState struct {
	present bool
	status  string
	action  string
}

// readDoc reads path on nd (JSON) and finds APP/id in it; an application
// document is read as a one-application registry, a 404 as absent.
func readDoc(nd *Node, path, app, id string) (docState, string, error) {
	code, body, hdr, err := TryDo("GET", nd.URL(path), nil)
	if err != nil {
		return docState{}, "", err
	}
	idx := hdr.Get("X-Heureka-Index")
	switch {
	case code == http.StatusNotFound:
		return docState{}, idx, nil
	case code != http.StatusOK:
		return docState{}, idx, fmt.Errorf("GET %s: %d %.200s", path, code, body)
	}
	if strings.HasPrefix(path, "/eureka/apps/") && path != "/eureka/apps/delta" {
		var doc struct {
			Application json.RawMessage `json:"application"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return docState{}, idx, err
		}
		body = []byte(`{"applications":{"application":[` + string(doc.Application) + `]}}`)
	}
	apps, err := ParseApps(body)
	if err != nil {
		return docState{}, idx, err
	}
	in, ok := apps.ByKey()[app+"/"+id]
	if !ok {
		return docState{}, idx, nil
	}
	var extra struct {
		ActionType string `json:"actionType"`
	}
	_ = json.Unmarshal(in.Raw, &extra)
	return docState{present: true, status: in.Status, action: extra.ActionType}, idx, nil
}

// TestCacheFollowsChangesOnEveryNode: with default flags, a register, a
// status change and a cancel acknowledged by node A show in node C's cached
// GET /eureka/apps/{app}, /eureka/apps and /eureka/apps/delta within a
// generous 2 s (the benchmark measures milliseconds), and a blocking read of
// the application on C, parked before each write, answers with it.
func TestCacheFollowsChangesOnEveryNode(t *testing.T) {
	const bound = 2 * time.Second
	c := StartCluster(t, 3, Options{})
	c.WaitLeader(t, 10*time.Second)
	a, cNode := c.Nodes[0], c.Nodes[2]
	const app, id = "FOLLOW", "f-1"
	RegisterJSON(t, a.BaseURL(), app, "anchor", nil) // the application stays, so its document never 404s
	paths := []string{"/eureka/apps/" + app, "/eureka/apps", "/eureka/apps/delta"}
	for _, p := range paths { // warm C's readOnly level
		WaitFor(t, 10*time.Second, func() bool {
			st, _, err := readDoc(cNode, p, app, "anchor")
			return err == nil && st.present
		}, "warm-up of "+p)
	}
	blockingClient := &http.Client{Timeout: 30 * time.Second}
	steps := []struct {
		name   string
		method string
		path   string
		body   []byte
		want   func(docState, string) bool
	}{
		{"register", "POST", "/eureka/apps/" + app, RegisterBody(app, id, nil),
			func(s docState, _ string) bool { return s.present && s.status == "UP" }},
		{"status", "PUT", "/eureka/apps/" + app + "/" + id + "/status?value=OUT_OF_SERVICE", nil,
			func(s docState, _ string) bool { return s.present && s.status == "OUT_OF_SERVICE" }},
		{"cancel", "DELETE", "/eureka/apps/" + app + "/" + id, nil,
			func(s docState, path string) bool {
				if path == "/eureka/apps/delta" {
					return s.present && s.action == "DELETED"
				}
				return !s.present
			}},
	}
	for _, st := range steps {
		_, idx, err := readDoc(cNode, paths[0], app, id)
		if err != nil || idx == "" {
			t.Fatalf("%s: index of the application on %s: %q %v", st.name, cNode.ID, idx, err)
		}
		type answer struct {
			code int
			body []byte
			at   time.Time
			err  error
		}
		blocked := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest("GET", cNode.URL(paths[0]+"?index="+idx+"&wait=20s"), nil)
			req.Header.Set("Accept", "application/json")
			resp, err := blockingClient.Do(req)
			if err != nil {
				blocked <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			blocked <- answer{resp.StatusCode, b, time.Now(), err}
		}()
		time.Sleep(100 * time.Millisecond) // let the blocking read park
		code, body, _ := Do(t, st.method, a.URL(st.path), st.body)
		if code/100 != 2 {
			t.Fatalf("%s on %s: %d %s", st.name, a.ID, code, body)
		}
		acked := time.Now()
		for _, p := range paths {
			var last docState
			ok := Eventually(bound, func() bool {
				s, _, err := readDoc(cNode, p, app, id)
				last = s
				return err == nil && st.want(s, p)
			})
			if !ok {
				t.Fatalf("%s: %s on %s still says %+v %s after the ack", st.name, p, cNode.ID, last, bound)
			}
			t.Logf("%s: %s on %s current %s after the ack", st.name, p, cNode.ID, time.Since(acked).Round(time.Millisecond))
		}
		ans := <-blocked
		if ans.err != nil || ans.code != http.StatusOK || !strings.Contains(string(ans.body), `"`+id+`"`) && st.name != "cancel" {
			t.Fatalf("%s: blocking read: %d %v %.300s", st.name, ans.code, ans.err, ans.body)
		}
		if d := ans.at.Sub(acked); d > bound {
			t.Fatalf("%s: blocking read answered %s after the ack", st.name, d)
		}
		t.Logf("%s: blocking read on %s answered %s after the ack", st.name, cNode.ID, ans.at.Sub(acked).Round(time.Millisecond))
	}
}
