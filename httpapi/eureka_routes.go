package httpapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/limits"
)

// resourceNames are the first path segments Eureka mounts; anything else in
// that place is a version segment ("v2", "v1") and is dropped (docs/eureka-api.md, "Paths").
var resourceNames = map[string]bool{
	"apps": true, "instances": true, "vips": true, "svips": true,
	"status": true, "asg": true, "peerreplication": true, "serverinfo": true,
}

// eurekaPath splits the part after /eureka into unescaped segments, with the
// optional version segment and one trailing slash removed.
func eurekaPath(escaped string) ([]string, error) {
	rest := strings.TrimPrefix(escaped, "/eureka")
	rest = strings.TrimPrefix(rest, "/")
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return nil, nil
	}
	// Segments are unescaped in place: one slice per request, and none
	// more for segments without escapes (PathUnescape returns them as is).
	segs := strings.Split(rest, "/")
	for i, r := range segs {
		s, err := url.PathUnescape(r)
		if err != nil {
			return nil, badRequestf("bad path segment " + strconv.Quote(r))
		}
		segs[i] = s
	}
	if !resourceNames[segs[0]] {
		segs = segs[1:]
	}
	return segs, nil
}

// eureka dispatches every request under /eureka. Eureka's paths are
// irregular (optional version segment, trailing slashes, ids with ':' and
// escaped characters), so they are matched here rather than in gin's tree.
func (s *Server) eureka(c *gin.Context) {
	segs, m, ok := s.eurekaRequest(c)
	if !ok {
		return
	}
	if m == http.MethodGet {
		if finish, ok := s.v1Rewrite(c); ok {
			defer finish()
		}
	}
	if s.eurekaExtra(c, segs, m) {
		return
	}
	if segs[0] == "apps" {
		s.eurekaApps(c, segs, m)
		return
	}
	s.eurekaOther(c, segs, m)
}

// eurekaRequest reads a request's path segments and the method it is
// answered as (HEAD as GET), refusing an empty path and, with strict
// input, a bad segment; ok is false when it answered.
func (s *Server) eurekaRequest(c *gin.Context) (segs []string, method string, ok bool) {
	segs, err := eurekaPath(c.Request.URL.EscapedPath())
	if err != nil {
		s.fail(c, err)
		return nil, "", false
	}
	method = c.Request.Method
	if method == http.MethodHead {
		method = http.MethodGet // Jersey answers HEAD on every GET resource; net/http drops the body
	}
	if len(segs) == 0 {
		s.fail(c, errNotFoundRoute)
		return nil, "", false
	}
	if s.cfg.StrictInput {
		if err := checkPath(segs); err != nil {
			s.fail(c, err)
			return nil, "", false
		}
	}
	return segs, method, true
}

// route names the matched endpoint (the metrics label, a constant so that
// storing it allocates nothing) and runs it.
func route(c *gin.Context, label string, handler func()) {
	c.Set(eurekaRouteKey, label)
	handler()
}

