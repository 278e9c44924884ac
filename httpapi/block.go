package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cache"
)

// Blocking queries on the Eureka reads: every registry document carries
// its version in X-Heureka-Index, and a read with ?index=N waits until the
// document's version is greater than N (or ?wait= passes) before it answers
// as usual. Eureka clients never send the parameter; a sidecar or gateway
// gets changes pushed over plain HTTP.
//
// A waiting request holds no goroutine of its own and polls nothing: it
// parks on the cache's channel for its document (one channel shared by all
// its waiters, closed when readOnly holds a newer build), on its wait timer
// and on the request context, which the server cancels when the client
// closes the connection.

// IndexHeader carries the version of the registry document served.
const IndexHeader = "X-Heureka-Index"

const (
	defaultBlockingWait = 30 * time.Second
	maxBlockingWait     = 5 * time.Minute
	// blockingGrace is added to the connection's deadlines beyond the wait,
	// for writing the answer.
	blockingGrace = 30 * time.Second
)

// blocking is a blocking query's parameters.
type blocking struct {
	index uint64
	wait  time.Duration
}

// parseBlocking reads ?index= and ?wait= (a Go duration such as 10s or
// 2m, or whole seconds); ok is false when the read does not block.
func parseBlocking(c *gin.Context) (b blocking, ok bool, err error) {
	if c.Request.URL.RawQuery == "" {
		return b, false, nil // the common case, without parsing a query into a map
	}
	raw, given := c.GetQuery("index")
	rawWait, waitGiven := c.GetQuery("wait")
	if !given {
		if waitGiven {
			return b, false, badRequestf("wait is only meaningful with index")
		}
		return b, false, nil
	}
	if b.index, err = strconv.ParseUint(raw, 10, 64); err != nil {
		return b, false, badRequestf("index " + strconv.Quote(raw) + ": want a registry version from " + IndexHeader)
	}
	b.wait = defaultBlockingWait
	if waitGiven {
		d, err := time.ParseDuration(rawWait)
		if err != nil {
			secs, serr := strconv.ParseUint(rawWait, 10, 32)
			if serr != nil {
				return b, false, badRequestf("wait " + strconv.Quote(rawWait) + ": want a duration such as 30s or 5m")
			}
			d = time.Duration(secs) * time.Second
		}
		if d < 0 {
			return b, false, badRequestf("wait " + strconv.Quote(rawWait) + " is negative")
		}
		b.wait = min(d, maxBlockingWait)
	}
	return b, true, nil
}

// awaitNewer waits until the cached document of key has a version above
// b.index, b.wait passes, or the client goes away (then it returns the
// context's error). A document that is missing waits to appear when the
// index is 0; with an index from an earlier answer, its absence is itself
// the change and answers at once. It returns nil when the read should go
// on as usual.
func (s *Server) awaitNewer(c *gin.Context, key cache.Key, b blocking) error {
	if b.wait <= 0 {
		return nil
	}
	// The server's read and write timeouts are meant for ordinary requests;
	// a blocking one may legitimately last the whole wait.
	rc := http.NewResponseController(c.Writer)
	deadline := time.Now().Add(b.wait)
	_ = rc.SetReadDeadline(deadline.Add(blockingGrace))
	_ = rc.SetWriteDeadline(deadline.Add(blockingGrace))

	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	ctx := c.Request.Context()
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	for {
		changed := s.cache.Watch(key) // before the read: a change in between closes it
		if v, err := s.cache.Get(key); ready(b.index, v, err) {
			return nil // the read answers it (a document, a 404 or an error)
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// isNotFound reports a missing document (a 404, mapped in one place).
func isNotFound(err error) bool { return errorStatus(err) == http.StatusNotFound }
