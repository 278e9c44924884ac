package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// This file holds the parts of the Eureka API that eureka-server serves
// besides the registry operations proper: its status document, the override
// listing, HEAD on reads, the v1 status rewrite, and the request checks its
// JAX-RS resources make (Content-Type, expired leases).

// leaseSlack is how much later than one lease duration a lease still counts
// as live in reads: a follower learns renewals from the log, which gathers
// them for up to the renew batch interval (1s by default).
const leaseSlack = 2 * time.Second

// eurekaExtra answers the Eureka endpoints the main dispatcher does not
// know. It reports whether it answered.
func (s *Server) eurekaExtra(c *gin.Context, segs []string, method string) bool {
	if method != http.MethodGet {
		return false
	}
	switch {
	case len(segs) == 1 && segs[0] == "status":
		c.Set(eurekaRouteKey, "eureka_status_info")
		s.statusInfo(c)
		return true
	case len(segs) == 2 && segs[0] == "serverinfo" && segs[1] == "statusoverrides":
		c.Set(eurekaRouteKey, "eureka_status_overrides")
		s.statusOverrides(c)
		return true
	}
	return false
}

// responseFormat is the format a read answers in: Accept picks JSON or
// XML; X-Eureka-Accept: compact picks the compact variant for the documents
// eureka-server serves compact (applications, delta, one application).
func responseFormat(c *gin.Context, ent cache.Entity) eureka.Format {
	f := eureka.ResponseFormat(c.GetHeader("Accept"))
	switch ent {
	case cache.EntityApps, cache.EntityDelta, cache.EntityApp:
		return f.WithAccept(c.GetHeader("X-Eureka-Accept"))
	}
	return f
}

// liveLease returns fsm.ErrInstanceNotFound when app/id (app empty: any
// application) is registered with a lease that has expired but has not been
// evicted yet: eureka-server's lookups skip such leases, so reads and status
// or metadata updates of the instance answer 404. An instance this node does
// not hold passes: the read or write that follows decides (after its
// consistency checks, which may wait for the log).
func (s *Server) liveLease(app, id string) error {
	var e *fsm.Entry
	s.cluster.Read(func(r *fsm.Registry) {
		if app == "" {
			e = r.FindByID(id)
		} else {
			e = r.Get(app, id)
		}
	})
	if e != nil && s.cfg.Now().UnixMilli() > e.ExpiresAt()+leaseSlack.Milliseconds() {
		return fmt.Errorf("instance %s/%s: lease expired: %w", app, id, fsm.ErrInstanceNotFound)
	}
	return nil
}

// checkRegisterType refuses a register body whose Content-Type is neither
// JSON nor XML with 415, as eureka-server's resource (which consumes only
// those two) does. A missing Content-Type is still sniffed from the body.
func checkRegisterType(contentType string) error {
	if strings.TrimSpace(contentType) == "" {
		return nil
	}
	mt, _, _ := strings.Cut(contentType, ";")
	typ, sub, _ := strings.Cut(strings.ToLower(strings.TrimSpace(mt)), "/")
	switch {
	case typ == "application" && (sub == "json" || sub == "xml" || strings.HasSuffix(sub, "+json") || strings.HasSuffix(sub, "+xml")):
		return nil
	case typ == "text" && sub == "xml":
		return nil
	}
	return fmt.Errorf("content type %q: register takes application/json or application/xml: %w", contentType, errMediaType)
}

// normalizeRegister applies eureka-server's register-time fix-ups that are
// not part of decoding: an Amazon dataCenterInfo without an instance-id
// metadata key gets the instance's id there.
func normalizeRegister(in *fsm.Instance) {
	dc := &in.DataCenterInfo
	if dc.Name != "Amazon" {
		return
	}
	if _, ok := dc.Metadata.Get("instance-id"); ok {
		return
	}
	dc.Metadata = dc.Metadata.With(map[string]string{"instance-id": in.ID()})
}

