package compose

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/e2e"
)

// up: three healthy nodes and a leader; a write through node 1 is read on
// node 3; the five profile adds two voters; the CLI removes a member.
func TestComposeUp(t *testing.T) {
	p := newProject(t, "heurekaup", 21761)
	p.up()
	if err := register(client, p.url("heureka1"), "UPAPP", "up-1", 90); err != nil {
		t.Fatal(err)
	}
	p.waitAll([]string{"heureka3"}, "UPAPP", []string{"up-1"}, cacheBound)

	p.up("five")
	e2e.WaitFor(t, 60*time.Second, func() bool {
		members, err := p.members("heureka1")
		if err != nil {
			return false
		}
		return e2e.Voters(members) == 5
	}, "five voters")
	p.waitAll([]string{"heureka4", "heureka5"}, "UPAPP", []string{"up-1"}, cacheBound)

	out := p.must(time.Minute, "exec", "-T", "heureka1", "heureka", "members", "remove", "n5")
	t.Logf("heureka members remove n5: %s", strings.TrimSpace(out))
	e2e.WaitFor(t, 20*time.Second, func() bool {
		members, err := p.members("heureka2")
		if err != nil {
			return false
		}
		for _, m := range members {
			if m.ID == "n5" {
				return false
			}
		}
		return len(members) == 4
	}, "n5 removed, four members left")
	listed := p.must(time.Minute, "exec", "-T", "heureka1", "heureka", "members")
	if strings.Contains(listed, "n5") {
		t.Fatalf("heureka members still lists n5:\n%s", listed)
	}
}

// acked records writes the cluster acknowledged.
type acked struct {
	ids []string
}

// writeRetrying registers app/id through the services in turn until one
// acknowledges it (a leader change or a dead node costs retries, not the
// write); it fails the test after timeout.
func (a *acked) writeRetrying(t *testing.T, p *project, svcs []string, app, id string, leaseSecs int, timeout time.Duration) {
	t.Helper()
	var last error
	deadline := time.Now().Add(timeout)
	for i := 0; time.Now().Before(deadline); i++ {
		if last = register(client, p.url(svcs[i%len(svcs)]), app, id, leaseSecs); last == nil {
			a.ids = append(a.ids, id)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("register %s/%s not acknowledged within %v: %v", app, id, timeout, last)
}

// crash: docker kill of the leader's container; a new leader takes over,
// writes continue, the old node comes back and catches up, and nothing
// acknowledged is lost.
func TestComposeCrash(t *testing.T) {
	p := newProject(t, "heurekacrash", 21771)
	p.up()
	old := p.waitLeader(defaultServices...)
	var a acked
	for i := range 20 {
		a.writeRetrying(t, p, defaultServices, "CRASH", fmt.Sprintf("before-%02d", i), 600, 20*time.Second)
	}
	docker(t, "kill", p.container(old))
	survivors := others(defaultServices, old)
	var leader string
	e2e.WaitFor(t, 30*time.Second, func() bool {
		st, err := p.status(survivors[0])
		leader = serviceOf(st.Leader)
		return err == nil && st.Leader != "" && leader != old
	}, "a new leader after the kill")
	t.Logf("leader %s killed; %s leads", old, leader)
	for i := range 20 {
		a.writeRetrying(t, p, survivors, "CRASH", fmt.Sprintf("after-%02d", i), 600, 20*time.Second)
	}
	p.must(time.Minute, "start", old)
	p.waitHealthy(old)
	p.waitAll(defaultServices, "CRASH", a.ids, cacheBound)
	p.waitLeader(defaultServices...)
}

// partition: docker network disconnect of one follower. In ap the cut-off
// node answers reads marked stale and journals writes, the majority keeps
// going, and after healing the journal is replayed everywhere; in cp the
// cut-off node answers 503 to reads and writes.
func TestComposePartition(t *testing.T) {
	if os.Geteuid() != 0 {
		// The cut-off node is reached inside its network namespace.
		e2e.ToolOrSkip(t, "container partition", errors.New("it needs root (it enters the cut-off container's network namespace)"))
	}
	p := newProject(t, "heurekapart", 21781)
	p.up()
	leader := p.waitLeader(defaultServices...)
	iso := others(defaultServices, leader)[0]
	majority := others(defaultServices, iso)
	network := p.network()
	if err := register(client, p.url(leader), "PART", "base", 600); err != nil {
		t.Fatal(err)
	}
	p.waitAll(defaultServices, "PART", []string{"base"}, cacheBound)
	isoC := p.container(iso)
	in := p.reach(iso)

	cut := func() {
		docker(t, "network", "disconnect", network, isoC)
		e2e.WaitFor(t, 30*time.Second, func() bool {
			st, err := getStatus(in, inContainer)
			return err == nil && st.QuorumLost
		}, iso+" loses quorum")
	}
	heal := func() {
		// The service name is the node's address in the cluster: it must
		// come back as an alias.
		docker(t, "network", "connect", "--alias", iso, network, isoC)
	}

	// ap
	cut()
	ids, code, hdr, err := instanceIDs(in, inContainer, "PART")
	if err != nil || code != 200 || len(missing([]string{"base"}, ids)) > 0 || hdr.Get("X-Heureka-Stale") != "true" {
		t.Fatalf("ap read on the cut-off node: %v %d %v stale=%q, want 200 with base, marked stale", err, code, ids, hdr.Get("X-Heureka-Stale"))
	}
	if err := register(in, inContainer, "PART", "minority", 600); err != nil {
		t.Fatalf("ap write on the cut-off node: %v", err)
	}
	if st, err := getStatus(in, inContainer); err != nil || st.JournalEntries != 1 {
		t.Fatalf("cut-off node journal: %+v %v, want 1 entry", st, err)
	}
	var a acked
	a.writeRetrying(t, p, majority, "PART", "majority", 600, 20*time.Second)
	heal()
	e2e.WaitFor(t, 30*time.Second, func() bool {
		st, err := p.status(iso)
		return err == nil && st.JournalEntries == 0 && st.Quorum
	}, "journal replayed after healing")
	p.waitAll(defaultServices, "PART", []string{"base", "minority", "majority"}, cacheBound)

	// cp
	p.must(time.Minute, "exec", "-T", leader, "heureka", "mode", "cp")
	e2e.WaitFor(t, 10*time.Second, func() bool { st, err := p.status(iso); return err == nil && st.Mode == "cp" }, "cp on "+iso)
	cut()
	if _, code, _, err := instanceIDs(in, inContainer, "PART"); err != nil || code != 503 {
		t.Fatalf("cp read on the cut-off node: %d %v, want 503", code, err)
	}
	if code, body, _, err := do(in, "POST", inContainer+"/eureka/apps/PART", e2e.RegisterBody("PART", "refused", nil)); err != nil || code != 503 {
		t.Fatalf("cp write on the cut-off node: %d %s %v, want 503", code, body, err)
	}
	a.writeRetrying(t, p, majority, "PART", "majority-cp", 600, 20*time.Second)
	heal()
	e2e.WaitFor(t, 30*time.Second, func() bool { st, err := p.status(iso); return err == nil && st.Quorum }, iso+" back in the cluster")
	p.waitAll(defaultServices, "PART", []string{"base", "minority", "majority", "majority-cp"}, cacheBound)
	for _, svc := range defaultServices {
		if ids, _, _, _ := instanceIDs(client, p.url(svc), "PART"); contains(ids, "refused") {
			t.Fatalf("%s holds the write refused in cp", svc)
		}
	}
}
