package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/gin-gonic/gin"

	"github.com/heureka-registry/heureka/cache"
)

// A gzip document is many slices (the header, the compressed pieces it
// shares with other documents, the trailer; about two per application for
// the full registry). Copying them into a buffer before the socket would
// add a copy of every byte served; writing each to the socket would add a
// system call per piece. Instead they go to the socket in writevs of up
// to 1024 slices:
// net/http hands a body written with io.ReaderFrom to its connection's
// ReadFrom once the header is out, and the connections of Listener answer
// that for a document's pieces with net.Buffers' writev.
//
// net/http writes that header (with the body's first 512 bytes) in a
// system call of its own, and a document of a few KiB written through its
// buffers goes out in two: one application's document cost two writes
// where one would do. A handler that knows its connection (ConnContext)
// has the connection hold the header back (holdHeader) and send it in the
// body's first writev, so that a document of up to a thousand pieces is
// one system call, header and all.

// Listener wraps ln so that gzip documents are written with writev (its
// TCP connections keep every method of *net.TCPConn, so that parking a
// blocking read still reaches the socket), and so that the connection of
// an answered blocking read goes back to the server for the client's next
// request (reuse) instead of being closed: a client following a document
// reads again at once, and a new connection per answer cost it a dial and
// the server an accept.
func Listener(ln net.Listener) net.Listener {
	return &vecListener{Listener: ln, accepted: make(chan accepted), back: make(chan net.Conn, reuseQueue), done: make(chan struct{})}
}

// reuseQueue bounds the answered connections waiting to be served again;
// beyond it they are closed, as a parked read's always were.
const reuseQueue = 1024

type vecListener struct {
	net.Listener
	accepted chan accepted
	back     chan net.Conn
	done     chan struct{}
	start    sync.Once
	// mu orders reuse against Close: nothing is queued once Close began
	// draining the queue.
	mu     sync.Mutex
	closed bool
}

type accepted struct {
	c   net.Conn
	err error
}

// Accept returns the next connection: a new one, or one whose parked read
// was answered.
func (l *vecListener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.acceptLoop() })
	select {
	case c := <-l.back:
		return c, nil
	case a := <-l.accepted:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// acceptLoop accepts on the wrapped listener and hands each result to
// Accept, until the listener is closed. The server calls Accept again
// after an error when it is temporary, and closes the listener when not.
func (l *vecListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if tc, ok := c.(*net.TCPConn); ok {
			c = &vecConn{TCPConn: tc, l: l}
		}
		select {
		case l.accepted <- accepted{c, err}:
		case <-l.done:
			if c != nil {
				_ = c.Close()
			}
			return
		}
	}
}

// Close closes the wrapped listener and the connections waiting to be
// served again.
func (l *vecListener) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	l.mu.Unlock()
	err := l.Listener.Close()
	for {
		select {
		case c := <-l.back:
			_ = c.Close()
		default:
			return err
		}
	}
}

// reuse hands c back to the server, which reads the client's next request
// from it; false when it cannot (closing, or too many waiting), and the
// caller closes c.
func (l *vecListener) reuse(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	select {
	case l.back <- c:
		return true
	default:
		return false
	}
}

type vecConn struct {
	*net.TCPConn
	l *vecListener
	// holding and held keep a response's header back (holdHeader). Only
	// the goroutine serving the connection's current request touches
	// them; a connection goes from one to the next through a channel.
	holding bool
	held    *[]byte // from heldBuffers while bytes are held
}

// reusableConn is a connection an answered parked read may hand back to
// the server.
type reusableConn interface{ reuse() bool }

func (c *vecConn) reuse() bool { return c.l.reuse(c) }

type connKey struct{}

// ConnContext is the http.Server's ConnContext for the connections of
// Listener: it lets a handler find the connection it answers on
// (connOf), to send a document's header and body in one system call. Any
// other connection (TLS's) is left out, and its documents are written as
// net/http writes them.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if vc, ok := c.(*vecConn); ok {
		return context.WithValue(ctx, connKey{}, vc)
	}
	return ctx
}

// connOf is the connection of Listener r arrived on, nil when the server
// was not given ConnContext or the connection is not one of Listener's.
func connOf(r *http.Request) *vecConn {
	vc, _ := r.Context().Value(connKey{}).(*vecConn)
	return vc
}

// heldBuffers hold headers held back; a connection gives its buffer back
// once the header is sent, so that idle and parked connections hold
// none.
var heldBuffers = sync.Pool{New: func() any { b := make([]byte, 0, heldMax); return &b }}

// heldMax bounds what a connection holds back: net/http's connection
// buffer, which its header and first body bytes are flushed from. A
// larger write is not held.
const heldMax = 4 << 10

// holdHeader makes the connection keep the next bytes written to it (net/http's
// buffered header and the body's first bytes) and send them with what
// follows: the body's first writev, or the next write. The caller must
// call sendHeld before its handler returns, so that nothing stays held
// once the response is done (net/http writes a short body with the
// header only after the handler returns).
func (c *vecConn) holdHeader() { c.holding = true }

// sendHeld stops holding and writes what is held, if anything.
func (c *vecConn) sendHeld() error {
	c.holding = false
	if c.held == nil {
		return nil
	}
	_, err := c.Write(nil)
	return err
}

// sendHeldOrClose is sendHeld at the end of a handler's write: what is
// still held (a HEAD answer's header, whose body net/http does not hand
// to ReadFrom) goes now, and a connection that cannot take it is closed,
// as its answer is lost.
func (c *vecConn) sendHeldOrClose() {
	if c.sendHeld() != nil {
		_ = c.Close()
	}
}

