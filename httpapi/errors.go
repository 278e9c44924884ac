package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// Errors detected in this package.
var (
	errNotFoundRoute = errors.New("no such endpoint")
	errNoApp         = errors.New("application not found")
	errBodyTooLarge  = errors.New("request body too large")
	errMethod        = errors.New("method not allowed")
	errMediaType     = errors.New("unsupported media type")
)

// badRequest is a client error carrying its own message.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badRequestf(msg string) error { return &badRequest{msg: msg} }

// errorStatus is the one place errors become HTTP status codes.
func errorStatus(err error) int {
	var br *badRequest
	var ebr *eureka.BadRequestError
	if code, ok := errStatusCode(err); ok {
		return code
	}
	switch {
	case errors.As(err, &br), errors.As(err, &ebr), errors.Is(err, fsm.ErrBadCommand):
		return http.StatusBadRequest
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, fsm.ErrInstanceNotFound), errors.Is(err, errNoApp), errors.Is(err, errNotFoundRoute),
		errors.Is(err, cluster.ErrUnknownMember):
		return http.StatusNotFound
	case errors.Is(err, cluster.ErrMemberConflict), errors.Is(err, cluster.ErrOtherCluster):
		return http.StatusConflict
	case errors.Is(err, errRegionNotReady):
		return http.StatusForbidden
	case errors.Is(err, errDeltaGone):
		return http.StatusGone
	case errors.Is(err, errMethod):
		return http.StatusMethodNotAllowed
	case errors.Is(err, errMediaType):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The request's own time ran out, or its client left: its fate is
		// unknown, which a retry settles (and a client that left reads
		// nothing). Not a server fault to log as one.
		return http.StatusServiceUnavailable
	case errors.Is(err, cluster.ErrNoLeader), errors.Is(err, cluster.ErrNotLeader), errors.Is(err, cluster.ErrNoQuorum),
		errors.Is(err, cluster.ErrNotReady), errors.Is(err, cluster.ErrJournalFull), errors.Is(err, cluster.ErrRemoved),
		errors.Is(err, cluster.ErrDiskFull):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail writes err as a response. Eureka clients expect an empty body on 404
// (docs/eureka-api.md, "Status codes and bodies"); everything else, and every operator API error, carries {"error": message}.
func (s *Server) fail(c *gin.Context, err error) {
	status := errorStatus(err)
	switch {
	case status == http.StatusNotFound && strings.HasPrefix(c.Request.URL.Path, "/eureka/"):
		c.Status(status)
		emptyLength(c)
		c.Abort()
		return
	case status == http.StatusServiceUnavailable && c.Request.Method == http.MethodGet && strings.HasPrefix(c.Request.URL.Path, "/eureka/"):
		// A refused registry read carries no body: fargo decodes a body
		// whatever the status, and a JSON error object would decode as an
		// empty application (or crash its GetApps). The reason goes in a
		// header instead.
		c.Header("Retry-After", "1")
		c.Header("X-Heureka-Error", err.Error())
		emptyLength(c)
		c.AbortWithStatus(status)
		return
	case status == http.StatusServiceUnavailable:
		c.Header("Retry-After", "1")
	case status == http.StatusInternalServerError:
		s.log.Error("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "error", err)
	}
	msg := err.Error()
	if status == http.StatusInternalServerError {
		msg = "internal error"
	}
	c.AbortWithStatusJSON(status, gin.H{"error": msg})
}
