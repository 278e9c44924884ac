package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// Internal endpoints between nodes. A follower forwards the already encoded
// and validated command, not the client's request: the edge validates once,
// the leader only stamps and appends, and a forwarded call is never
// forwarded again (the leader answers not_leader instead).
const (
	InternalPrefix  = "/internal/v1/"
	pathApply       = InternalPrefix + "apply"
	pathRenewBatch  = InternalPrefix + "renew-batch"
	pathLeaseStatus = InternalPrefix + "lease-status"
	pathReadIndex   = InternalPrefix + "read-index"
	pathJoin        = InternalPrefix + "join"
	pathRemove      = InternalPrefix + "remove"
	maxInternalBody = 8 << 20
)

// errUnreachable marks a forward that could not reach the leader at all,
// so it certainly was not applied and may be retried.
var errUnreachable = errors.New("leader unreachable")

// Error codes of the internal protocol.
const (
	codeNotFound      = "not_found"
	codeNotLeader     = "not_leader"
	codeNoLeader      = "no_leader"
	codeBadCommand    = "bad_command"
	codeUnknownMember = "unknown_member"
	codeNoQuorum      = "no_quorum"
	codeInternal      = "internal"
)

type internalReply struct {
	Index   uint64 `json:"index,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

var codeErrors = []struct {
	code string
	err  error
}{
	{codeNotFound, fsm.ErrInstanceNotFound},
	{codeNotLeader, ErrNotLeader},
	{codeNoLeader, ErrNoLeader},
	{codeBadCommand, fsm.ErrBadCommand},
	{codeUnknownMember, ErrUnknownMember},
	{codeNoQuorum, ErrNoQuorum},
}

func errorCode(err error) (string, int) {
	for _, ce := range codeErrors {
		if errors.Is(err, ce.err) {
			switch ce.code {
			case codeNotFound, codeUnknownMember:
				return ce.code, http.StatusNotFound
			case codeBadCommand:
				return ce.code, http.StatusBadRequest
			}
			return ce.code, http.StatusServiceUnavailable
		}
	}
	return codeInternal, http.StatusInternalServerError
}

func codeError(code, msg string) error {
	for _, ce := range codeErrors {
		if ce.code == code {
			return fmt.Errorf("leader: %s: %w", msg, ce.err)
		}
	}
	return fmt.Errorf("leader: %s", msg)
}

// post sends one internal call and decodes the reply.
func (n *Node) post(ctx context.Context, addr, path, contentType string, body []byte) (internalReply, error) {
	var rep internalReply
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url(addr, path), bytes.NewReader(body))
	if err != nil {
		return rep, fmt.Errorf("build forward request: %w", err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Heureka-Forwarded-By", n.cfg.NodeID)
	resp, err := n.client.Do(req)
	if err != nil {
		if isDialError(err) {
			return rep, fmt.Errorf("forward to %s: %v: %w", addr, err, errUnreachable)
		}
		return rep, fmt.Errorf("forward to %s: %v: %w", addr, err, ErrNoLeader)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxInternalBody))
	if err != nil {
		return rep, fmt.Errorf("read forward reply from %s: %v: %w", addr, err, ErrNoLeader)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return rep, fmt.Errorf("forward to %s: status %d: unreadable reply: %w", addr, resp.StatusCode, ErrNoLeader)
	}
	if rep.Code != "" {
		return rep, codeError(rep.Code, rep.Message)
	}
	return rep, nil
}

// postRaw sends an internal call whose success answer is raw bytes; an
// error answer is an internalReply.
func (n *Node) postRaw(ctx context.Context, addr, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url(addr, path), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build forward request: %w", err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("X-Heureka-Forwarded-By", n.cfg.NodeID)
	resp, err := n.client.Do(req)
	if err != nil {
		if isDialError(err) {
			return nil, fmt.Errorf("forward to %s: %v: %w", addr, err, errUnreachable)
		}
		return nil, fmt.Errorf("forward to %s: %v: %w", addr, err, ErrNoLeader)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxInternalBody))
	if err != nil {
		return nil, fmt.Errorf("read forward reply from %s: %v: %w", addr, err, ErrNoLeader)
	}
	if resp.StatusCode != http.StatusOK {
		var rep internalReply
		if json.Unmarshal(data, &rep) == nil && rep.Code != "" {
			return nil, codeError(rep.Code, rep.Message)
		}
		return nil, fmt.Errorf("forward to %s: status %d: %w", addr, resp.StatusCode, ErrNoLeader)
	}
	return data, nil
}

func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func (n *Node) forwardApply(ctx context.Context, addr string, entry []byte) (uint64, error) {
	rep, err := n.post(ctx, addr, pathApply, "application/octet-stream", entry)
	return rep.Index, err
}

func (n *Node) forwardJSON(ctx context.Context, path string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode forward body: %w", err)
	}
	for {
		addr := n.leaderHTTP()
		if addr != "" && addr != n.cfg.HTTPAdvertise {
			_, err = n.post(ctx, addr, path, "application/json", body)
			if !errors.Is(err, ErrNotLeader) && !errors.Is(err, errUnreachable) {
				return err
			}
		} else if addr == n.cfg.HTTPAdvertise && n.IsLeader() {
			return ErrNotLeader // we became leader meanwhile: caller handles locally
		}
		if err := sleepCtx(ctx, n.stopCh); err != nil {
			return fmt.Errorf("forward %s: %w", path, ErrNoLeader)
		}
	}
}

// InternalHandler serves the node-to-node endpoints under InternalPrefix.
func (n *Node) InternalHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathApply, func(w http.ResponseWriter, r *http.Request) {
		entry, err := io.ReadAll(io.LimitReader(r.Body, maxInternalBody))
		if err != nil {
			writeInternal(w, internalReply{}, fmt.Errorf("read body: %w", fsm.ErrBadCommand))
			return
		}
		if _, err := fsm.Decode(entry); err != nil {
			writeInternal(w, internalReply{}, err)
			return
		}
		idx, err := n.applyLocal(entry)
		writeInternal(w, internalReply{Index: idx}, err)
	})
	mux.HandleFunc("POST "+pathApplyBatch, n.serveApplyBatch)
	mux.HandleFunc("POST "+pathRenewBatch, func(w http.ResponseWriter, r *http.Request) {
		reqs, ok := readInternal(w, r, decodeRenewBatch)
		if !ok {
			return
		}
		if r.URL.RawQuery == replicatedQuery {
			for i := range reqs {
				reqs[i].Replicated = true
			}
		}
		results, err := n.renewBatchLocal(reqs)
		if err != nil {
			writeInternal(w, internalReply{}, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(results)
	})
	mux.HandleFunc("GET "+pathReadIndex, n.serveReadIndex)
	mux.HandleFunc("GET "+pathLeaseStatus, func(w http.ResponseWriter, r *http.Request) {
		if !n.IsLeader() {
			writeInternal(w, internalReply{}, ErrNotLeader)
			return
		}
		st, _ := n.leases.evaluate(time.Now())
		writeJSON(w, st)
	})
	mux.HandleFunc("POST "+pathJoin, func(w http.ResponseWriter, r *http.Request) {
		var m fsm.Member
		if err := decodeJSON(r, &m); err != nil {
			writeInternal(w, internalReply{}, err)
			return
		}
		writeInternal(w, internalReply{}, n.joinLocal(r.Context(), m))
	})
	mux.HandleFunc("POST "+pathRemove, func(w http.ResponseWriter, r *http.Request) {
		var m fsm.Member
		if err := decodeJSON(r, &m); err != nil {
			writeInternal(w, internalReply{}, err)
			return
		}
		writeInternal(w, internalReply{}, n.removeLocal(r.Context(), m.ID))
	})
	n.snapshotRoutes(mux)
	if n.cfg.ClusterSecret != "" {
		return requireSecret(n.cfg.ClusterSecret, mux)
	}
	return mux
}

func decodeJSON(r *http.Request, v any) error {
	if err := json.NewDecoder(io.LimitReader(r.Body, maxInternalBody)).Decode(v); err != nil {
		return fmt.Errorf("decode body: %v: %w", err, fsm.ErrBadCommand)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeInternal(w http.ResponseWriter, rep internalReply, err error) {
	status := http.StatusOK
	if err != nil {
		rep.Code, status = errorCode(err)
		rep.Message = err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(rep)
}
