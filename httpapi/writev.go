package httpapi

import (
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
			c = vecConn{tc, l}
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
}

// reusableConn is a connection an answered parked read may hand back to
// the server.
type reusableConn interface{ reuse() bool }

func (c vecConn) reuse() bool { return c.l.reuse(c) }

// vectoredWrites counts the documents written with writev (tests).
var vectoredWrites atomic.Int64

// ReadFrom writes a document's remaining pieces with writev, and anything
// else as *net.TCPConn does.
func (c vecConn) ReadFrom(r io.Reader) (int64, error) {
	if b, ok := r.(*vecBody); ok {
		vectoredWrites.Add(1)
		return b.writeTo(c.TCPConn)
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
// per writev.
func (b *vecBody) writeTo(c *net.TCPConn) (int64, error) {
	var total int64
	for len(b.parts) > 0 {
		w := append(b.win[:0], b.parts[0][b.off:])
		k := 1
		for ; k < len(b.parts) && len(w) < vecWindow; k++ {
			w = append(w, b.parts[k])
		}
		bufs := net.Buffers(w)
		n, err := bufs.WriteTo(c)
		total += n
		if err != nil {
			return total, err
		}
		b.parts, b.off = b.parts[k:], 0
	}
	return total, nil
}

var vecBodies = sync.Pool{New: func() any { return new(vecBody) }}

// vectorMin is the gzip size from which a document is written with
// writev. A smaller one (an application's document: a few KiB) is
// gathered in a buffer and written once, as before: copying a few KiB
// costs less than net/http's ReadFrom path (it writes the header and the
// first 512 bytes in a write of their own).
const vectorMin = 64 << 10

// writeVectored writes v's gzip form through w's ReadFrom when it is large
// and the writer under gin's supports it (net/http's own; the caller has
// set the Content-Length), and reports whether it did.
func writeVectored(w gin.ResponseWriter, v *cache.Value) bool {
	if v.GzipLen() < vectorMin {
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
	_, _ = rf.ReadFrom(b)
	b.parts = nil
	clear(b.win[:]) // no document kept alive by the pool
	vecBodies.Put(b)
	return true
}