// eurekaApps dispatches the paths under /apps: the registry, the delta,
// one application, one instance and its status and metadata.
func (s *Server) eurekaApps(c *gin.Context, segs []string, m string) {
	n := len(segs)
	switch {
	case n == 1 && m == http.MethodGet:
		route(c, "eureka_apps", func() { s.getApps(c) })
	case n == 2 && segs[1] == "delta" && m == http.MethodGet:
		route(c, "eureka_delta", func() { s.getDelta(c) })
	case n == 2 && segs[1] == "delta":
		// Every spelling of this path reads the delta, so an
		// application registered here could not be read back under
		// it; eureka-server answers 405 as well.
		s.fail(c, fmt.Errorf("%s /apps/delta: delta is the delta's path and cannot name an application: %w", m, errMethod))
	case n == 2 && m == http.MethodGet:
		route(c, "eureka_app", func() { s.getApp(c, appName(segs[1])) })
	case n == 2 && m == http.MethodPost:
		route(c, "eureka_register", func() { s.register(c, segs[1]) })
	case n == 3 && m == http.MethodGet:
		route(c, "eureka_instance", func() { s.getInstance(c, appName(segs[1]), segs[2]) })
	case n == 3 && m == http.MethodPut:
		route(c, "eureka_renew", func() { s.renew(c, appName(segs[1]), segs[2]) })
	case n == 3 && m == http.MethodDelete:
		route(c, "eureka_cancel", func() { s.cancel(c, appName(segs[1]), segs[2]) })
	case n == 4 && segs[3] == "status" && m == http.MethodPut:
		route(c, "eureka_status_override", func() { s.setOverride(c, appName(segs[1]), segs[2]) })
	case n == 4 && segs[3] == "status" && m == http.MethodDelete:
		route(c, "eureka_status_override", func() { s.deleteOverride(c, appName(segs[1]), segs[2]) })
	case n == 4 && segs[3] == "metadata" && m == http.MethodPut:
		route(c, "eureka_metadata", func() { s.updateMetadata(c, appName(segs[1]), segs[2]) })
	default:
		// 405 for a known path asked with another method; an unknown
		// instance subresource is no path at all (404).
		s.fail(c, routeError(n <= 3 || n == 4 && (segs[3] == "status" || segs[3] == "metadata")))
	}
}

// eurekaOther dispatches the paths outside /apps: an instance by id, the
// peer replication batch, and the VIP and secure VIP listings.
func (s *Server) eurekaOther(c *gin.Context, segs []string, m string) {
	n := len(segs)
	switch segs[0] {
	case "instances":
		if n == 2 && m == http.MethodGet {
			route(c, "eureka_instance_by_id", func() { s.getInstanceByID(c, segs[1]) })
			return
		}
		s.fail(c, routeError(n == 2))
	case "peerreplication":
		if n == 2 && segs[1] == "batch" && m == http.MethodPost {
			route(c, "eureka_peer_batch", func() { s.peerBatch(c) })
			return
		}
		s.fail(c, routeError(n == 2 && segs[1] == "batch"))
	case "vips", "svips":
		if n == 2 && m == http.MethodGet {
			secure := segs[0] == "svips"
			label := "eureka_vip"
			if secure {
				label = "eureka_svip"
			}
			route(c, label, func() { s.getVIP(c, secure, segs[1]) })
			return
		}
		s.fail(c, routeError(n == 2))
	default:
		s.fail(c, errNotFoundRoute)
	}
}

// eurekaRouteKey holds, in the gin context, the metrics label of the Eureka
// endpoint a request matched ("eureka_register", "eureka_renew", ...): the
// dispatcher sets it and the metrics label requests with it, so the path is
// parsed once. A request that matched none is labelled "eureka_other".
const eurekaRouteKey = "heureka.eureka_route"

func routeError(pathKnown bool) error {
	if pathKnown {
		return errMethod
	}
	return errNotFoundRoute
}

// appName upper-cases an application name the way Eureka does (ASCII only,
// locale-independent).
func appName(s string) string {
	return eureka.NormalizeAppName(s)
}

// maxBodyHint bounds the room made ahead for a request body from its
// declared length (a registration is a few KiB); larger bodies grow as
// they arrive.
const maxBodyHint = 64 << 10

