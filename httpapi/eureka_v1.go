package httpapi

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/eureka"
)

// The v1 status rewrite: eureka-server answers v1 XML reads with
// OUT_OF_SERVICE and UNKNOWN statuses read as DOWN, and so does heureka.

// v1Writer buffers a v1 XML read so that its statuses can be rewritten as
// eureka-server rewrites them for v1 clients: OUT_OF_SERVICE and UNKNOWN
// read as DOWN. (JSON is written by a codec that does not rewrite.)
type v1Writer struct {
	gin.ResponseWriter
	buf    bytes.Buffer
	status int
	// hijacked is set when a blocking read took the connection over to
	// park: the parking lot then answers, rewritten (parked.v1), and
	// nothing is left to send here.
	hijacked bool
}

// Hijack hands the connection over, noting that this writer no longer
// sends the answer.
func (w *v1Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := w.ResponseWriter.Hijack()
	w.hijacked = err == nil
	return conn, rw, err
}

func (w *v1Writer) WriteHeader(code int) { w.status = code }
func (w *v1Writer) WriteHeaderNow()      {}
func (w *v1Writer) Write(p []byte) (int, error) {
	return w.buf.Write(p)
}
func (w *v1Writer) WriteString(s string) (int, error) { return w.buf.WriteString(s) }
func (w *v1Writer) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
func (w *v1Writer) Written() bool { return w.status != 0 || w.buf.Len() > 0 }
func (w *v1Writer) Size() int     { return w.buf.Len() }

var (
	v1From = [][]byte{[]byte("<status>OUT_OF_SERVICE</status>"), []byte("<status>UNKNOWN</status>")}
	v1To   = []byte("<status>DOWN</status>")
)

// v1Statuses rewrites the statuses of a v1 read's body of the given
// content type (only XML is rewritten; see v1Writer).
func v1Statuses(contentType string, body []byte) []byte {
	if strings.Contains(contentType, "xml") {
		for _, from := range v1From {
			body = bytes.ReplaceAll(body, from, v1To)
		}
	}
	return body
}

// v1Rewrite wraps the response of a v1 XML read so that its statuses are
// rewritten (see v1Writer); it returns the function that sends the result.
// Only the instance's own <status> element is rewritten: overriddenstatus is
// spelt differently, and metadata and text are escaped by the encoder.
func (s *Server) v1Rewrite(c *gin.Context) (finish func(), ok bool) {
	if !strings.HasPrefix(c.Request.URL.Path, "/eureka/v1/") || eureka.ResponseFormat(c.GetHeader("Accept")) != eureka.XML {
		return nil, false
	}
	// The body is rewritten before it is compressed, so ask for it plain.
	c.Request.Header.Del("Accept-Encoding")
	orig := c.Writer
	w := &v1Writer{ResponseWriter: orig}
	c.Writer = w
	return func() {
		c.Writer = orig
		if w.hijacked {
			return
		}
		body := v1Statuses(orig.Header().Get("Content-Type"), w.buf.Bytes())
		orig.Header().Set("Content-Length", strconv.Itoa(len(body)))
		orig.WriteHeader(w.Status())
		_, _ = orig.Write(body)
	}, true
}