// Write writes p after anything held, in one writev; while holding, it
// keeps a copy of p instead.
func (c *vecConn) Write(p []byte) (int, error) {
	if c.holding {
		c.holding = false
		if len(p) <= heldMax {
			c.held = heldBuffers.Get().(*[]byte)
			*c.held = append((*c.held)[:0], p...)
			return len(p), nil
		}
	}
	socketWrites.Add(1)
	head := c.takeHeld()
	if head == nil {
		return c.TCPConn.Write(p)
	}
	defer c.putHeld(head)
	bufs := net.Buffers{*head, p}
	n, err := bufs.WriteTo(c.TCPConn)
	return int(max(0, n-int64(len(*head)))), err
}

// takeHeld returns what is held, if anything, and holds nothing from then
// on; the caller gives it back with putHeld.
func (c *vecConn) takeHeld() *[]byte {
	h := c.held
	c.held = nil
	return h
}

func (c *vecConn) putHeld(h *[]byte) {
	if h != nil {
		*h = (*h)[:0]
		heldBuffers.Put(h)
	}
}

// vectoredWrites counts the documents written with writev, and
// socketWrites the writes and writevs Listener's connections make (tests).
var vectoredWrites, socketWrites atomic.Int64

// ReadFrom writes a document's remaining pieces with writev, after the
// header held back if any, and anything else as *net.TCPConn does.
func (c *vecConn) ReadFrom(r io.Reader) (int64, error) {
	if b, ok := r.(*vecBody); ok {
		vectoredWrites.Add(1)
		head := c.takeHeld()
		defer c.putHeld(head)
		return b.writeTo(c.TCPConn, head)
	}
	if err := c.sendHeld(); err != nil {
		return 0, err
	}
	return c.TCPConn.ReadFrom(r)
}

// vecWindow is how many of a document's slices one writev takes: the
// kernel's limit (UIO_MAXIOV), which net.Buffers splits at too.
const vecWindow = 1024

// vecBody is a document's parts as a reader; net/http reads its first
// bytes (for content sniffing) before handing the rest to ReadFrom, which
// writes them a window at a time. The window is the body's own: writev
// consumes the slices it is given, and the document's are shared, so
// they are copied, but a window's worth at a time. A copy of all of them
// (a hundred thousand for the full registry of a million instances, 2.4
// MB) was kept by the pool for each response written at once, 90 MB on
// a node read by 32 clients.
type vecBody struct {
	parts [][]byte // what is left of the document's, never modified
	off   int      // bytes of parts[0] already read
	win   [vecWindow][]byte
}

func (b *vecBody) Read(p []byte) (int, error) {
	for len(b.parts) > 0 && b.off == len(b.parts[0]) {
		b.parts, b.off = b.parts[1:], 0
	}
	if len(b.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.parts[0][b.off:])
	b.off += n
	return n, nil
}

// writeTo writes what is left of the document to c, a window of slices
// per writev, the first led by head (held bytes written before the body:
// not counted in the total, which is the body's).
func (b *vecBody) writeTo(c *net.TCPConn, head *[]byte) (int64, error) {
	var total int64
	for len(b.parts) > 0 {
		w := b.win[:0]
		lead := 0
		if head != nil && len(*head) > 0 {
			w, lead = append(w, *head), len(*head)
			head = nil
		}
		w = append(w, b.parts[0][b.off:])
		k := 1
		for ; k < len(b.parts) && len(w) < vecWindow; k++ {
			w = append(w, b.parts[k])
		}
		bufs := net.Buffers(w)
		socketWrites.Add(1)
		n, err := bufs.WriteTo(c)
		total += max(0, n-int64(lead))
		if err != nil {
			return total, err
		}
		b.parts, b.off = b.parts[k:], 0
	}
	return total, nil
}

var vecBodies = sync.Pool{New: func() any { return new(vecBody) }}

// vectorMin is the gzip size from which a document is written with
// writev when its connection cannot hold the header back (no ConnContext,
// or TLS). A smaller one (an application's document: a few KiB) is then
// gathered in a buffer and written once, as before: copying a few KiB
// costs less than net/http's ReadFrom path, which writes the header and
// the first 512 bytes in a write of their own.
const vectorMin = 64 << 10

// heldMin is the gzip size from which a document on a connection that
// holds the header back goes out through ReadFrom: a smaller one fits
// net/http's 4 KiB buffer with its header and goes out in one write
// anyway, and cheaper than through the ReadFrom path (36.6 against 40.4
// µs of a node's CPU a read of 1.5 KiB, in one run).
const heldMin = 3 << 10

// writeVectored writes v's gzip form through w's ReadFrom, when the
// writer under gin's supports it (net/http's own; the caller has set the
// Content-Length), and reports whether it did: a document of heldMin or
// more on a connection that holds the header back for the body's writev
// (the connection r came on, through ConnContext), else one of vectorMin
// or more.
func writeVectored(w gin.ResponseWriter, r *http.Request, v *cache.Value) bool {
	n := v.GzipLen()
	if n < heldMin {
		return false // one write through net/http's buffer already
	}
	conn := connOf(r)
	if conn == nil && n < vectorMin {
		return false
	}
	if _, rewritten := w.(*v1Writer); rewritten {
		return false
	}
	u, ok := w.(interface{ Unwrap() http.ResponseWriter })
	if !ok {
		return false
	}
	rf, ok := u.Unwrap().(io.ReaderFrom)
	if !ok {
		return false
	}
	b := vecBodies.Get().(*vecBody)
	b.parts, b.off = v.GzipParts(), 0
	w.WriteHeaderNow()
	if conn != nil {
		conn.holdHeader()
		defer conn.sendHeldOrClose()
	}
	_, _ = rf.ReadFrom(b)
	b.parts = nil
	clear(b.win[:]) // no document kept alive by the pool
	vecBodies.Put(b)
	return true
}
