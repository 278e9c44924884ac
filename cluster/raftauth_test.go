package cluster

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/nodeapi"
)

const testSecret = "a-cluster-secret-for-tests"

// syncBuffer is a log sink tests read while the transport writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// secretTransport is a real TCP Raft transport of a node with the given
// secret, on 127.0.0.1, its log going to the returned buffer. Every RPC it
// receives is answered with the term it carried and counted.
func secretTransport(t *testing.T, id, secret string) (*raft.NetworkTransport, *syncBuffer, *int32Counter) {
	t.Helper()
	logs := &syncBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})
	adv := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	s, err := newStreamLayer("127.0.0.1:0", adv, id, streamOptions{Secret: secret, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	s.advertise = s.ln.Addr()
	// Every refusal logged: the tests' peers all come from 127.0.0.1.
	s.refusals = nodeapi.NewRefusalLog(0)
	tr := raft.NewNetworkTransport(s, 2, 2*time.Second, io.Discard)
	t.Cleanup(func() { tr.Close() })
	got := &int32Counter{}
	go func() {
		for rpc := range tr.Consumer() {
			got.add()
			req, _ := rpc.Command.(*raft.AppendEntriesRequest)
			var term uint64
			if req != nil {
				term = req.Term
			}
			rpc.Respond(&raft.AppendEntriesResponse{Term: term, Success: true}, nil)
		}
	}()
	return tr, logs, got
}

type int32Counter struct {
	mu sync.Mutex
	n  int
}

func (c *int32Counter) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *int32Counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func appendReq(from string, term uint64) *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(from), Addr: []byte(from)},
		Term:      term,
	}
}

func TestRaftAuth_SameSecretTalks(t *testing.T) {
	a, _, _ := secretTransport(t, "n1", testSecret)
	b, _, got := secretTransport(t, "n2", testSecret)
	var resp raft.AppendEntriesResponse
	if err := a.AppendEntries("n2", b.LocalAddr(), appendReq("n1", 7), &resp); err != nil {
		t.Fatalf("append between nodes with the same secret: %v", err)
	}
	if resp.Term != 7 || got.get() != 1 {
		t.Fatalf("answer %+v after %d RPCs", resp, got.get())
	}
}

// TestRaftAuth_OutsidersRefused: a plain Raft transport (preamble, no
// proof), one speaking no preamble at all, and a node with another secret
// get no RPC through, and the acceptor logs each with the remote address
// and, where it claimed one, the node id.
func TestRaftAuth_OutsidersRefused(t *testing.T) {
	b, logs, got := secretTransport(t, "n2", testSecret)

	plain, err := newStreamLayer("127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, "intruder", streamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pt := raft.NewNetworkTransport(plain, 1, 2*time.Second, io.Discard)
	defer pt.Close()
	var resp raft.AppendEntriesResponse
	if err := pt.AppendEntries("n2", b.LocalAddr(), appendReq("intruder", 100), &resp); err == nil {
		t.Fatalf("a peer without the secret got an answer: %+v", resp)
	}

	wrong, wrongLogs, _ := secretTransport(t, "n9", "another-cluster-secret")
	err = wrong.AppendEntries("n2", b.LocalAddr(), appendReq("n9", 100), &resp)
	if err == nil {
		t.Fatalf("a peer with another secret got an answer: %+v", resp)
	}
	// The dialer names the peer it could not prove itself to.
	if !strings.Contains(err.Error(), `"n2"`) {
		t.Errorf("dialer's error does not name the peer: %v", err)
	}

	// A raw RPC with no preamble at all.
	conn, err := net.Dial("tcp", string(b.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte{0, 0x85, 0xa4, 'T', 'e', 'r', 'm', 0x64})
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, _ := conn.Read(make([]byte, 1)); n != 0 {
		t.Error("a connection without a preamble got an answer")
	}
	conn.Close()

	if n := got.get(); n != 0 {
		t.Fatalf("%d RPCs reached Raft from outsiders", n)
	}
	waitLog(t, logs, "claimed_node=intruder")
	waitLog(t, logs, "claimed_node=n9")
	waitLog(t, logs, "not a heureka raft connection")
	if !strings.Contains(logs.String(), "remote=127.0.0.1:") {
		t.Errorf("refusals do not name the remote address:\n%s", logs)
	}
	if !strings.Contains(wrongLogs.String(), "peer_node=n2") {
		t.Errorf("the wrong-secret dialer's log does not name n2:\n%s", wrongLogs)
	}
}

// TestRaftAuth_ReplayRefused records what a member sent on one connection
// and sends it again on another: the acceptor's new nonce makes the old
// proof worthless.
func TestRaftAuth_ReplayRefused(t *testing.T) {
	b, logs, got := secretTransport(t, "n2", testSecret)
	// A recording relay in front of b.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var rec syncBuffer
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", string(b.LocalAddr()))
		if err != nil {
			c.Close()
			return
		}
		go func() { _, _ = io.Copy(up, io.TeeReader(c, &rec)); up.Close() }()
		_, _ = io.Copy(c, up)
		c.Close()
	}()
	a, _, _ := secretTransport(t, "n1", testSecret)
	var resp raft.AppendEntriesResponse
	if err := a.AppendEntries("n2", raft.ServerAddress(ln.Addr().String()), appendReq("n1", 3), &resp); err != nil {
		t.Fatalf("member through the relay: %v", err)
	}
	if got.get() != 1 {
		t.Fatalf("%d RPCs", got.get())
	}
	conn, err := net.Dial("tcp", string(b.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(rec.String()))
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	// The acceptor's identity answer and hello come back, then the
	// connection closes: no proof and no Raft answer.
	out, _ := io.ReadAll(conn)
	if len(out) > len(identityFrame(""))+1+len(raftAuthMagic)+1+len("n2")+nonceLen {
		t.Fatalf("replay got %d bytes back, more than the acceptor's hello", len(out))
	}
	if got.get() != 1 {
		t.Fatalf("a replayed transcript reached Raft")
	}
	waitLog(t, logs, errBadProof.Error())
}

func TestRefusalLog_RateLimits(t *testing.T) {
	l := nodeapi.NewRefusalLog(10 * time.Second)
	t0 := time.Unix(1000, 0)
	if _, ok := l.Allow("10.0.0.1", t0); !ok {
		t.Fatal("first refusal not logged")
	}
	for i := 1; i <= 5; i++ {
		if _, ok := l.Allow("10.0.0.1", t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatal("refusal within the window logged")
		}
	}
	if _, ok := l.Allow("10.0.0.2", t0.Add(time.Second)); !ok {
		t.Fatal("another host's refusal suppressed")
	}
	if n, ok := l.Allow("10.0.0.1", t0.Add(11*time.Second)); !ok || n != 5 {
		t.Fatalf("after the window: logged %v, suppressed %d, want 5", ok, n)
	}
}

func waitLog(t *testing.T, logs *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log never said %q:\n%s", want, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// oldStream is the stream layer of a heureka from before the identity
// frame: it strips the preamble and hands the rest to Raft.
type oldStream struct{ net.Listener }

func (s *oldStream) Accept() (net.Conn, error) {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			return nil, err
		}
		br := bufio.NewReader(c)
		if _, err := ReadPreamble(br); err != nil {
			c.Close()
			continue
		}
		return &bufferedConn{Conn: c, r: br}, nil
	}
}

func (s *oldStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// TestIdentity_OlderPeer: without a secret, a node that names its cluster
// still reaches a peer that predates the identity frame (a rolling
// upgrade): the peer drops the first connection, the dialer falls back to
// the preamble alone.
func TestIdentity_OlderPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	old := raft.NewNetworkTransport(&oldStream{ln}, 2, 2*time.Second, io.Discard)
	defer old.Close()
	go func() {
		for rpc := range old.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: rpc.Command.(*raft.AppendEntriesRequest).Term}, nil)
		}
	}()
	s, err := newStreamLayer("127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, "n1",
		streamOptions{ClusterID: func() string { return "c-new" }})
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransport(s, 2, 2*time.Second, io.Discard)
	defer tr.Close()
	var resp raft.AppendEntriesResponse
	if err := tr.AppendEntries("old", old.LocalAddr(), appendReq("n1", 9), &resp); err != nil || resp.Term != 9 {
		t.Fatalf("append to an older peer: %+v %v", resp, err)
	}
	if !s.legacy.is(string(old.LocalAddr()), time.Now()) {
		t.Fatal("the older peer is not remembered")
	}
}