// readBody reads a request body within the size limit, un-gzipping it when
// the client says it is compressed. A body in any other coding is refused
// with 415: read as it is, it would be decoded as garbage or, worse, as
// something else.
func (s *Server) readBody(c *gin.Context) ([]byte, error) {
	var r io.Reader = http.MaxBytesReader(c.Writer, c.Request.Body, s.cfg.MaxBodyBytes)
	switch ce := strings.TrimSpace(c.GetHeader("Content-Encoding")); {
	case ce == "" || strings.EqualFold(ce, "identity"):
	case !strings.EqualFold(ce, "gzip") && !strings.EqualFold(ce, "x-gzip"):
		return nil, fmt.Errorf("content encoding %q: a request body may be gzip or identity: %w", ce, errMediaType)
	default:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, badRequestf("body says gzip but is not: " + err.Error())
		}
		defer zr.Close()
		r = io.LimitReader(zr, s.cfg.MaxBodyBytes+1)
	}
	// Sized by the declared length: io.ReadAll grows from 512 bytes and
	// leaves about twice a registration's body behind as garbage. Only up
	// to maxBodyHint: a declared length is not yet a body, and a client
	// declaring large ones must not make the node hold more than it sent.
	hint := 0
	if n := c.Request.ContentLength; n > 0 && n <= min(s.cfg.MaxBodyBytes, maxBodyHint) {
		hint = int(n)
	}
	buf := bytes.NewBuffer(make([]byte, 0, hint+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	body := buf.Bytes()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || int64(len(body)) > s.cfg.MaxBodyBytes {
		return nil, errBodyTooLarge
	}
	if err != nil {
		return nil, badRequestf("read body: " + err.Error())
	}
	return body, nil
}

// register is POST /apps/{app} (docs/eureka-api.md, "Register").
func (s *Server) register(c *gin.Context, pathApp string) {
	in, err := s.registration(c, pathApp)
	if err == nil {
		err = s.write(c, fsm.CmdRegister, &fsm.RegisterBody{Instance: in, Replicated: isReplication(c)})
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// registration reads, decodes and checks a registration's body: the
// instance to record, or the first reason to refuse it.
func (s *Server) registration(c *gin.Context, pathApp string) (*fsm.Instance, error) {
	if err := checkRegisterType(c.GetHeader("Content-Type")); err != nil {
		return nil, err
	}
	body, err := s.readBody(c)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequestf("empty body: expected an instance")
	}
	f := eureka.RequestFormat(c.GetHeader("Content-Type"), body)
	in, err := eureka.DecodeInstance(body, f, s.cfg.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	if err := s.admit(in, pathApp); err != nil {
		return nil, err
	}
	return in, nil
}

// admit applies to a decoded instance the rules every registration passes
// before it is recorded, whether a client sent it or a peer's batch carried
// it: eureka-server's validation, its register-time fix-ups, and with
// StrictInput the input limits. One set of rules for both, so that nothing
// is recorded that the /apps paths cannot then read, renew or cancel.
func (s *Server) admit(in *fsm.Instance, pathApp string) error {
	if err := eureka.ValidateInstance(in, pathApp); err != nil {
		return err
	}
	normalizeRegister(in)
	if s.cfg.StrictInput {
		return limits.CheckInstance(in)
	}
	return nil
}

// write encodes a command and applies it through the cluster.
func (s *Server) write(c *gin.Context, t fsm.CmdType, body any) error {
	entry, err := fsm.Encode(t, body)
	if err != nil {
		return err
	}
	_, err = s.cluster.Apply(c.Request.Context(), entry)
	return err
}

// zeroLength is the Content-Length of an empty answer, one slice for all of
// them (header values are never modified in place), so that a heartbeat's
// answer, 200 or 404, allocates no header value.
var zeroLength = []string{"0"}

// emptyLength declares the answer's body empty.
func emptyLength(c *gin.Context) { c.Writer.Header()["Content-Length"] = zeroLength }

// okEmpty answers 200 with an empty body, as Eureka clients require on writes.
func okEmpty(c *gin.Context) {
	emptyLength(c)
	c.Status(http.StatusOK)
}

// renew is PUT /apps/{app}/{id} (docs/eureka-api.md, "Renew").
func (s *Server) renew(c *gin.Context, app, id string) {
	if isReplication(c) {
		s.renewFromPeer(c, app, id)
		return
	}
	ldt, err := optionalMillis(c, "lastDirtyTimestamp")
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.cluster.Renew(c.Request.Context(), app, id, ldt); err != nil {
		s.fail(c, err)
		return
	}
	okEmpty(c)
}

// cancel is DELETE /apps/{app}/{id} (docs/eureka-api.md, "Cancel").
func (s *Server) cancel(c *gin.Context, app, id string) {
	if err := s.write(c, fsm.CmdCancel, &fsm.KeyBody{App: app, ID: id, Replicated: isReplication(c)}); err != nil {
		s.fail(c, err)
		return
	}
	okEmpty(c)
}

// setOverride is PUT /apps/{app}/{id}/status?value=S.
func (s *Server) setOverride(c *gin.Context, app, id string) {
	value, _ := c.GetQuery("value")
	s.override(c, fsm.CmdSetOverride, app, id, value)
}

// deleteOverride is DELETE /apps/{app}/{id}/status[?value=S]; S, the
// status left behind, defaults to UNKNOWN (docs/eureka-api.md, "Status override").
func (s *Server) deleteOverride(c *gin.Context, app, id string) {
	value, given := c.GetQuery("value")
	if !given {
		value = fsm.StatusUnknown
	}
	s.override(c, fsm.CmdDeleteOverride, app, id, value)
}

func (s *Server) override(c *gin.Context, t fsm.CmdType, app, id, value string) {
	if !fsm.ValidStatus(value) {
		s.fail(c, badRequestf("status value "+strconv.Quote(value)+" is not one of UP, DOWN, STARTING, OUT_OF_SERVICE, UNKNOWN"))
		return
	}
	ldt, err := optionalMillis(c, "lastDirtyTimestamp")
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.liveLease(app, id); err != nil {
		s.fail(c, err)
		return
	}
	if err := s.write(c, t, &fsm.OverrideBody{App: app, ID: id, Status: value, LastDirtyTimestamp: ldt, Replicated: isReplication(c)}); err != nil {
		s.fail(c, err)
		return
	}
	okEmpty(c)
}

// updateMetadata is PUT /apps/{app}/{id}/metadata?k=v&... (docs/eureka-api.md, "Metadata").
func (s *Server) updateMetadata(c *gin.Context, app, id string) {
	if err := s.liveLease(app, id); err != nil {
		s.fail(c, err)
		return
	}
	md, err := metadataQuery(c.Request.URL.RawQuery)
	if err != nil {
		s.fail(c, err)
		return
	}
	body := &fsm.MetadataBody{App: app, ID: id, Metadata: md}
	if s.cfg.StrictInput {
		if err := limits.CheckMetadata(len(md), maps.All(md)); err != nil {
			s.fail(c, err)
			return
		}
		if err := s.checkMergedMetadata(app, id, md); err != nil {
			s.fail(c, err)
			return
		}
		body.MaxEntries = limits.MaxMetadataEntries
	}
	if err := s.write(c, fsm.CmdMetadata, body); err != nil {
		s.fail(c, err)
		return
	}
	okEmpty(c)
}

// metadataQuery reads a metadata update's entries from its query: the
// first value wins per key, as in Eureka. A query that does not parse (a
// bad escape, a ';' separator) is refused whole: url.Values would keep the
// pairs it could read and drop the others without a word.
func metadataQuery(raw string) (map[string]string, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badRequestf("metadata query: " + err.Error())
	}
	md := make(map[string]string, len(q))
	for k, vs := range q {
		if k != "" && len(vs) > 0 {
			md[k] = vs[0]
		}
	}
	return md, nil
}

// optionalMillis parses an optional epoch-millisecond query parameter.
func optionalMillis(c *gin.Context, name string) (int64, error) {
	v := queryValue(c.Request.URL.RawQuery, name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequestf(name + " must be epoch milliseconds, got " + strconv.Quote(v))
	}
	return n, nil
}

// queryValue is the first value of name in the raw query string, "" when
// there is none, as url.ParseQuery(raw).Get(name) gives it (a pair that
// does not unescape is skipped), without building the map: a renewal asks
// for one parameter, and at a fleet's rate the parsed query was a tenth of
// what a follower allocated per renewal.
func queryValue(raw, name string) string {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		key, value, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(key, "%+") {
			k, err := url.QueryUnescape(key)
			if err != nil {
				continue
			}
			key = k
		}
		if key != name {
			continue
		}
		if strings.ContainsAny(value, "%+") {
			v, err := url.QueryUnescape(value)
			if err != nil {
				continue
			}
			value = v
		}
		return value
	}
	return ""
}

func (s *Server) getApps(c *gin.Context) { s.serveRegistry(c, cache.EntityApps) }

func (s *Server) getDelta(c *gin.Context) { s.serveRegistry(c, cache.EntityDelta) }

// serveRegistry serves the full registry or the delta, with the remote
// regions the read asks for merged in.
func (s *Server) serveRegistry(c *gin.Context, ent cache.Entity) {
	if ent == cache.EntityDelta && c.Request.URL.RawQuery != "" {
		if after, ok := c.GetQuery("after"); ok {
			s.serveDeltaAfter(c, after)
			return
		}
	}
	name, err := s.regionSet(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.serve(c, ent, name)
}

func (s *Server) getApp(c *gin.Context, app string) { s.serve(c, cache.EntityApp, app) }

func (s *Server) getVIP(c *gin.Context, secure bool, vip string) {
	if secure {
		s.serve(c, cache.EntitySVIP, vip)
		return
	}
	s.serve(c, cache.EntityVIP, vip)
}

func (s *Server) getInstance(c *gin.Context, app, id string) {
	s.serveChecked(c, cache.EntityInstance, cache.InstanceName(app, id), s.leaseCheck(app, id))
}

func (s *Server) getInstanceByID(c *gin.Context, id string) {
	s.serveChecked(c, cache.EntityInstance, cache.InstanceName("", id), s.leaseCheck("", id))
}

// leaseCheck is an instance read's check of its lease (liveLease), once
// the read gate said where the answer comes from: an answer from the
// durable state (the FSM partly replayed) is not judged by the FSM's
// leases, whose renewals may not be replayed yet.
func (s *Server) leaseCheck(app, id string) func(readSource) error {
	return func(src readSource) error {
		if src == fromDurable {
			return nil
		}
		return s.liveLease(app, id)
	}
}

// Read consistency levels a request may ask for with ?consistency=.
const (
	consistencyDefault      = ""
	consistencyStale        = "stale"
	consistencyLinearizable = "linearizable"
)

// readyWait is how long a registry read waits for a node that knows its
// leader and is catching up, before it is refused.
const readyWait = 500 * time.Millisecond

// readSource is where a registry read is answered from.
type readSource uint8

const (
	fromCache   readSource = iota // the response cache
	fromFSM                       // built fresh from the FSM (linearizable reads)
	fromDurable                   // built fresh from the durable state (gate closed)
)

// readGate applies the read rules (docs/design.md, "AP and CP", and the read
// gate in cluster/ready.go). A node whose gate is closed (it has not caught
// up since it started, or since it last lost touch with the leader) waits a
// moment for the catch-up while a leader is known, then refuses registry
// reads with 503, which every Eureka client treats as "try another server,
// keep the registry you have" (docs/operations.md). In AP mode (cut off
// from the quorum, or after a loss of touch), or when the request allows
// stale data, it answers marked stale instead: after a start from its
// durable state, never from a partly replayed FSM; after a loss of touch
// from its FSM, complete as of the loss, through the cache. A caught-up node
// without quorum marks its answers stale, and in CP mode refuses them unless
// the request allows stale data; a linearizable read confirms leadership
// first and is built fresh, bypassing the cache.
func (s *Server) readGate(c *gin.Context) (readSource, error) {
	level := consistencyDefault
	if c.Request.URL.RawQuery != "" { // gin parses the query into a new map on first use
		level = c.Query("consistency")
	}
	switch level {
	case consistencyDefault, consistencyStale, consistencyLinearizable:
	default:
		return fromCache, badRequestf("consistency " + strconv.Quote(level) + ": want stale or linearizable")
	}
	if level == consistencyLinearizable {
		if err := s.cluster.ReadBarrier(c.Request.Context()); err != nil {
			return fromCache, err
		}
		return fromFSM, nil
	}
	if !s.cluster.Ready() {
		ap := s.cluster.Mode() == cluster.ModeAP
		stale := level == consistencyStale || (ap && s.cluster.QuorumLost())
		if stale || !s.cluster.WaitReady(c.Request.Context(), readyWait) {
			once := s.cluster.CaughtUpOnce()
			if !stale && !(ap && once) {
				return fromCache, fmt.Errorf("node is catching up with the leader (add ?consistency=stale to read what it holds): %w", cluster.ErrNotReady)
			}
			c.Header("X-Heureka-Stale", "true")
			if once {
				return fromCache, nil // the FSM, complete as of the loss of touch
			}
			return fromDurable, nil
		}
	}
	if !s.cluster.HasQuorum() {
		c.Header("X-Heureka-Stale", "true")
		if s.cluster.Mode() == cluster.ModeCP && level != consistencyStale {
			return fromCache, fmt.Errorf("read without quorum in cp mode (add ?consistency=stale to accept stale data): %w", cluster.ErrNoQuorum)
		}
	}
	return fromCache, nil
}

// segmentWriters gather a document's segments (or a gzip document's
// pieces) into fewer writes; a large document (the full registry) gets a
// larger buffer, so that it goes out in about as few socket writes as one
// finished copy would.
var (
	segmentWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, segmentBuffer) }}
	largeWriters   = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 256<<10) }}
)

