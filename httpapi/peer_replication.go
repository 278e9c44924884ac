package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// This file holds inbound Eureka peer replication: the requests an
// eureka-server peer sends to keep this cluster in step with its ring, one
// at a time with eureka.ReplicationHeader or batched through
// POST /peerreplication/batch. The answers are eureka-server's
// (docs/migrate-from-eureka.md, "What heureka answers a peer"); every change
// goes through Raft marked as replicated, so it is never replicated out.

// replicationKey is eureka.ReplicationHeader as net/http stores it. Every
// heartbeat asks for it: looked up by this key, the question allocates
// nothing, where Header.Get would build the canonical key each time.
var replicationKey = http.CanonicalHeaderKey(eureka.ReplicationHeader)

// isReplication reports whether a request comes from an Eureka peer.
func isReplication(c *gin.Context) bool {
	v := c.Request.Header[replicationKey]
	return len(v) > 0 && strings.EqualFold(v[0], "true")
}

// replicatedRenew is a replicated heartbeat: the lease is renewed as for a
// client; a peer whose record is older than the stored one gets 409 with
// the stored instance, so that it takes this record.
func (s *Server) replicatedRenew(ctx context.Context, app, id string, ldt int64) (int, *fsm.Entry) {
	if err := s.cluster.RenewReplicated(ctx, app, id, ldt); err != nil {
		return errorStatus(err), nil
	}
	if ldt == 0 {
		return http.StatusOK, nil
	}
	var e *fsm.Entry
	s.cluster.Read(func(r *fsm.Registry) { e = r.Get(app, id) })
	if e != nil && e.Instance.LastDirtyTimestamp > ldt {
		return http.StatusConflict, e
	}
	return http.StatusOK, nil
}

// renewFromPeer is PUT /apps/{app}/{id} with the replication header.
func (s *Server) renewFromPeer(c *gin.Context, app, id string) {
	ldt, err := optionalMillis(c, "lastDirtyTimestamp")
	if err != nil {
		s.fail(c, err)
		return
	}
	code, e := s.replicatedRenew(c.Request.Context(), app, id, ldt)
	switch code {
	case http.StatusOK:
		okEmpty(c)
	case http.StatusConflict:
		f := eureka.ResponseFormat(c.GetHeader("Accept"))
		c.Data(code, f.ContentType(), eureka.AppendInstanceDoc(nil, f, e))
	default:
		s.fail(c, &statusError{code: code, msg: "replicated heartbeat " + app + "/" + id})
	}
}

// statusError carries a status code already decided (errorStatus maps it).
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg + ": " + http.StatusText(e.code) }