// TestIdentity_Mismatch: nodes of two clusters refuse each other on both
// ends; a node that does not know its cluster yet is taken by a member of
// a cluster only if it is in that member's configuration, and it takes a
// named peer.
func TestIdentity_Mismatch(t *testing.T) {
	members := map[string]bool{"n4": true}
	member := func(id string) bool { return members[id] }
	mk := func(id, cluster string) (*raft.NetworkTransport, *syncBuffer, *int32Counter) {
		buf := &syncBuffer{}
		s, err := newStreamLayer("127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, id, streamOptions{
			ClusterID: func() string { return cluster }, Member: member, Log: hclog.New(&hclog.LoggerOptions{Output: buf})})
		if err != nil {
			t.Fatal(err)
		}
		s.advertise = s.ln.Addr()
		s.refusals = nodeapi.NewRefusalLog(0)
		nt := raft.NewNetworkTransport(s, 2, 2*time.Second, io.Discard)
		t.Cleanup(func() { nt.Close() })
		n := &int32Counter{}
		go func() {
			for rpc := range nt.Consumer() {
				n.add()
				rpc.Respond(&raft.AppendEntriesResponse{}, nil)
			}
		}()
		return nt, buf, n
	}
	a, aLog, _ := mk("n1", "c-a")
	b, bLog, bGot := mk("n2", "c-b")
	fresh, _, _ := mk("n3", "")
	var resp raft.AppendEntriesResponse
	if err := a.AppendEntries("n2", b.LocalAddr(), appendReq("n1", 1), &resp); err == nil {
		t.Fatal("a node of another cluster was answered")
	}
	if bGot.get() != 0 {
		t.Fatal("an RPC from another cluster reached Raft")
	}
	waitLog(t, aLog, "peer_cluster=c-b cluster=c-a")
	waitLog(t, bLog, "peer_cluster=c-a cluster=c-b")
	// n3 names no cluster and is not in b's configuration: refused, both
	// ends say why.
	if err := fresh.AppendEntries("n2", b.LocalAddr(), appendReq("n3", 1), &resp); err == nil || !strings.Contains(err.Error(), "names no cluster yet") {
		t.Fatalf("a stranger without a cluster identity: %v, want refused", err)
	}
	waitLog(t, bLog, `node \"n3\" names no cluster`)
	// n4 names none either, but b's configuration lists it: taken.
	member4, _, _ := mk("n4", "")
	if err := member4.AppendEntries("n2", b.LocalAddr(), appendReq("n4", 1), &resp); err != nil {
		t.Fatalf("a member without a cluster identity yet: %v", err)
	}
	// A node that names none takes a named peer (a new node, dialed by
	// its leader).
	if err := a.AppendEntries("n3", fresh.LocalAddr(), appendReq("n1", 1), &resp); err != nil {
		t.Fatalf("a new node refused its leader: %v", err)
	}
}
