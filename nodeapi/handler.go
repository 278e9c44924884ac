package nodeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/hashicorp/go-hclog"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/opapi"
)

// Backend does the work behind the internal endpoints: the cluster's Raft
// node. Calls that only the leader may serve return the caller's
// not-leader error elsewhere.
type Backend interface {
	// Apply appends one encoded, already checked command.
	Apply(entry []byte) (uint64, error)
	// ApplyBatch appends several; one error per entry. Forwarded entries
	// come from concurrent client requests on a follower, and each is
	// judged as a lone Apply would judge it; otherwise they are a
	// sequence (a replayed journal) applied as such.
	ApplyBatch(entries [][]byte, forwarded bool) ([]error, uint64, error)
	// RenewBatch applies an encoded batch of renewals and returns the
	// encoded results.
	RenewBatch(batch []byte, kind RenewBatchKind) ([]byte, error)
	// ReadIndex confirms leadership and returns the read index.
	ReadIndex() (uint64, error)
	// LeaseStatus is the leader's view of the leases.
	LeaseStatus() (opapi.LeaseStatus, error)
	// Join and Remove change the membership.
	Join(ctx context.Context, m fsm.Member) error
	Remove(ctx context.Context, id string) error
	// SetMembership records what the leader says of this node's
	// membership after changing it.
	SetMembership(m Membership) error
	// MemberView is this node's word on whether id is a member.
	MemberView(id string) (MemberView, error)
	// SaveSnapshot writes the leader's snapshot to w.
	SaveSnapshot(w io.Writer) error
	// RestoreSnapshot restores the cluster from a snapshot read from r.
	RestoreSnapshot(r io.Reader) error
}

// HandlerConfig is what Handler needs besides the Backend.
type HandlerConfig struct {
	// Secret, if set, must come with every call (SecretHeader).
	Secret string
	// Codes names the errors that keep their identity across a call.
	Codes Codes
	// Status is the HTTP status of an error reply (httpapi's table).
	Status func(error) int
	// Cluster, if set, is this node's cluster identity ("" while
	// unknown): a call naming another cluster (ClusterHeader) is refused
	// with ErrOtherCluster, both identities in the message.
	Cluster func() string
	// Log, if set, receives the calls refused for want of the secret,
	// rate-limited per remote host (RefusalLog.CallRefused).
	Log hclog.Logger
}

