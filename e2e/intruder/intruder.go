// Package intruder is a process that is not a member of a cluster and
// tries to change it through every door of the control plane
// (docs/security.md, "What the tests show"): the operator API's changes,
// the node-to-node endpoints, and the Raft port. The e2e tests send these
// attacks from the test process; the container tests (e2e/compose) from a
// container of the project's image on the compose network (the command
// e2e/compose/intruder). It speaks the node-to-node protocols, so unlike
// the black-box harness (package e2e) it imports their encodings: it
// imports cluster, fsm, internal/testkit/launch and nodeapi.
package intruder

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/internal/testkit/launch"
	"github.com/heureka-registry/heureka/nodeapi"
)

// Attack is one HTTP call that would change the cluster.
type Attack struct {
	Name         string
	Method, Path string
	Body         []byte
	Headers      []string // name/value pairs
}

// WrongSecret is the cluster-secret header an intruder guesses.
var WrongSecret = []string{nodeapi.SecretHeader, "a-wrong-secret-0123456789"}

// BadAppNames are application names the public API refuses (a path
// separator, a control character) that an intruder sends as
// already-encoded commands.
var BadAppNames = []string{"EVIL/../X", "EVIL\x01CTRL"}

// Control are the calls of an intruder against a cluster: remove
// member victim (and tell it it is out), add a made-up voter, switch the
// mode, restore snap (an old snapshot), and store registrations with bad
// names through the node-to-node API.
func Control(victim string, snap []byte) ([]Attack, error) {
	fake := []byte(`{"id":"evil","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`)
	octet := []string{"Content-Type", "application/octet-stream"}
	attacks := []Attack{
		{Name: "remove a member", Method: "DELETE", Path: "/v1/members/" + victim},
		{Name: "add a voter", Method: "POST", Path: "/v1/members", Body: fake},
		{Name: "mode cp", Method: "PUT", Path: "/v1/mode?mode=cp"},
		{Name: "restore a snapshot", Method: "POST", Path: "/v1/snapshot", Body: snap, Headers: octet},
		{Name: "internal join", Method: "POST", Path: nodeapi.PathJoin, Body: fake},
		{Name: "internal remove", Method: "POST", Path: nodeapi.PathRemove, Body: []byte(`{"id":"` + victim + `"}`)},
		{Name: "internal membership false", Method: "POST", Path: nodeapi.PathMembership, Body: []byte(`{"id":"` + victim + `","member":false}`)},
		{Name: "internal restore", Method: "POST", Path: nodeapi.PathRestore, Body: snap, Headers: octet},
	}
	for _, app := range BadAppNames {
		entry, err := EncodeRegister(app, "evil-1")
		if err != nil {
			return nil, err
		}
		attacks = append(attacks, Attack{Name: "internal apply " + strconv.Quote(app), Method: "POST", Path: nodeapi.PathApply, Body: entry, Headers: octet})
	}
	return attacks, nil
}

// Send sends the attack to base (http://host:port) with c, adding the
// extra headers (WrongSecret, or none).
func (a Attack) Send(c *http.Client, base string, extra ...string) (int, []byte, error) {
	hdr := http.Header{}
	all := append(append([]string(nil), a.Headers...), extra...)
	for i := 0; i+1 < len(all); i += 2 {
		hdr.Set(all[i], all[i+1])
	}
	code, body, _, err := launch.Send(context.Background(), c, a.Method, base+a.Path, a.Body, hdr)
	return code, body, err
}

// RefusedStatus is what a node with a cluster secret answers an attack:
// 401 without a secret, 403 with a wrong one.
func RefusedStatus(extra []string) int {
	if len(extra) > 0 {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// EncodeRegister is a registration of app/id as the node-to-node API
// carries it (fsm's encoding).
func EncodeRegister(app, id string) ([]byte, error) {
	entry, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: &fsm.Instance{
		InstanceID: id, HostName: "h.test", App: app, IPAddr: "10.0.0.9", Status: "UP",
		DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}, DurationSecs: 90, RenewalIntervalSecs: 30,
	}})
	if err != nil {
		return nil, fmt.Errorf("encode registration of %q: %w", app, err)
	}
	return entry, nil
}

// DialFunc opens the connection a Raft client writes to.
type DialFunc func(addr string, timeout time.Duration) (net.Conn, error)

// DialTCP is a plain TCP DialFunc.
func DialTCP(addr string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, timeout)
}

// rawStream is a raft.StreamLayer for an intruder: dial sets up the
// connection (raw TCP or TLS), then heureka's preamble is written, naming
// the node "intruder", and nothing else: no cluster identity, no proof of
// a secret.
type rawStream struct {
	net.Listener
	dial DialFunc
}

func (s *rawStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := s.dial(string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if err := cluster.WritePreamble(conn, "intruder"); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// RaftTransport is hashicorp/raft's own NetworkTransport, whose connections
// come from dial: its requests are Raft's encoding (a type byte, then
// msgpack). The caller closes it.
func RaftTransport(dial DialFunc) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("raft intruder listener: %w", err)
	}
	return raft.NewNetworkTransport(&rawStream{Listener: ln, dial: dial}, 1, 3*time.Second, io.Discard), nil
}

// HostileAppend is an AppendEntries from a made-up leader ("intruder", at
// from) with a term 100 above term, carrying one registration of
// EVIL/evil-1 right after index commit.
func HostileAppend(term, commit uint64, from string) (*raft.AppendEntriesRequest, error) {
	entry, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: &fsm.Instance{
		InstanceID: "evil-1", HostName: "evil.test", App: "EVIL", IPAddr: "10.66.6.6", Status: "UP",
		DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}, DurationSecs: 90, RenewalIntervalSecs: 30,
	}})
	if err != nil {
		return nil, fmt.Errorf("encode the injected registration: %w", err)
	}
	_ = fsm.Stamp(entry, time.Now().UnixMilli())
	return &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(from)},
		Term:              term + 100,
		PrevLogEntry:      commit,
		PrevLogTerm:       term,
		Entries:           []*raft.Log{{Index: commit + 1, Term: term + 100, Type: raft.LogCommand, Data: entry}},
		LeaderCommitIndex: commit + 1,
	}, nil
}

// RaftAppend sends HostileAppend to the Raft port at addr of a node whose
// term and commit index are given, and returns the node's answer, or the
// error of a refused connection.
func RaftAppend(dial DialFunc, addr string, term, commit uint64) (*raft.AppendEntriesResponse, error) {
	tr, err := RaftTransport(dial)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	req, err := HostileAppend(term, commit, string(tr.LocalAddr()))
	if err != nil {
		return nil, err
	}
	var resp raft.AppendEntriesResponse
	if err := tr.AppendEntries("n-target", raft.ServerAddress(addr), req, &resp); err != nil {
		return nil, fmt.Errorf("append entries to %s: %w", addr, err)
	}
	return &resp, nil
}

// Result is one attempt of the intruder command, as it prints it
// (one JSON object a line).
type Result struct {
	Node   string `json:"node"`   // the node's address
	Attack string `json:"attack"` // Attack.Name, or "raft append entries"
	Secret string `json:"secret"` // "none" or "wrong"
	Code   int    `json:"code,omitempty"`
	// Refused is whether the node refused it as a node with a secret must
	// (RefusedStatus; for Raft, the connection closed without an answer).
	Refused bool   `json:"refused"`
	Detail  string `json:"detail,omitempty"`
}
