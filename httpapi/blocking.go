package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cache"
	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/eureka"
	"github.com/heureka-registry/heureka/internal/runtime/tick"
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

// holdBlocking readies a request that is about to wait up to wait: the
// server's read and write timeouts are meant for ordinary requests, and a
// blocking one may legitimately last the whole wait; it counts as waiting
// (Waiting, blocking_reads_waiting) until the function it returns is
// called.
func (s *Server) holdBlocking(c *gin.Context, wait time.Duration) (done func()) {
	rc := http.NewResponseController(c.Writer)
	deadline := time.Now().Add(wait)
	_ = rc.SetReadDeadline(deadline.Add(blockingGrace))
	_ = rc.SetWriteDeadline(deadline.Add(blockingGrace))
	s.waiting.Add(1)
	return func() { s.waiting.Add(-1) }
}

// gatePoll is how often a blocking read answered from the durable state
// looks whether the read gate opened.
const gatePoll = 100 * time.Millisecond

// awaitGate is the wait of a blocking read answered from the durable state
// (the gate closed since the node started): that state does not change, so
// the read waits until the gate opens, b.wait passes, or the client goes
// away (false). It never touches the cache, which must not be filled from
// a partly replayed FSM, and a client repeating its read is not answered
// at once each time.
func (s *Server) awaitGate(c *gin.Context, b blocking) bool {
	if b.wait <= 0 {
		return true
	}
	defer s.holdBlocking(c, b.wait)()
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	poll := time.NewTicker(gatePoll)
	defer poll.Stop()
	for !s.cluster.Ready() {
		select {
		case <-poll.C:
		case <-timer.C:
			return true
		case <-c.Request.Context().Done():
			return false
		}
	}
	return true
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
	defer s.holdBlocking(c, b.wait)()
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

// The parking lot: where blocking reads wait when they can. A request
// waiting inside Go's HTTP server keeps its connection's goroutines and
// buffers (about 22 KB in all); a sidecar fleet holding thousands of
// blocking reads would spend most of a node's memory on them. So an
// HTTP/1.x read that has to wait takes its connection over from the server
// (Hijack), drops the server's buffers and goroutines, and parks as a small
// record: the connection, what to answer, a timer. One goroutine per
// waited-on document waits for the cache to close its channel and answers
// every parked read the change satisfies; a sweep once a second notices
// connections the client closed (parkSweep) and releases them. Once
// answered, a parked read's connection goes back to the server for the
// client's next request (Listener); a server without that listener, or a
// TLS connection, answers with Connection: close instead.
//
// HTTP/2 connections cannot be taken over; their reads wait in awaitNewer.

// answerWriters buffer parked reads' answers: one change may answer
// thousands at once.
var answerWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 8<<10) }}

// parkSweep is how often parked connections are checked for a closed peer.
const parkSweep = time.Second

// parked is one blocking read waiting in the lot.
type parked struct {
	conn  net.Conn
	key   cache.Key
	index uint64
	gz    bool
	// head and v1 give the answer the shape serve gives it: headers only
	// for HEAD, statuses rewritten for a v1 XML read (v1Rewrite).
	head, v1 bool
	header   http.Header // set before parking: node headers, X-Heureka-Stale
	timer    *time.Timer
	// keep is set when the connection goes back to the server after the
	// answer (else the answer closes it).
	keep bool
}

// parkedKey is the parked reads of one document and their watcher's kick.
type parkedKey struct {
	waiters map[*parked]struct{}
	kick    chan struct{}
}