// Handler serves the node-to-node endpoints under Prefix.
func Handler(b Backend, cfg HandlerConfig) http.Handler {
	s := &server{b: b, cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathApply, func(w http.ResponseWriter, r *http.Request) {
		entry, ok := readBody(s, w, r, func(entry []byte) ([]byte, error) {
			_, err := fsm.Decode(entry)
			return entry, err
		})
		if !ok {
			return
		}
		idx, err := b.Apply(entry)
		s.write(w, Reply{Index: idx}, err)
	})
	mux.HandleFunc("POST "+PathApplyBatch, s.applyBatch)
	mux.HandleFunc("POST "+PathRenewBatch, func(w http.ResponseWriter, r *http.Request) {
		batch, ok := readBody(s, w, r, func(b []byte) ([]byte, error) { return b, nil })
		if !ok {
			return
		}
		results, err := b.RenewBatch(batch, renewBatchKindOf(r.URL.RawQuery))
		if err != nil {
			s.write(w, Reply{}, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(results)
	})
	mux.HandleFunc("GET "+PathReadIndex, func(w http.ResponseWriter, _ *http.Request) {
		idx, err := b.ReadIndex()
		s.write(w, Reply{Index: idx}, err)
	})
	mux.HandleFunc("GET "+PathLeaseStatus, func(w http.ResponseWriter, _ *http.Request) {
		st, err := b.LeaseStatus()
		if err != nil {
			s.write(w, Reply{}, err)
			return
		}
		writeJSON(w, st)
	})
	mux.HandleFunc("POST "+PathJoin, func(w http.ResponseWriter, r *http.Request) {
		var m fsm.Member
		if err := decodeJSON(r, &m); err != nil {
			s.write(w, Reply{}, err)
			return
		}
		s.write(w, Reply{}, b.Join(r.Context(), m))
	})
	mux.HandleFunc("POST "+PathRemove, func(w http.ResponseWriter, r *http.Request) {
		var m fsm.Member
		if err := decodeJSON(r, &m); err != nil {
			s.write(w, Reply{}, err)
			return
		}
		s.write(w, Reply{}, b.Remove(r.Context(), m.ID))
	})
	mux.HandleFunc("POST "+PathMembership, func(w http.ResponseWriter, r *http.Request) {
		var m Membership
		if err := decodeJSON(r, &m); err != nil {
			s.write(w, Reply{}, err)
			return
		}
		s.write(w, Reply{}, b.SetMembership(m))
	})
	mux.HandleFunc("GET "+PathMembership, func(w http.ResponseWriter, r *http.Request) {
		v, err := b.MemberView(r.URL.Query().Get("id"))
		if err != nil {
			s.write(w, Reply{}, err)
			return
		}
		writeJSON(w, v)
	})
	mux.HandleFunc("GET "+PathSnapshot, func(w http.ResponseWriter, _ *http.Request) {
		var buf bytes.Buffer
		if err := b.SaveSnapshot(&buf); err != nil {
			s.write(w, Reply{}, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = buf.WriteTo(w)
	})
	mux.HandleFunc("POST "+PathRestore, func(w http.ResponseWriter, r *http.Request) {
		s.write(w, Reply{}, b.RestoreSnapshot(r.Body))
	})
	var h http.Handler = mux
	if cfg.Cluster != nil {
		h = s.sameCluster(mux)
	}
	if cfg.Secret != "" {
		return requireSecret(cfg.Secret, cfg.Log, h)
	}
	return h
}

// sameCluster refuses calls from a node that names another cluster.
func (s *server) sameCluster(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer, own := r.Header.Get(ClusterHeader), s.cfg.Cluster()
		if peer != "" && own != "" && peer != own {
			s.write(w, Reply{}, fmt.Errorf("call from node %q of cluster %s; this node belongs to cluster %s: %w",
				r.Header.Get(forwardedBy), peer, own, ErrOtherCluster))
			return
		}
		next.ServeHTTP(w, r)
	})
}

type server struct {
	b   Backend
	cfg HandlerConfig
}

func (s *server) applyBatch(w http.ResponseWriter, r *http.Request) {
	entries, ok := readBody(s, w, r, DecodeEntries)
	if !ok {
		return
	}
	results, idx, err := s.b.ApplyBatch(entries, r.URL.RawQuery == forwardedQuery)
	if err != nil {
		s.write(w, Reply{}, err)
		return
	}
	rep := batchReply{Index: idx, Results: make([]Reply, len(results))}
	for i, res := range results {
		if res != nil {
			rep.Results[i].Code = s.cfg.Codes.name(res)
			rep.Results[i].Message = res.Error()
		}
	}
	writeJSON(w, rep)
}

// readBody reads and decodes a call's body; on failure it has answered the
// call.
func readBody[T any](s *server, w http.ResponseWriter, r *http.Request, decode func([]byte) (T, error)) (T, bool) {
	var zero T
	// Sized by the declared length: io.ReadAll grows from 512 bytes and
	// leaves about twice a forwarded batch behind as garbage.
	buf := bytes.NewBuffer(make([]byte, 0, bodySizeHint(r.ContentLength, maxBody)+bytes.MinRead))
	_, err := buf.ReadFrom(io.LimitReader(r.Body, maxBody+1))
	body := buf.Bytes()
	if err != nil {
		s.write(w, Reply{}, fmt.Errorf("read body: %w", fsm.ErrBadCommand))
		return zero, false
	}
	if len(body) > maxBody {
		// Refused whole: a batch cut at the limit would apply its first
		// entries and answer the call as failed.
		s.write(w, Reply{}, errBodyOverLimit)
		return zero, false
	}
	v, err := decode(body)
	if err != nil {
		s.write(w, Reply{}, err)
		return zero, false
	}
	return v, true
}

// bodySizeHint is the room to make ahead for a request body of the
// declared length n (unknown: -1), read up to limit. Only up to
// maxBodyHint: a declared length is not yet a body, and a caller declaring
// large ones must not make the node hold more than it sent; larger bodies
// grow as they arrive.
func bodySizeHint(n, limit int64) int {
	if n <= 0 || n > min(limit, maxBodyHint) {
		return 0
	}
	return int(n)
}

// maxBodyHint: a forwarded batch of 64 registrations is about 160 KiB.
const maxBodyHint = 512 << 10

func decodeJSON(r *http.Request, v any) error {
	lr := &io.LimitedReader{R: r.Body, N: maxBody + 1}
	if err := json.NewDecoder(lr).Decode(v); err != nil {
		if lr.N == 0 {
			return errBodyOverLimit
		}
		return fmt.Errorf("decode body: %v: %w", err, fsm.ErrBadCommand)
	}
	return nil
}

// errBodyOverLimit refuses a call whose body is longer than maxBody.
var errBodyOverLimit = fmt.Errorf("call body over %d MiB: %w", maxBody>>20, fsm.ErrBadCommand)

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// write answers a call with rep, or with err's code, message and status.
func (s *server) write(w http.ResponseWriter, rep Reply, err error) {
	status := http.StatusOK
	if err != nil {
		rep.Code, rep.Message = s.cfg.Codes.name(err), err.Error()
		status = http.StatusInternalServerError
		if s.cfg.Status != nil {
			status = s.cfg.Status(err)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(rep)
}
