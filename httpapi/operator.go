package httpapi

import (
	"encoding/json"
	"net/http"
	"runtime"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/opapi"
)

func (s *Server) operatorRoutes(e *gin.Engine) {
	v1 := e.Group("/v1")
	v1.GET("/status", s.status)
	v1.GET("/members", s.listMembers)
	v1.POST("/members", s.joinMember)
	v1.DELETE("/members/:id", s.removeMember)
	v1.GET("/mode", s.getMode)
	v1.PUT("/mode", s.putMode)
}

func (s *Server) listMembers(c *gin.Context) {
	members, err := s.cluster.Members()
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"members": members})
}

// joinMember is POST /v1/members {"id","raft_addr","http_addr"}.
func (s *Server) joinMember(c *gin.Context) {
	body, err := s.readBody(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	var m fsm.Member
	if err := json.Unmarshal(body, &m); err != nil {
		s.fail(c, badRequestf("member: "+err.Error()))
		return
	}
	if err := s.cluster.Join(c.Request.Context(), m); err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"joined": m.ID})
}

func (s *Server) removeMember(c *gin.Context) {
	if err := s.cluster.Remove(c.Request.Context(), c.Param("id")); err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"removed": c.Param("id")})
}

func readMemory() opapi.Memory {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return opapi.Memory{HeapAllocBytes: m.HeapAlloc, HeapInuseBytes: m.HeapInuse, SysBytes: m.Sys, NumGC: m.NumGC}
}

// status is GET /v1/status (opapi.Status).
func (s *Server) status(c *gin.Context) {
	st := opapi.Status{NodeStatus: s.cluster.Status(), Cache: s.cache.Stats(), Memory: readMemory()}
	if ls, err := s.cluster.LeaseStatus(c.Request.Context()); err == nil {
		st.Leases = &ls
	}
	st.Regions = s.regionStatus()
	c.JSON(http.StatusOK, st)
}

// getMode is GET /v1/mode.
func (s *Server) getMode(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"mode": s.cluster.Mode(), "quorum": s.cluster.HasQuorum(), "quorum_lost": s.cluster.QuorumLost()})
}

// putMode is PUT /v1/mode {"mode":"ap"|"cp"} (or ?mode=): it changes the
// cluster-wide mode through the log.
func (s *Server) putMode(c *gin.Context) {
	mode := c.Query("mode")
	if mode == "" {
		body, err := s.readBody(c)
		if err != nil {
			s.fail(c, err)
			return
		}
		var req struct {
			Mode string `json:"mode"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			s.fail(c, badRequestf("mode: "+err.Error()))
			return
		}
		mode = req.Mode
	}
	if err := s.cluster.SetMode(c.Request.Context(), mode); err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"mode": mode})
}
