package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/faultproxy"
)

// startProxied starts a 3-node cluster whose Raft links pass through a
// fault-injecting proxy.
func startProxied(t *testing.T, mode string) (*Cluster, *faultproxy.Proxy) {
	t.Helper()
	proxy := faultproxy.New()
	t.Cleanup(proxy.Close)
	c := StartCluster(t, 3, Options{
		ExtraArgs: []string{"--mode", mode, "--response-cache-update-interval", "100ms"},
		RaftFront: func(id, real string) string {
			addr, err := proxy.Front(id, real)
			if err != nil {
				t.Fatalf("proxy front for %s: %v", id, err)
			}
			return addr
		},
	})
	return c, proxy
}

// majorityLeader waits until one of nodes leads and the others follow it.
func majorityLeader(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	var leader *Node
	WaitFor(t, 15*time.Second, func() bool {
		leader = nil
		ids := map[string]bool{}
		for _, nd := range nodes {
			st, err := nd.TryStatus()
			if err != nil {
				return false
			}
			if st.State == "Leader" {
				leader = nd
			}
			ids[st.Leader] = true
		}
		return leader != nil && len(ids) == 1 && ids[leader.ID]
	}, "a leader on the majority side")
	return leader
}

func statusField(t *testing.T, nd *Node, field string, into any) {
	t.Helper()
	st := nd.Status(t)
	if err := json.Unmarshal(st.Raw[field], into); err != nil {
		t.Fatalf("%s: status field %s: %v", nd.ID, field, err)
	}
}

func visibleOn(nd *Node, key string) bool {
	ok, err := present(nd, key)
	return err == nil && ok
}

// TestPartitionIsolatedNode isolates one node from the other two, in both
// modes. cp: the isolated node refuses writes and non-stale reads while the
// majority keeps working. ap: the isolated node keeps serving (stale) reads
// and takes a registration; after healing that registration is on every
// node and nothing registered on the majority side is lost.
func TestPartitionIsolatedNode(t *testing.T) {
	for _, mode := range []string{"cp", "ap"} {
		t.Run(mode, func(t *testing.T) {
			c, proxy := startProxied(t, mode)
			leader := c.WaitLeader(t, 10*time.Second)
			RegisterJSON(t, leader.BaseURL(), "PART", "before", nil)
			isolated := c.Followers(leader)[0]
			var majority []*Node
			for _, nd := range c.Nodes {
				if nd != isolated {
					majority = append(majority, nd)
				}
			}
			for _, nd := range c.Nodes {
				WaitFor(t, 5*time.Second, func() bool { return visibleOn(nd, "PART/before") }, "PART/before on "+nd.ID)
			}

			proxy.Isolate(isolated.ID)
			cut := time.Now()
			WaitFor(t, 10*time.Second, func() bool {
				var lost bool
				statusField(t, isolated, "quorum_lost", &lost)
				return lost
			}, "isolated node reports quorum lost")
			t.Logf("%s reported quorum lost %s after the cut", isolated.ID, time.Since(cut).Round(time.Millisecond))
			newLeader := majorityLeader(t, majority)

			// The majority side keeps working.
			RegisterJSON(t, majority[1].BaseURL(), "PART", "majority", nil)
			code, body, _ := Do(t, "GET", majority[0].URL("/eureka/apps/PART?consistency=linearizable"), nil)
			if code != http.StatusOK || !containsAll(string(body), `"majority"`) {
				t.Fatalf("linearizable read on the majority: %d %.300s", code, body)
			}

			// The isolated side.
			code, _, hdr := Do(t, "GET", isolated.URL("/eureka/apps"), nil)
			switch mode {
			case "cp":
				if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
					t.Fatalf("cp read without quorum: %d, want 503 with Retry-After", code)
				}
				code, _, hdr = Do(t, "GET", isolated.URL("/eureka/apps?consistency=stale"), nil)
				if code != http.StatusOK || hdr.Get("X-Heureka-Stale") != "true" {
					t.Fatalf("cp stale read: %d stale=%q", code, hdr.Get("X-Heureka-Stale"))
				}
				code, body, hdr = Do(t, "POST", isolated.URL("/eureka/apps/PART"), RegisterBody("PART", "isolated", nil))
				if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
					t.Fatalf("cp write without quorum: %d %s", code, body)
				}
				if code, _, _ := Do(t, "PUT", isolated.URL("/eureka/apps/PART/before"), nil); code != http.StatusServiceUnavailable {
					t.Fatalf("cp renew without quorum: %d", code)
				}
			case "ap":
				if code != http.StatusOK || hdr.Get("X-Heureka-Stale") != "true" {
					t.Fatalf("ap read without quorum: %d stale=%q", code, hdr.Get("X-Heureka-Stale"))
				}
				RegisterJSON(t, isolated.BaseURL(), "PART", "isolated", nil)
				WaitFor(t, 2*time.Second, func() bool { return visibleOn(isolated, "PART/isolated") }, "journaled registration visible on the isolated node")
				if code, _, _ := Do(t, "PUT", isolated.URL("/eureka/apps/PART/before"), nil); code != http.StatusOK {
					t.Fatalf("ap renew of a known instance without quorum: %d", code)
				}
				var fallback bool
				var journal int
				statusField(t, isolated, "fallback", &fallback)
				statusField(t, isolated, "journal_entries", &journal)
				if !fallback || journal != 1 {
					t.Fatalf("status: fallback=%v journal_entries=%d, want true and 1", fallback, journal)
				}
				// The journal survives a crash of the isolated node.
				isolated.Kill()
				isolated.Restart(t)
				WaitFor(t, 10*time.Second, func() bool { return visibleOn(isolated, "PART/isolated") }, "journaled registration visible after a restart")
				statusField(t, isolated, "journal_entries", &journal)
				if journal != 1 {
					t.Fatalf("journal_entries after restart: %d, want 1", journal)
				}
			}

			proxy.Heal()
			healed := time.Now()
			c.WaitLeader(t, 15*time.Second)
			want := []string{"PART/before", "PART/majority"}
			if mode == "ap" {
				want = append(want, "PART/isolated")
			}
			for _, nd := range c.Nodes {
				for _, key := range want {
					WaitFor(t, 10*time.Second, func() bool { return visibleOn(nd, key) }, key+" on "+nd.ID+" after healing")
				}
			}
			t.Logf("healed: every node holds %v %s after healing (leader during the cut: %s)", want, time.Since(healed).Round(time.Millisecond), newLeader.ID)
			if mode == "cp" {
				for _, nd := range c.Nodes {
					if visibleOn(nd, "PART/isolated") {
						t.Fatalf("a write refused in cp mode was recorded on %s", nd.ID)
					}
				}
			}
			// The replay applies the journal's writes through the leader,
			// then waits (a second at most) for the isolated node to apply
			// them too, and only then trims: the other nodes may show the
			// writes a moment before the journal is empty.
			var journal int
			WaitFor(t, 5*time.Second, func() bool {
				statusField(t, isolated, "journal_entries", &journal)
				return journal == 0
			}, "the journal emptied after healing")
		})
	}
}