type parkingLot struct {
	s      *Server
	mu     sync.Mutex
	keys   map[cache.Key]*parkedKey
	all    map[*parked]struct{}
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

func newParkingLot(s *Server) *parkingLot {
	l := &parkingLot{s: s, keys: map[cache.Key]*parkedKey{}, all: map[*parked]struct{}{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.sweep()
	return l
}

// ready reports whether a read waiting for a version above index should
// answer now, given the document's current state (see awaitNewer).
func ready(index uint64, v *cache.Value, err error) bool {
	switch {
	case err == nil:
		return v.Version > index
	case isNotFound(err):
		return index > 0
	}
	return true
}

// park takes c's connection over and parks the read until key's document
// is newer than b.index; false (nothing done) when the read must not or
// cannot park: it is ready now, or its connection cannot be taken over.
func (s *Server) park(c *gin.Context, key cache.Key, b blocking) bool {
	if b.wait <= 0 || c.Request.ProtoMajor != 1 {
		return false
	}
	if v, err := s.cache.Get(key); ready(b.index, v, err) {
		return false
	}
	l := s.lot
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return false
	}
	_, v1 := c.Writer.(*v1Writer)
	conn, brw, err := http.NewResponseController(c.Writer).Hijack()
	if err != nil {
		return false
	}
	_ = conn.SetDeadline(time.Time{}) // the server's timeouts no longer apply
	p := &parked{conn: conn, key: key, index: b.index, header: c.Writer.Header().Clone(),
		gz: acceptsGzip(c.GetHeader("Accept-Encoding")), head: c.Request.Method == http.MethodHead, v1: v1}
	// The connection can serve the client's next request after the answer
	// when the client keeps connections (HTTP/1.1, no Connection: close)
	// and sent nothing beyond this request: bytes the server had read
	// ahead would be lost with its buffer.
	_, reusable := conn.(reusableConn)
	p.keep = reusable && c.Request.ProtoAtLeast(1, 1) && !c.Request.Close && brw.Reader.Buffered() == 0
	s.waiting.Add(1)
	l.add(p, b.wait)
	return true
}

// add registers p, starts its wait, and makes sure its document has a
// watcher. The wait's timer starts once p is in the lot: one that fired
// before (a wait of a nanosecond) would find nothing to release, and p
// would then wait for a change with no timer.
func (l *parkingLot) add(p *parked, wait time.Duration) {
	l.mu.Lock()
	pk := l.keys[p.key]
	if pk == nil {
		pk = &parkedKey{waiters: map[*parked]struct{}{}, kick: make(chan struct{}, 1)}
		l.keys[p.key] = pk
		go l.watch(p.key, pk)
	}
	pk.waiters[p] = struct{}{}
	l.all[p] = struct{}{}
	p.timer = time.AfterFunc(wait, func() { l.release(p, true) })
	l.mu.Unlock()
	// The watcher may have read the document before p arrived: make it
	// look again.
	select {
	case pk.kick <- struct{}{}:
	default:
	}
}

// watch answers key's parked reads as the document changes, and ends when
// none is left.
func (l *parkingLot) watch(key cache.Key, pk *parkedKey) {
	for {
		changed := l.s.cache.Watch(key)
		v, err := l.s.cache.Get(key)
		var answer []*parked
		l.mu.Lock()
		if len(pk.waiters) == 0 {
			delete(l.keys, key)
			l.mu.Unlock()
			return
		}
		for p := range pk.waiters {
			if ready(p.index, v, err) {
				answer = append(answer, p)
				delete(pk.waiters, p)
				delete(l.all, p)
			}
		}
		l.mu.Unlock()
		for _, p := range answer {
			p.timer.Stop()
			go l.s.answerParked(p, v, err)
		}
		select {
		case <-changed:
		case <-pk.kick:
		case <-l.stop:
			return
		}
	}
}

// release takes p out of the lot: answered with the current document when
// its wait ended, else (its client went away, or the server is closing)
// just closed.
func (l *parkingLot) release(p *parked, answer bool) {
	l.mu.Lock()
	if _, ok := l.all[p]; !ok {
		l.mu.Unlock()
		return // already answered
	}
	delete(l.all, p)
	if pk := l.keys[p.key]; pk != nil {
		delete(pk.waiters, p)
		if len(pk.waiters) == 0 {
			// The watcher ends once it sees no waiter: wake it, or it
			// waits (a goroutine and an entry of l.keys) until the
			// document changes, for a document named by a client that
			// may never change.
			select {
			case pk.kick <- struct{}{}:
			default:
			}
		}
	}
	l.mu.Unlock()
	p.timer.Stop()
	if answer {
		v, err := l.s.cache.Get(p.key)
		l.s.answerParked(p, v, err)
		return
	}
	_ = p.conn.Close()
	l.s.waiting.Add(-1)
}

// sweep releases parked reads whose client closed its connection.
func (l *parkingLot) sweep() {
	defer close(l.done)
	tick.Every(l.stop, parkSweep, func() {
		l.mu.Lock()
		ps := make([]*parked, 0, len(l.all))
		for p := range l.all {
			ps = append(ps, p)
		}
		l.mu.Unlock()
		for _, p := range ps {
			if peerClosed(p.conn) {
				l.release(p, false)
			}
		}
	})
}

// close releases every parked read and stops the lot.
func (l *parkingLot) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	ps := make([]*parked, 0, len(l.all))
	for p := range l.all {
		ps = append(ps, p)
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	for _, p := range ps {
		l.release(p, false)
	}
}

// answerParked writes the answer a parked read would have had from serve,
// and hands the connection back to the server for the client's next
// request, or, when it cannot, answers with Connection: close and closes
// it.
func (s *Server) answerParked(p *parked, v *cache.Value, err error) {
	defer s.waiting.Add(-1)
	_ = p.conn.SetWriteDeadline(time.Now().Add(blockingGrace))
	h := p.header
	if err == nil && h.Get("X-Heureka-Stale") == "" && !s.cluster.Ready() {
		// The gate closed while the read was parked (a loss of touch):
		// answer as serve would now, never unmarked from behind.
		if s.cluster.Mode() == cluster.ModeAP {
			h.Set("X-Heureka-Stale", "true")
		} else {
			err = fmt.Errorf("node lost touch with the leader while the read waited: %w", cluster.ErrNotReady)
		}
	}
	status := http.StatusOK
	var body []byte
	if err != nil {
		status = errorStatus(err)
		switch {
		case status == http.StatusNotFound: // empty, as Eureka clients expect
		case status == http.StatusServiceUnavailable:
			// As fail answers a refused registry read: no body (fargo
			// decodes one whatever the status), the reason in a header.
			h.Set("X-Heureka-Error", err.Error())
		case status == http.StatusInternalServerError:
			s.log.Error("blocking read failed", "key", p.key.Name, "error", err)
			body, _ = json.Marshal(gin.H{"error": "internal error"})
		default:
			body, _ = json.Marshal(gin.H{"error": err.Error()})
		}
		if status == http.StatusServiceUnavailable {
			h.Set("Retry-After", "1")
		}
		if len(body) > 0 {
			h.Set("Content-Type", "application/json; charset=utf-8")
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
	} else {
		docHeaders(h, v, eureka.Format(p.key.Format), p.gz)
		if p.v1 { // plain: v1Rewrite asked for it so
			body = v1Statuses(h.Get("Content-Type"), v.Bytes())
			h.Set("Content-Length", strconv.Itoa(len(body)))
		}
	}
	if !p.keep {
		h.Set("Connection", "close")
	}
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	bw := answerWriters.Get().(*bufio.Writer)
	defer answerWriters.Put(bw)
	bw.Reset(p.conn)
	defer bw.Reset(nil)
	_, _ = bw.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	_ = h.Write(bw)
	_, _ = bw.WriteString("\r\n")
	switch {
	case p.head: // the headers a GET gets, as net/http answers HEAD
	case err != nil || p.v1:
		_, _ = bw.Write(body)
	default:
		writeDoc(bw, v, p.gz)
	}
	if bw.Flush() == nil && p.keep {
		_ = p.conn.SetDeadline(time.Time{})
		if p.conn.(reusableConn).reuse() {
			return
		}
	}
	_ = p.conn.Close()
}
