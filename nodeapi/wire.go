package nodeapi

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/heureka-registry/heureka/fsm"
)

// Internal endpoints between nodes. A follower forwards the already encoded
// and validated command, not the client's request: the edge validates once,
// the leader only stamps and appends, and a forwarded call is never
// forwarded again (the leader answers not_leader instead).
const (
	Prefix           = "/internal/v1/"
	PathApply        = Prefix + "apply"
	PathApplyBatch   = Prefix + "apply-batch"
	PathRenewBatch   = Prefix + "renew-batch"
	PathLeaseStatus  = Prefix + "lease-status"
	PathReadIndex    = Prefix + "read-index"
	PathJoin         = Prefix + "join"
	PathRemove       = Prefix + "remove"
	PathMembership   = Prefix + "membership"
	PathSnapshot     = Prefix + "snapshot"
	PathRestore      = Prefix + "restore"
	maxBody          = 8 << 20
	forwardedBy      = "X-Heureka-Forwarded-By"
	replicatedQuery  = "replicated=true"
	answeredQuery    = "answered=true"
	forwardedQuery   = "forwarded=true"
	codeInternal     = "internal"
	codeUnauthorized = "unauthorized"
)

// CallerHeader names the calling node on node-to-node calls and on a
// node's own join request.
const CallerHeader = forwardedBy

// ClusterHeader carries the calling node's cluster identity on every
// node-to-node call, when it knows it.
const ClusterHeader = "X-Heureka-Cluster-ID"

// ErrOtherCluster is a call from a node of another cluster.
var ErrOtherCluster = errors.New("peer of another cluster")

// ErrUnreachable marks a call that could not reach the other node at all,
// so it certainly was not applied and may be retried.
var ErrUnreachable = errors.New("leader unreachable")

// Reply is the JSON answer of an internal call: an index on success, a code
// and message on failure.
type Reply struct {
	Index   uint64 `json:"index,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Membership is what the leader tells a node after it changed the node's
// membership (PathMembership): whether the node is now in the
// configuration. Raft does not tell a removed follower; the leader just
// stops replicating to it.
type Membership struct {
	ID     string `json:"id"`
	Member bool   `json:"member"`
}

// MemberView is a node's word on whether another node is a member
// (GET PathMembership?id=): its latest Raft configuration's, whether it is in
// touch with a leader (only then does the word count: an isolated node's
// configuration may be as old as the asker's), and the leader's HTTP
// address. A node cut off from its own leader asks its peers before it
// acknowledges writes into its AP journal: one that was removed while it
// could not be told learns it here.
type MemberView struct {
	ID         string `json:"id"`
	Member     bool   `json:"member"`
	InTouch    bool   `json:"in_touch"`
	LeaderHTTP string `json:"leader_http,omitempty"`
}

// batchReply answers an apply batch: one Reply per entry.
type batchReply struct {
	Index   uint64  `json:"index"`
	Results []Reply `json:"results"`
}

// Code is the wire name of an error value.
type Code struct {
	Name string
	Err  error
}

// Codes is the table of errors that keep their identity across a call:
// the server names them, the client turns the name back into the value.
type Codes []Code

// name is the code of err, "internal" if the table has none.
func (cs Codes) name(err error) string {
	for _, c := range cs {
		if errors.Is(err, c.Err) {
			return c.Name
		}
	}
	return codeInternal
}

// err turns a reply's code and message back into an error that matches the
// code's value.
func (cs Codes) err(code, msg string) error {
	for _, c := range cs {
		if c.Name == code {
			return fmt.Errorf("leader: %s: %w", msg, c.Err)
		}
	}
	return fmt.Errorf("leader: %s", msg)
}

// EncodeEntries frames encoded commands for an apply batch: each is
// preceded by its length as a uvarint.
func EncodeEntries(entries [][]byte) []byte {
	size := 0
	for _, e := range entries {
		size += len(e) + binary.MaxVarintLen64
	}
	buf := make([]byte, 0, size)
	for _, e := range entries {
		buf = binary.AppendUvarint(buf, uint64(len(e)))
		buf = append(buf, e...)
	}
	return buf
}

// DecodeEntries splits an apply batch and checks that each entry decodes
// as a command.
func DecodeEntries(buf []byte) ([][]byte, error) {
	var out [][]byte
	for len(buf) > 0 {
		l, k := binary.Uvarint(buf)
		if k <= 0 || uint64(len(buf)-k) < l {
			return nil, fmt.Errorf("entry batch: bad length: %w", fsm.ErrBadCommand)
		}
		entry := buf[k : k+int(l)]
		if _, err := fsm.Decode(entry); err != nil {
			return nil, fmt.Errorf("entry batch: entry %d: %w", len(out), err)
		}
		out = append(out, entry)
		buf = buf[k+int(l):]
	}
	return out, nil
}
