//go:build soak

package compose

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hudl/fargo"

	"github.com/heureka-registry/heureka/e2e"
)

// The soak: HEUREKA_SOAK_DURATION (default 10m) of random faults on the
// 3-node compose cluster (docker kill and restart, docker pause and
// unpause, docker network disconnect and reconnect, one at a time) while
// fargo clients register, cancel and heartbeat through the nodes. At the
// end, with every fault healed: no acknowledged registration is missing,
// no acknowledged cancel is undone, and every node serves the same
// instances. Run with:
//
//	go test -tags soak -run TestComposeSoak -timeout 30m -v ./e2e/compose

// soakID tracks one instance's acknowledged history. An operation that got
// no acknowledgement may or may not have happened: after one, the
// instance's end state is not checked.
type soakID struct {
	ins       *fargo.Instance
	present   bool // per the last acknowledged operation
	ambiguous bool
}

func TestComposeSoak(t *testing.T) {
	d := 10 * time.Minute
	if s := os.Getenv("HEUREKA_SOAK_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("HEUREKA_SOAK_DURATION=%q: %v", s, err)
		}
	}
	p := newProject(t, "heurekasoak", 21821)
	p.up()
	network := p.network()
	fc := newFargoClients(p, defaultServices)
	const app = "SOAK"

	var mu sync.Mutex
	ids := map[string]*soakID{}
	var regs, cancels, beats, unacked atomic.Int64
	// settle records what a register (present) or cancel did to id: done
	// when acknowledged, counted in acked; unknown otherwise.
	settle := func(id *soakID, err error, present bool, acked *atomic.Int64) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			id.ambiguous = true
			unacked.Add(1)
			return
		}
		id.present = present
		acked.Add(1)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			var mine []*soakID
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(50+rng.IntN(150)) * time.Millisecond):
				}
				conn := fc.conns[rng.IntN(len(fc.conns))]
				switch r := rng.IntN(10); {
				case r < 4 || len(mine) == 0: // register a new instance
					id := &soakID{ins: fargoInstance(app, fmt.Sprintf("w%d-%05d", w, n))}
					id.ins.LeaseInfo.DurationInSecs = 3600 // faults must not make the leases lapse
					mu.Lock()
					ids[id.ins.Id()] = id
					mu.Unlock()
					mine = append(mine, id)
					settle(id, conn.ReregisterInstance(id.ins), true, &regs)
				case r < 6: // cancel one that is registered
					k := rng.IntN(len(mine))
					id := mine[k]
					mu.Lock()
					skip := id.ambiguous || !id.present
					mu.Unlock()
					if skip {
						continue
					}
					settle(id, conn.DeregisterInstance(id.ins), false, &cancels)
					mine = append(mine[:k], mine[k+1:]...)
				default: // heartbeat a few
					for range 5 {
						id := mine[rng.IntN(len(mine))]
						if conn.HeartBeatInstance(id.ins) == nil {
							beats.Add(1)
						}
					}
				}
			}
		}(w)
	}

	// Faults, one at a time, each healed before the next.
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	var kills, pauses, parts int
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		svc := defaultServices[rng.IntN(len(defaultServices))]
		c := p.container(svc)
		hold := time.Duration(3+rng.IntN(10)) * time.Second
		switch rng.IntN(3) {
		case 0:
			kills++
			docker(t, "kill", c)
			time.Sleep(hold)
			p.must(time.Minute, "start", svc)
		case 1:
			pauses++
			docker(t, "pause", c)
			time.Sleep(hold)
			docker(t, "unpause", c)
		default:
			parts++
			docker(t, "network", "disconnect", network, c)
			time.Sleep(hold)
			docker(t, "network", "connect", "--alias", svc, network, c)
		}
		p.waitHealthy(defaultServices...)
		p.waitLeader(defaultServices...)
		time.Sleep(time.Duration(2+rng.IntN(6)) * time.Second)
	}
	close(stop)
	wg.Wait()

	// Every node must converge on the acknowledged state.
	mu.Lock()
	var wantPresent, wantAbsent []string
	for k, id := range ids {
		switch {
		case id.ambiguous:
		case id.present:
			wantPresent = append(wantPresent, k)
		default:
			wantAbsent = append(wantAbsent, k)
		}
	}
	mu.Unlock()
	sort.Strings(wantPresent)
	var lost, undone []string
	views := map[string][]string{}
	for _, svc := range defaultServices {
		var got []string
		e2e.Eventually(cacheBound, func() bool {
			g, _, _, err := instanceIDs(client, p.url(svc), app)
			if err != nil || g == nil {
				return false
			}
			got = g
			return len(missing(wantPresent, g)) == 0 && len(missing(g, wantPresent)) <= countAmbiguous(ids, &mu)
		})
		views[svc] = got
		lost = append(lost, prefixed(svc, missing(wantPresent, got))...)
		have := map[string]bool{}
		for _, g := range got {
			have[g] = true
		}
		for _, a := range wantAbsent {
			if have[a] {
				undone = append(undone, svc+":"+a)
			}
		}
	}
	equal := true
	for _, svc := range defaultServices[1:] {
		if strings.Join(views[svc], ",") != strings.Join(views[defaultServices[0]], ",") {
			equal = false
		}
	}
	fmt.Printf("soak: %v, faults %d (kills %d, pauses %d, partitions %d); acknowledged: %d registrations, %d cancels, %d heartbeats; %d writes unacknowledged; %d acknowledged writes lost, %d acknowledged cancels undone, nodes equal: %v (%d instances)\n",
		d, kills+pauses+parts, kills, pauses, parts, regs.Load(), cancels.Load(), beats.Load(), unacked.Load(), len(lost), len(undone), equal, len(views[defaultServices[0]]))
	if len(lost) > 0 || len(undone) > 0 || !equal {
		t.Fatalf("lost %v; undone %v; nodes equal %v", head(lost), head(undone), equal)
	}
}

func countAmbiguous(ids map[string]*soakID, mu *sync.Mutex) int {
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, id := range ids {
		if id.ambiguous {
			n++
		}
	}
	return n
}

func prefixed(p string, s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = p + ":" + x
	}
	return out
}