// largeDoc is the size from which a document is gathered in largeWriters,
// and segmentBuffer the size of segmentWriters' buffers.
const (
	largeDoc      = 1 << 20
	segmentBuffer = 32 << 10
)

// serve answers a read from the response cache, gzipped when the client
// accepts it.
func (s *Server) serve(c *gin.Context, ent cache.Entity, name string) {
	s.serveChecked(c, ent, name, nil)
}

// serveChecked is serve with check (nil: none), which may refuse the read
// once the read gate let it through.
func (s *Server) serveChecked(c *gin.Context, ent cache.Entity, name string, check func(readSource) error) {
	f := responseFormat(c, ent)
	key := cache.Key{Entity: ent, Name: name, Format: uint8(f)}
	block, blocks, err := parseBlocking(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	src, err := s.readGate(c)
	if err == nil && check != nil {
		err = check(src)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	switch {
	case !blocks:
	case src == fromDurable:
		if !s.awaitGate(c, block) {
			c.Abort() // the client went away
			return
		}
	case src == fromCache && s.park(c, key, block):
		return // the parking lot answers on the connection it took over
	default:
		if err := s.awaitNewer(c, key, block); err != nil {
			c.Abort() // the client went away
			return
		}
	}
	var v *cache.Value
	switch src {
	case fromCache:
		v, err = s.cache.Get(key)
	default:
		// Never cached: the durable state is served only until the gate opens.
		build := s.views.build
		if src == fromDurable {
			build = s.durableViews.build
		}
		var segs []cache.Segment
		var version uint64
		if segs, version, err = build(key); err == nil {
			v = cache.NewValue(segs, version)
		}
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	gz := acceptsGzip(c.GetHeader("Accept-Encoding"))
	docHeaders(c.Writer.Header(), v, f, gz)
	c.Status(http.StatusOK)
	if gz && writeVectored(c.Writer, c.Request, v) {
		return
	}
	writeDoc(c.Writer, v, gz)
}

// acceptsGzip reports whether an Accept-Encoding value allows a gzip
// answer: it names gzip with a q-value above 0 ("gzip;q=0" means not
// acceptable, and the answer is then plain). The values clients send
// ("gzip", "gzip, deflate, br") carry no parameters and are decided
// without parsing.
func acceptsGzip(accept string) bool {
	if !strings.Contains(accept, "gzip") {
		return false
	}
	if !strings.Contains(accept, ";") {
		return true
	}
	for elem := range strings.SplitSeq(accept, ",") {
		coding, params, _ := strings.Cut(elem, ";")
		coding = strings.TrimSpace(coding)
		if (strings.EqualFold(coding, "gzip") || strings.EqualFold(coding, "x-gzip")) && qualityAboveZero(params) {
			return true
		}
	}
	return false
}

// qualityAboveZero reports whether an Accept-Encoding element's parameters
// leave it acceptable: no q, or a q above 0. A q that is not a number is
// ignored, as a client that sent it meant the coding.
func qualityAboveZero(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			return q > 0
		}
	}
	return true
}

// Header values shared by every answer that carries them: assigning a
// shared one-element slice instead of calling Header.Set saves an
// allocation and a key canonicalisation per header per read. Nothing
// modifies a header value in place (Set replaces the slice, Add appends to
// a full one and so copies it).
var (
	contentTypeValues = func() (v [eureka.NumFormats][]string) {
		for f := range v {
			v[f] = []string{eureka.Format(f).ContentType()}
		}
		return v
	}()
	varyValue = []string{"Accept, Accept-Encoding, X-Eureka-Accept"} // the compact form answers X-Eureka-Accept: compact
	gzipValue = []string{"gzip"}
)

// docHeaderValues are the header values of one cached document, kept with
// it (cache.Value.Memo) so that reads of the same document share them.
type docHeaderValues struct {
	index, length []string
	gzLength      atomic.Pointer[[]string] // set on the first gzipped read
}

func deriveDocHeaders(v *cache.Value) any {
	return &docHeaderValues{index: []string{strconv.FormatUint(v.Version, 10)}, length: []string{strconv.Itoa(v.Len)}}
}

// docHeaders sets the headers of a registry document's answer (the keys
// are in canonical form).
func docHeaders(h http.Header, v *cache.Value, f eureka.Format, gz bool) {
	hv := v.Memo(deriveDocHeaders).(*docHeaderValues)
	h[IndexHeader] = hv.index
	h["Content-Type"] = contentTypeValues[f]
	if len(h["Vary"]) == 0 {
		h["Vary"] = varyValue
	} else {
		h["Vary"] = append(h["Vary"], varyValue[0])
	}
	if gz {
		h["Content-Encoding"] = gzipValue
		gzLen := hv.gzLength.Load()
		if gzLen == nil {
			l := []string{strconv.Itoa(v.GzipLen())}
			gzLen = &l
			hv.gzLength.Store(gzLen)
		}
		h["Content-Length"] = *gzLen
		return
	}
	h["Content-Length"] = hv.length
}

// writeDoc writes a registry document's body. A plain body comes from the
// copy the cache keeps while a document is read plain, or is inflated
// piece by piece as it is written (cache/plain.go).
func writeDoc(w io.Writer, v *cache.Value, gz bool) {
	if !gz {
		if b := v.PlainBytes(); b != nil {
			_, _ = w.Write(b)
			return
		}
	}
	// Many small segments (and a gzip document is always several: the
	// header, the compressed pieces it shares with other documents, the
	// trailer), or a plain body inflated in small pieces, would each be a
	// write through the connection's small buffer; gather them in a
	// larger one first.
	pool := &segmentWriters
	if v.Len >= largeDoc || gz && v.GzipLen() > segmentBuffer {
		// A gzip answer between segmentBuffer and vectorMin that
		// writeVectored does not take (over TLS; an application of 100
		// instances: 43 KiB) goes out in one write from the larger
		// buffer. Split at 32 KiB it took an extra system call, and 32
		// clients reading one at 50,000 instances got 0.84-0.88 of the
		// limit server's rate instead of 0.91-0.94 (BENCHMARKS.md, "A
		// half of the live heap as room, and memory returned when
		// quiet").
		pool = &largeWriters
	}
	bw := pool.Get().(*bufio.Writer)
	bw.Reset(w)
	if gz {
		_, _ = v.WriteGzipTo(bw)
	} else {
		_, _ = v.WriteTo(bw)
	}
	_ = bw.Flush()
	bw.Reset(nil)
	pool.Put(bw)
}
