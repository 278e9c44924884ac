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
	v1Instance = []byte("<instance>")
	v1Status   = []byte("<status>")
	v1From     = [][]byte{[]byte("<status>OUT_OF_SERVICE</status>"), []byte("<status>UNKNOWN</status>")}
	v1To       = []byte("<status>DOWN</status>")
	// v1Before are the elements the encoder writes just before an
	// instance's status (ipAddr, and sid when it has one).
	v1Before = [][]byte{[]byte("</ipAddr>"), []byte("</sid>")}
)

// v1Statuses rewrites the statuses of a v1 read's body of the given
// content type (only XML is rewritten; see v1Writer). Only each instance's
// own status is rewritten: the first <status> after its <instance>, right
// after its ipAddr or sid (the encoder's order, before its metadata). A
// metadata entry named status is the instance's data, and stays as it is.
func v1Statuses(contentType string, body []byte) []byte {
	if !strings.Contains(contentType, "xml") {
		return body
	}
	var out []byte
	done := 0 // body[:done] is in out
	for from := 0; ; {
		i := bytes.Index(body[from:], v1Instance)
		if i < 0 {
			break
		}
		from += i + len(v1Instance)
		j := bytes.Index(body[from:], v1Status)
		if j < 0 {
			break
		}
		at := from + j
		from = at + len(v1Status)
		if !hasAnySuffix(body[:at], v1Before) {
			continue
		}
		for _, old := range v1From {
			if bytes.HasPrefix(body[at:], old) {
				out = append(append(out, body[done:at]...), v1To...)
				done = at + len(old)
				from = done
				break
			}
		}
	}
	if out == nil {
		return body
	}
	return append(out, body[done:]...)
}

// hasAnySuffix reports whether b ends with one of suffixes.
func hasAnySuffix(b []byte, suffixes [][]byte) bool {
	for _, s := range suffixes {
		if bytes.HasSuffix(b, s) {
			return true
		}
	}
	return false
}

// v1Rewrite wraps the response of a v1 XML read so that its statuses are
// rewritten (see v1Writer); it returns the function that sends the result.
// Only the instance's own <status> element is rewritten (v1Statuses):
// overriddenstatus is spelt differently, and text is escaped by the
// encoder.
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