// statusInfo is GET /eureka/status: eureka-server's StatusInfo document
// (general and replica statistics and the server's own instance), used by
// health probes and dashboards.
func (s *Server) statusInfo(c *gin.Context) {
	f := eureka.ResponseFormat(c.GetHeader("Accept"))
	members, err := s.cluster.Members()
	if err != nil {
		s.fail(c, err)
		return
	}
	var self string
	var peers []string
	for _, m := range members {
		if m.ID == s.cluster.ID() {
			self = m.HTTPAddr
			continue
		}
		peers = append(peers, s.peerURL(m.HTTPAddr))
	}
	slices.Sort(peers)
	healthy := s.cluster.HasQuorum()
	available, unavailable := "", ""
	for _, p := range peers {
		if healthy {
			available += p + ","
		} else {
			unavailable += p + ","
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	general := [][2]string{
		{"environment", "heureka"},
		{"server-uptime", uptime(time.Since(s.started))},
		{"num-of-cpus", strconv.Itoa(runtime.NumCPU())},
		{"total-avail-memory", strconv.FormatUint(ms.Sys>>20, 10) + "mb"},
		{"current-memory-usage", fmt.Sprintf("%dmb (%d%%)", ms.HeapAlloc>>20, percent(ms.HeapAlloc, ms.Sys))},
	}
	app := [][2]string{
		{"registered-replicas", strings.Join(peers, ", ")},
		{"available-replicas", available},
		{"unavailable-replicas", unavailable},
	}
	e := s.selfEntry(self)
	var b []byte
	if f == eureka.JSON {
		b = append(b, `{"generalStats":`...)
		b = jsonPairs(b, general)
		b = append(b, `,"applicationStats":`...)
		b = jsonPairs(b, app)
		b = append(b, `,"instanceInfo":`...)
		b = eureka.AppendInstance(b, f, e)
		b = append(b, `,"healthy":`...)
		b = strconv.AppendBool(b, healthy)
		b = append(b, '}')
	} else {
		b = append(b, "<com.netflix.eureka.util.StatusInfo><generalStats>"...)
		b = xmlPairs(b, general)
		b = append(b, "</generalStats><applicationStats>"...)
		b = xmlPairs(b, app)
		b = append(b, "</applicationStats>"...)
		inst := eureka.AppendInstance(nil, f, e)
		inst = bytes.TrimSuffix(bytes.TrimPrefix(inst, []byte("<instance>")), []byte("</instance>"))
		b = append(b, "<instanceInfo>"...)
		b = append(b, inst...)
		b = append(b, "</instanceInfo></com.netflix.eureka.util.StatusInfo>"...)
	}
	c.Data(http.StatusOK, f.ContentType(), b)
}

// statusOverrides is GET /eureka/serverinfo/statusoverrides: every status
// override in force, instance id to status, as a JSON object.
func (s *Server) statusOverrides(c *gin.Context) {
	m := map[string]string{}
	s.cluster.Read(func(r *fsm.Registry) {
		r.Each(func(e *fsm.Entry) {
			if e.Override != "" {
				m[e.ID] = e.Override
			}
		})
	})
	b, err := json.Marshal(m)
	if err != nil {
		s.fail(c, fmt.Errorf("encode overrides: %w", err))
		return
	}
	c.Data(http.StatusOK, "application/json", b)
}

// peerURL is the Eureka service URL of a member's HTTP address.
func (s *Server) peerURL(addr string) string {
	return "http://" + addr + "/eureka/"
}

// selfEntry is this node as a Eureka instance, for the status document.
func (s *Server) selfEntry(httpAddr string) *fsm.Entry {
	host, portStr, err := net.SplitHostPort(httpAddr)
	if err != nil {
		host = httpAddr
	}
	port, _ := strconv.Atoi(portStr)
	now := s.cfg.Now().UnixMilli()
	started := s.started.UnixMilli()
	in := &fsm.Instance{
		InstanceID: s.cluster.ID(), HostName: host, App: "HEUREKA", IPAddr: host, Sid: "na",
		Status: fsm.StatusUp, OverriddenStatus: fsm.StatusUnknown, Port: int32(port), PortEnabled: true,
		SecurePort: 443, CountryID: 1, VIPAddress: "heureka", LastDirtyTimestamp: started,
		DataCenterInfo: fsm.DataCenterInfo{Class: "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", Name: "MyOwn"},
	}
	return &fsm.Entry{App: in.App, ID: in.InstanceID, Instance: in, RegistrationTs: started,
		LastRenewalTs: now, ServiceUpTs: started, LastUpdatedTs: started}
}

func jsonPairs(b []byte, kv [][2]string) []byte {
	b = append(b, '{')
	for i, p := range kv {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, p[0])
		b = append(b, ':')
		b = strconv.AppendQuote(b, p[1])
	}
	return append(b, '}')
}

// xmlPairs writes a string map the way eureka-server's XML codec does: one
// element per key (the keys here are fixed, valid element names).
func xmlPairs(b []byte, kv [][2]string) []byte {
	for _, p := range kv {
		b = append(b, '<')
		b = append(b, p[0]...)
		b = append(b, '>')
		b = eureka.AppendXMLText(b, p[1])
		b = append(b, "</"...)
		b = append(b, p[0]...)
		b = append(b, '>')
	}
	return b
}

// uptime formats a duration the way eureka-server's status page does:
// "HH:mm", with a day count in front once it passes a day.
func uptime(d time.Duration) string {
	days := int(d / (24 * time.Hour))
	h := int(d/time.Hour) % 24
	m := int(d/time.Minute) % 60
	if days > 0 {
		return fmt.Sprintf("%d day %02d:%02d", days, h, m)
	}
	return fmt.Sprintf("%02d:%02d", h, m)
}

func percent(part, whole uint64) uint64 {
	if whole == 0 {
		return 0
	}
	return part * 100 / whole
}

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
