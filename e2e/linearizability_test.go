package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/heureka-registry/heureka/faultproxy"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
)

// A cp-mode history is checked against a model of one register per
// instance id: present or absent. Registers and cancels are writes,
// linearizable reads of GET /eureka/apps/{app}/{id} observe it.

type linInput struct {
	op  string // "register", "cancel", "read"
	key string
	// node is the node the request went to (for the visualization only).
	node string
}

type linOutput struct {
	// present: cancel found it (200) / read saw it (200).
	present bool
	// unknown: the write may or may not have taken effect (a timeout or
	// a lost leader after the entry was appended).
	unknown bool
}

var registryModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(linInput).key
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(byKey))
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return false },
	Step: func(state, input, output any) (bool, any) {
		present := state.(bool)
		in, out := input.(linInput), output.(linOutput)
		switch in.op {
		case "register":
			return true, true
		case "cancel":
			if out.unknown {
				return true, false
			}
			return out.present == present, false
		default: // read
			return out.present == present, present
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		return fmt.Sprintf("%s(%s) at %s -> present=%v unknown=%v", in.op, in.key, in.node, out.present, out.unknown)
	},
}

// linHistory records operations from concurrent clients.
type linHistory struct {
	mu    sync.Mutex
	ops   []porcupine.Operation
	start time.Time
}

func (h *linHistory) add(client int, in linInput, call, ret time.Time, out linOutput) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := ret.Sub(h.start).Nanoseconds()
	if out.unknown {
		r = 1 << 62 // an ambiguous write may take effect at any later time
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call.Sub(h.start).Nanoseconds(), Output: out, Return: r})
}

// linClient runs random operations against random live nodes until stop.
func linClient(id int, c *Cluster, keys []string, h *linHistory, stop <-chan struct{}, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(id)))
	for !tick.Stopped(stop) {
		live := c.Live()
		nd := live[rng.IntN(len(live))]
		key := keys[rng.IntN(len(keys))]
		url := nd.URL("/eureka/apps/LIN/" + key)
		var in linInput
		var out linOutput
		call := time.Now()
		var code int
		var err error
		switch rng.IntN(3) {
		case 0:
			in = linInput{"register", key, nd.ID}
			code, _, _, err = TryDo("POST", nd.URL("/eureka/apps/LIN"), RegisterBody("LIN", key, nil))
			switch {
			case err == nil && code == http.StatusNoContent:
			case err == nil && code == http.StatusBadRequest:
				continue
			default:
				out.unknown = true
			}
		case 1:
			in = linInput{"cancel", key, nd.ID}
			code, _, _, err = TryDo("DELETE", url, nil)
			switch {
			case err == nil && code == http.StatusOK:
				out.present = true
			case err == nil && code == http.StatusNotFound:
			default:
				out.unknown = true
			}
		default:
			in = linInput{"read", key, nd.ID}
			code, _, _, err = TryDo("GET", url+"?consistency=linearizable", nil)
			switch {
			case err == nil && code == http.StatusOK:
				out.present = true
			case err == nil && code == http.StatusNotFound:
			default:
				continue // a failed read observed nothing
			}
		}
		h.add(id, in, call, time.Now(), out)
	}
}

// runLinearizability drives concurrent clients against a cp cluster while
// a schedule kills leaders and partitions nodes, then checks the history.
func runLinearizability(t *testing.T, seed uint64, duration time.Duration) {
	proxy := faultproxy.New()
	t.Cleanup(proxy.Close)
	c := StartCluster(t, 3, Options{
		ExtraArgs: []string{"--mode", "cp"},
		RaftFront: func(id, real string) string {
			addr, err := proxy.Front(id, real)
			if err != nil {
				t.Fatal(err)
			}
			return addr
		},
	})
	c.WaitLeader(t, 10*time.Second)
	keys := []string{"k0", "k1", "k2", "k3"}
	h := &linHistory{start: time.Now()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); linClient(i, c, keys, h, stop, seed) }(i)
	}
	rng := rand.New(rand.NewPCG(seed, 42))
	deadline := time.Now().Add(duration)
	for step := 0; time.Now().Before(deadline); step++ {
		time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
		switch rng.IntN(3) {
		case 0: // kill the leader, bring it back
			if leader, _ := c.leaderOnce(); leader != nil {
				leader.Kill()
				time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
				leader.Restart(t)
			}
		case 1: // isolate a random node for a while
			nd := c.Nodes[rng.IntN(len(c.Nodes))]
			proxy.Isolate(nd.ID)
			time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
			proxy.Heal()
		default: // cut one link
			a, b := rng.IntN(3), rng.IntN(3)
			if a != b {
				proxy.Cut(c.Nodes[a].ID, c.Nodes[b].ID)
				time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
				proxy.Heal()
			}
		}
	}
	close(stop)
	wg.Wait()
	res, info := porcupine.CheckOperationsVerbose(registryModel, h.ops, time.Minute)
	t.Logf("seed %d: %d operations, result %s", seed, len(h.ops), res)
	switch res {
	case porcupine.Illegal:
		if dir := os.Getenv("HEUREKA_ARTIFACTS"); dir != "" {
			f := fmt.Sprintf("%s/linearizability-%d.html", dir, seed)
			if fh, err := os.Create(f); err == nil {
				_ = porcupine.Visualize(registryModel, info, fh)
				fh.Close()
				t.Logf("visualization: %s", f)
			}
			for _, nd := range c.Nodes {
				if b, err := os.ReadFile(nd.LogPath); err == nil {
					_ = os.WriteFile(fmt.Sprintf("%s/linearizability-%d-%s.log", dir, seed, nd.ID), b, 0o644)
				}
			}
		}
		t.Fatalf("seed %d: history is not linearizable", seed)
	case porcupine.Unknown:
		t.Fatalf("seed %d: checker timed out", seed)
	}
	if len(h.ops) < 50 {
		t.Fatalf("only %d operations completed: the test did not exercise the cluster", len(h.ops))
	}
}

// TestLinearizabilityCP is the short run of the cp-mode linearizability
// check; the long one is TestLinearizabilityCPLong behind the chaos tag.
func TestLinearizabilityCP(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("HEUREKA_LIN_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	runLinearizability(t, seed, 8*time.Second)
}
