package e2e

// Raft over TLS (docs/security.md, "TLS"): with --raft-tls, a process that is not a cluster member
// cannot append to the Raft log: not with raw TCP (preamble and Raft's own
// RPC encoding, no certificate), not over TLS without a certificate, not
// with a certificate from another CA. A client with a certificate from the
// cluster's CA, sending the same kind of request, does get a Raft answer,
// which shows the test client speaks the protocol. Joining through HTTP
// needs the cluster secret (TestAuthThreeNodes).

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/e2e/intruder"
)

// raftClient is an intruder's Raft transport whose connections come from
// dial, closed when the test ends.
func raftClient(t *testing.T, dial intruder.DialFunc) *raft.NetworkTransport {
	t.Helper()
	tr, err := intruder.RaftTransport(dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestRaftTLSRefusesOutsiders(t *testing.T) {
	ca := newTLSCA(t, "raft-ca")
	caFile, certs := ca.nodeFiles(t, t.TempDir(), "n1", "n2", "n3")
	c := StartCluster(t, 3, Options{
		ExtraArgs: []string{"--raft-tls", "--tls-ca", caFile},
		NodeArgs: func(id string) []string {
			return []string{"--tls-cert", certs[id][0], "--tls-key", certs[id][1]}
		},
		ClientTLS: ca.clientConfig(t, nil),
	})
	leader := c.WaitLeader(t, 15*time.Second)
	f := c.Followers(leader)[0]
	before := f.Status(t)

	dialTLS := func(cfg *tls.Config) func(string, time.Duration) (net.Conn, error) {
		return func(addr string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, cfg)
		}
	}
	other := newTLSCA(t, "other-ca")
	outsiders := []struct {
		name string
		dial intruder.DialFunc
	}{
		{"raw TCP, no certificate", intruder.DialTCP},
		{"TLS without a certificate", dialTLS(ca.clientConfig(t, nil))},
		{"TLS with a certificate from another CA", dialTLS(ca.clientConfig(t, other))},
	}
	for _, o := range outsiders {
		resp, err := intruder.RaftAppend(o.dial, f.RaftAddr, before.Term, before.CommitIndex)
		if err == nil {
			t.Errorf("%s: AppendEntries answered %+v", o.name, resp)
			continue
		}
		t.Logf("%s: refused: %v", o.name, err)
	}

	// Control: a member's certificate gets a Raft answer to a stale append
	// (term 0): refused by Raft itself, naming the current term.
	member := raftClient(t, dialTLS(ca.clientConfig(t, ca)))
	var resp raft.AppendEntriesResponse
	stale := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n-control"), Addr: []byte(member.LocalAddr())}, Term: 0}
	if err := member.AppendEntries("n-target", raft.ServerAddress(f.RaftAddr), stale, &resp); err != nil {
		t.Fatalf("control: a client with a member certificate got no Raft answer: %v", err)
	}
	if resp.Success || resp.Term < before.Term {
		t.Fatalf("control: stale append answered %+v (term before %d)", resp, before.Term)
	}

	// Nothing changed: same leader and term, no EVIL instance anywhere, and
	// the cluster still replicates.
	if l := c.WaitLeader(t, 5*time.Second); l.ID != leader.ID {
		t.Fatalf("leader changed from %s to %s", leader.ID, l.ID)
	}
	if st := f.Status(t); st.Term != before.Term {
		t.Fatalf("follower term moved from %d to %d", before.Term, st.Term)
	}
	tcl := c.Nodes[0]
	for _, nd := range c.Nodes {
		code, _, _ := tlsDo(t, nd, "GET", "/eureka/apps/EVIL/evil-1?consistency=stale", nil)
		if code != 404 {
			t.Fatalf("%s: EVIL/evil-1 answered %d", nd.ID, code)
		}
	}
	if code, b, _ := tlsDo(t, tcl, "POST", "/eureka/apps/GOOD", RegisterBody("GOOD", "good-1", nil)); code != 204 {
		t.Fatalf("register after the attempts: %d %s", code, b)
	}
	for _, nd := range c.Nodes {
		WaitFor(t, 10*time.Second, func() bool {
			code, _, _ := tlsDo(t, nd, "GET", "/eureka/apps/GOOD/good-1?consistency=stale", nil)
			return code == 200
		}, "GOOD/good-1 replicated to "+nd.ID+" over Raft TLS")
	}
}

// TestRaftPlainAnswersRawClient is the control for the test above: without
// --raft-tls (the default), the same raw TCP client gets a Raft answer,
// and its hostile append makes the follower adopt the made-up term.
func TestRaftPlainAnswersRawClient(t *testing.T) {
	c := StartCluster(t, 3, Options{})
	leader := c.WaitLeader(t, 15*time.Second)
	f := c.Followers(leader)[0]
	before := f.Status(t)
	resp, err := intruder.RaftAppend(intruder.DialTCP, f.RaftAddr, before.Term, before.CommitIndex)
	if err != nil {
		t.Fatalf("plain Raft: raw client got no answer: %v", err)
	}
	if resp.Term != before.Term+100 {
		t.Fatalf("plain Raft: answer %+v, want the made-up term %d adopted", resp, before.Term+100)
	}
	t.Logf("plain Raft: a raw TCP client's append was answered: term %d, success %v", resp.Term, resp.Success)
}

// tlsDo sends one request to nd with the harness's TLS client config.
func tlsDo(t *testing.T, nd *Node, method, path string, body []byte) (int, []byte, error) {
	t.Helper()
	cl := nd.Client()
	if !strings.HasPrefix(nd.BaseURL(), "https://") {
		t.Fatal("node has no TLS client")
	}
	code, b, err := doWith(cl, method, nd.URL(path), body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return code, b, nil
}

func doWith(cl *http.Client, method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
