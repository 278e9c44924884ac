package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cluster"
)

// snapshotter is what the snapshot endpoints need beyond Cluster;
// *cluster.Node implements it. A Cluster without it answers 501.
type snapshotter interface {
	SaveSnapshot(ctx context.Context, w io.Writer, stale bool) error
	RestoreSnapshot(ctx context.Context, r io.Reader) (instances, apps int, err error)
}

// errNoSnapshots is returned when the cluster cannot take snapshots.
var errNoSnapshots = errors.New("snapshots are not supported by this node")

// snapshotRoutes registers GET /v1/snapshot (download) and POST
// /v1/snapshot (restore into the running cluster).
func (s *Server) snapshotRoutes(e *gin.Engine) {
	e.GET("/v1/snapshot", s.saveSnapshot)
	e.POST("/v1/snapshot", s.restoreSnapshot)
}

// saveSnapshot is GET /v1/snapshot[?stale=true]: the registry in fsm's
// snapshot format, taken on the leader (or, with stale, this node's copy).
func (s *Server) saveSnapshot(c *gin.Context) {
	sn, ok := s.cluster.(snapshotter)
	if !ok {
		c.AbortWithStatusJSON(http.StatusNotImplemented, gin.H{"error": errNoSnapshots.Error()})
		return
	}
	stale, _ := strconv.ParseBool(c.Query("stale"))
	var buf bytes.Buffer
	if err := sn.SaveSnapshot(c.Request.Context(), &buf, stale); err != nil {
		s.fail(c, err)
		return
	}
	name := fmt.Sprintf("heureka-%s-%s.snap", s.cluster.ID(), time.Now().UTC().Format("20060102T150405Z"))
	c.Header("Content-Disposition", `attachment; filename="`+name+`"`)
	c.Data(http.StatusOK, "application/octet-stream", buf.Bytes())
}

// snapshotSummary is the answer to a restore.
type snapshotSummary struct {
	Restored     bool   `json:"restored"`
	Instances    int    `json:"instances"`
	Applications int    `json:"applications"`
	Bytes        int    `json:"bytes"`
	Node         string `json:"node"`
}

// restoreSnapshot is POST /v1/snapshot with a snapshot as the body: it
// replaces the registry of the whole cluster.
func (s *Server) restoreSnapshot(c *gin.Context) {
	sn, ok := s.cluster.(snapshotter)
	if !ok {
		c.AbortWithStatusJSON(http.StatusNotImplemented, gin.H{"error": errNoSnapshots.Error()})
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, cluster.MaxSnapshotBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.fail(c, errBodyTooLarge)
			return
		}
		s.fail(c, badRequestf("read snapshot: "+err.Error()))
		return
	}
	// The cluster checks the file in full (a bad one is ErrBadSnapshot,
	// 400) and counts what it held.
	instances, apps, err := sn.RestoreSnapshot(c.Request.Context(), bytes.NewReader(data))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.log.Info("snapshot restored", "instances", instances, "applications", apps, "bytes", len(data))
	c.JSON(http.StatusOK, snapshotSummary{Restored: true, Instances: instances, Applications: apps,
		Bytes: len(data), Node: s.cluster.ID()})
}