// peerBatch is POST /peerreplication/batch.
func (s *Server) peerBatch(c *gin.Context) {
	list, instances, err := s.readPeerBatch(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := eureka.ReplicationListResponse{ResponseList: make([]eureka.ReplicationInstanceResponse, len(list.ReplicationList))}
	for i, it := range list.ReplicationList {
		out.ResponseList[i] = s.peerItem(c.Request.Context(), it, instances[i])
	}
	s.peerItems.Add(uint64(len(list.ReplicationList)))
	c.JSON(http.StatusOK, out)
}

// readPeerBatch reads a batch and decodes the instance of each of its
// registrations (nil for the other items). Every instance is decoded
// before anything is applied: one that cannot be read refuses the whole
// batch, as eureka-server's reader does.
func (s *Server) readPeerBatch(c *gin.Context) (eureka.ReplicationList, []*fsm.Instance, error) {
	body, err := s.readBody(c)
	if err != nil {
		return eureka.ReplicationList{}, nil, err
	}
	list, err := eureka.DecodeReplicationList(body)
	if err != nil {
		return eureka.ReplicationList{}, nil, err
	}
	now := s.cfg.Now().UnixMilli()
	instances := make([]*fsm.Instance, len(list.ReplicationList))
	for i, it := range list.ReplicationList {
		if it.Action == nil || *it.Action != eureka.ActionRegister || isNull(it.InstanceInfo) {
			continue
		}
		in, err := eureka.DecodeInstance(it.InstanceInfo, eureka.JSON, now)
		if err != nil {
			return eureka.ReplicationList{}, nil, badRequestf("cannot parse request body: item " + strconv.Itoa(i) + ": " + err.Error())
		}
		instances[i] = in
	}
	return list, instances, nil
}

func isNull(raw []byte) bool {
	t := strings.TrimSpace(string(raw))
	return t == "" || t == "null"
}

// peerItem applies one batch item and returns eureka-server's answer to it.
func (s *Server) peerItem(ctx context.Context, it eureka.ReplicationInstance, in *fsm.Instance) eureka.ReplicationInstanceResponse {
	resp := func(code int) eureka.ReplicationInstanceResponse {
		return eureka.ReplicationInstanceResponse{StatusCode: code}
	}
	if it.Action == nil {
		return resp(http.StatusInternalServerError)
	}
	app, id := appName(it.AppName), it.ID
	var ldt int64
	if it.LastDirtyTimestamp != nil {
		ldt = int64(*it.LastDirtyTimestamp)
	}
	switch *it.Action {
	case eureka.ActionRegister:
		if in == nil {
			return resp(http.StatusInternalServerError)
		}
		if err := s.admit(in, app); err != nil {
			// eureka-server answers 200 whatever its register resource
			// said (a failed validation included); nothing is recorded.
			s.log.Warn("replicated register refused", "app", app, "id", id, "error", err)
			return resp(http.StatusOK)
		}
		return resp(s.itemStatus(s.applyCmd(ctx, fsm.CmdRegister, &fsm.RegisterBody{Instance: in, Replicated: true}), http.StatusOK))
	case eureka.ActionHeartbeat:
		code, e := s.replicatedRenew(ctx, app, id, ldt)
		r := resp(code)
		if e != nil {
			r.ResponseEntity = eureka.AppendInstance(nil, eureka.JSON, e)
		}
		return r
	case eureka.ActionCancel:
		return resp(s.itemStatus(s.applyCmd(ctx, fsm.CmdCancel, &fsm.KeyBody{App: app, ID: id, Replicated: true}), http.StatusOK))
	case eureka.ActionStatusUpdate:
		if it.Status == nil || !fsm.ValidStatus(*it.Status) {
			return resp(http.StatusInternalServerError)
		}
		return resp(s.replicatedOverride(ctx, fsm.CmdSetOverride, app, id, *it.Status, ldt))
	case eureka.ActionDeleteStatusOverride:
		status := fsm.StatusUnknown
		if it.Status != nil {
			status = *it.Status
		}
		if it.LastDirtyTimestamp == nil || !fsm.ValidStatus(status) {
			return resp(http.StatusInternalServerError)
		}
		return resp(s.replicatedOverride(ctx, fsm.CmdDeleteOverride, app, id, status, ldt))
	}
	return resp(http.StatusInternalServerError)
}

func (s *Server) replicatedOverride(ctx context.Context, t fsm.CmdType, app, id, status string, ldt int64) int {
	if err := s.liveLease(app, id); err != nil {
		return errorStatus(err)
	}
	return s.itemStatus(s.applyCmd(ctx, t, &fsm.OverrideBody{App: app, ID: id, Status: status, LastDirtyTimestamp: ldt, Replicated: true}), http.StatusOK)
}

// applyCmd encodes a command and applies it through the cluster.
func (s *Server) applyCmd(ctx context.Context, t fsm.CmdType, body any) error {
	entry, err := fsm.Encode(t, body)
	if err != nil {
		return err
	}
	_, err = s.cluster.Apply(ctx, entry)
	return err
}

// itemStatus is the status of one item: ok, or the error's status.
func (s *Server) itemStatus(err error, ok int) int {
	if err == nil {
		return ok
	}
	code := errorStatus(err)
	if code == http.StatusInternalServerError {
		s.log.Error("replicated change failed", "error", err)
	}
	return code
}

// errStatusCode unwraps a statusError's code, for errorStatus.
func errStatusCode(err error) (int, bool) {
	var se *statusError
	if errors.As(err, &se) {
		return se.code, true
	}
	return 0, false
}
