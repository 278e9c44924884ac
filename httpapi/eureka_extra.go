package httpapi

import (
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

	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
)

// The Eureka endpoints besides the registry operations proper, answered
// when the main dispatcher (eureka_routes.go) does not know a path:
// eureka-server's status document (GET /eureka/status) and the override
// listing (GET /eureka/serverinfo/statusoverrides).

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
