package e2e

// The Raft port under a cluster secret (docs/security.md, "Node-to-node
// traffic"): with --cluster-secret, a process that does not hold the secret
// cannot append to a follower's Raft log, and a node started with a wrong
// secret never takes part. TestRaftPlainAnswersRawClient is the control: the
// same client against a cluster without a secret is answered.

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/e2e/intruder"
)

const e2eSecret = "an-e2e-cluster-secret-0123"

func TestRaftSecretRefusesOutsiders(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: []string{"--cluster-secret", e2eSecret}})
	leader := c.WaitLeader(t, 15*time.Second)
	f := c.Followers(leader)[0]
	before := f.Status(t)

	// hashicorp/raft's own NetworkTransport: the preamble, then the
	// rpcAppendEntries type byte and the msgpack-encoded request.
	resp, err := intruder.RaftAppend(intruder.DialTCP, f.RaftAddr, before.Term, before.CommitIndex)
	if err == nil {
		t.Fatalf("AppendEntries without the secret answered %+v", resp)
	}
	t.Logf("refused: %v", err)

	if l := c.WaitLeader(t, 5*time.Second); l.ID != leader.ID {
		t.Fatalf("leader changed from %s to %s", leader.ID, l.ID)
	}
	if st := f.Status(t); st.Term != before.Term {
		t.Fatalf("follower term moved from %d to %d", before.Term, st.Term)
	}
	for _, nd := range c.Nodes {
		if code, _, _ := Do(t, "GET", nd.URL("/eureka/apps/EVIL/evil-1?consistency=stale"), nil); code != 404 {
			t.Fatalf("%s: EVIL/evil-1 answered %d", nd.ID, code)
		}
	}
	WaitFor(t, 5*time.Second, func() bool {
		return strings.Contains(readLog(t, f.LogPath), "raft connection refused") &&
			strings.Contains(readLog(t, f.LogPath), "claimed_node=intruder")
	}, "the follower to log the refused connection")
	// The cluster still replicates under the secret.
	if code, b, _ := Do(t, "POST", leader.URL("/eureka/apps/GOOD"), RegisterBody("GOOD", "good-1", nil)); code != 204 {
		t.Fatalf("register: %d %s", code, b)
	}
	for _, nd := range c.Nodes {
		WaitFor(t, 10*time.Second, func() bool {
			code, _, _ := Do(t, "GET", nd.URL("/eureka/apps/GOOD/good-1?consistency=stale"), nil)
			return code == 200
		}, "GOOD/good-1 replicated to "+nd.ID)
	}
}

// TestRaftSecretWrongSecretNode: n3 is in the initial cluster but was given
// another secret. n1 and n2 elect a leader without it; n3 never learns of a
// leader nor gets an entry, and the leader's log names n3.
func TestRaftSecretWrongSecretNode(t *testing.T) {
	c := StartCluster(t, 3, Options{
		ExtraArgs: []string{"--cluster-secret", e2eSecret},
		NodeArgs: func(id string) []string {
			if id == "n3" {
				return []string{"--cluster-secret", "a-different-secret-0123"}
			}
			return nil
		},
	})
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")
	var leader *Node
	WaitFor(t, 20*time.Second, func() bool {
		for _, nd := range []*Node{n1, n2} {
			st := nd.Status(t)
			if st.State == "Leader" {
				leader = nd
				return true
			}
		}
		return false
	}, "n1 or n2 to lead")
	if code, b, _ := Do(t, "POST", leader.URL("/eureka/apps/GOOD"), RegisterBody("GOOD", "good-1", nil)); code != 204 {
		t.Fatalf("register: %d %s", code, b)
	}
	WaitFor(t, 10*time.Second, func() bool {
		return strings.Contains(readLog(t, leader.LogPath), `peer_node=n3`)
	}, "the leader's log to name n3")
	time.Sleep(2 * time.Second)
	st := n3.Status(t)
	if st.State == "Leader" || st.Leader != "" || st.CommitIndex != 0 {
		t.Fatalf("n3 with a wrong secret took part: state %s, leader %q, commit %d", st.State, st.Leader, st.CommitIndex)
	}
	if code, _, _ := Do(t, "GET", n3.URL("/eureka/apps/GOOD/good-1?consistency=stale"), nil); code == 200 {
		t.Fatal("n3 with a wrong secret has the registration")
	}
	for _, line := range strings.Split(readLog(t, leader.LogPath), "\n") {
		if strings.Contains(line, "peer_node=n3") {
			t.Logf("leader's log: %s", line)
			break
		}
	}
}

// TestRaftSecretJoin: a fourth node given the cluster's secret joins
// through --join and becomes a voter that replicates; a fifth with a wrong
// secret never becomes a member, and the leader's log names it with its
// address.
func TestRaftSecretJoin(t *testing.T) {
	c := StartCluster(t, 3, Options{ExtraArgs: []string{"--cluster-secret", e2eSecret}})
	leader := c.WaitLeader(t, 15*time.Second)
	if code, b, _ := Do(t, "POST", leader.URL("/eureka/apps/GOOD"), RegisterBody("GOOD", "good-1", nil)); code != 204 {
		t.Fatalf("register: %d %s", code, b)
	}
	n4 := c.StartNode(t, "n4", leader.HTTPAddr)
	WaitFor(t, 30*time.Second, func() bool {
		for _, m := range leader.Members(t).Members {
			if m.ID == "n4" {
				return m.Voter
			}
		}
		return false
	}, "n4 (the right secret) to join as a voter")
	WaitFor(t, 10*time.Second, func() bool {
		code, _, _ := Do(t, "GET", n4.URL("/eureka/apps/GOOD/good-1?consistency=stale"), nil)
		return code == 200
	}, "GOOD/good-1 replicated to n4")

	c.opts.NodeArgs = func(id string) []string {
		if id == "n5" {
			return []string{"--cluster-secret", "a-different-secret-0123"}
		}
		return nil
	}
	n5 := c.StartNode(t, "n5", leader.HTTPAddr)
	WaitFor(t, 15*time.Second, func() bool {
		return strings.Contains(readLog(t, leader.LogPath), "claimed_node=n5")
	}, "the leader's log to name n5")
	for _, line := range strings.Split(readLog(t, leader.LogPath), "\n") {
		if strings.Contains(line, "claimed_node=n5") {
			t.Logf("leader's log: %s", line)
			break
		}
	}
	// n5 keeps asking (once a second); it never becomes a member.
	for range 5 {
		for _, m := range leader.Members(t).Members {
			if m.ID == "n5" {
				t.Fatalf("n5 with a wrong secret is a member: %+v", m)
			}
		}
		time.Sleep(time.Second)
	}
	if st := n5.Status(t); st.Leader != "" || st.CommitIndex != 0 {
		t.Fatalf("n5 with a wrong secret took part: leader %q, commit %d", st.Leader, st.CommitIndex)
	}
	if !strings.Contains(n5.LogTail(40), "join answered 403") {
		t.Errorf("n5's log does not show its join refused:\n%s", n5.LogTail(20))
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
