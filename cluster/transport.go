package cluster

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Every Raft connection heureka opens starts with a short preamble naming
// the dialing node: "HRFT", one length byte, the node id. Raft itself does
// not need it; it lets a fault-injecting proxy between the peers (heureka
// lab and the partition tests) know which link a connection belongs to, and
// it is the place where peer authentication will hook in.
const preambleMagic = "HRFT"

// WritePreamble writes the preamble for nodeID.
func WritePreamble(w io.Writer, nodeID string) error {
	if len(nodeID) > 255 {
		return errors.New("node id longer than 255 bytes")
	}
	buf := append([]byte(preambleMagic), byte(len(nodeID)))
	_, err := w.Write(append(buf, nodeID...))
	return err
}

// ReadPreamble reads a preamble and returns the dialing node's id.
func ReadPreamble(r io.Reader) (string, error) {
	head := make([]byte, len(preambleMagic)+1)
	if _, err := io.ReadFull(r, head); err != nil {
		return "", fmt.Errorf("read raft preamble: %w", err)
	}
	if string(head[:len(preambleMagic)]) != preambleMagic {
		return "", errors.New("not a heureka raft connection")
	}
	id := make([]byte, head[len(preambleMagic)])
	if _, err := io.ReadFull(r, id); err != nil {
		return "", fmt.Errorf("read raft preamble: %w", err)
	}
	return string(id), nil
}

// streamLayer is a TCP raft.StreamLayer that sends and strips the preamble.
type streamLayer struct {
	net.Listener
	nodeID    string
	advertise net.Addr
}

func newStreamLayer(bind string, advertise net.Addr, nodeID string) (*streamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &streamLayer{Listener: ln, nodeID: nodeID, advertise: advertise}, nil
}

// Dial implements raft.StreamLayer.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	if err := WritePreamble(conn, s.nodeID); err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// Accept implements net.Listener: it returns connections whose preamble
// was read; one that sends none within a few seconds is dropped.
func (s *streamLayer) Accept() (net.Conn, error) {
	for {
		conn, err := s.Listener.Accept()
		if err != nil {
			return nil, err
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReaderSize(conn, 4096)
		if _, err := ReadPreamble(br); err != nil {
			conn.Close()
			continue
		}
		_ = conn.SetReadDeadline(time.Time{})
		return &bufferedConn{Conn: conn, r: br}, nil
	}
}

// Addr implements net.Listener with the advertised address.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// bufferedConn reads through the reader that consumed the preamble.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// tlsStreamLayer is the stream layer over mutual TLS: every connection,
// dialed or accepted, completes a TLS handshake in which both sides present
// a certificate the other verifies (Config.RaftTLS), and only then carries
// the preamble and Raft's RPCs. A peer without such a certificate never
// gets a byte to Raft. Handshakes run off the accept loop, so a slow or
// silent client cannot hold up real peers.
type tlsStreamLayer struct {
	ln        net.Listener
	cfg       *tls.Config
	nodeID    string
	advertise net.Addr
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

// handshakeTimeout bounds a TLS handshake plus preamble on either side.
const handshakeTimeout = 5 * time.Second

func newTLSStreamLayer(bind string, advertise net.Addr, nodeID string, cfg *tls.Config) (*tlsStreamLayer, error) {
	if cfg == nil || len(cfg.Certificates) == 0 && cfg.GetCertificate == nil {
		return nil, errors.New("raft TLS needs a certificate")
	}
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert {
		return nil, errors.New("raft TLS must require and verify peer certificates")
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	s := &tlsStreamLayer{ln: ln, cfg: cfg, nodeID: nodeID, advertise: advertise,
		conns: make(chan net.Conn), done: make(chan struct{})}
	go s.acceptLoop()
	return s, nil
}

func (s *tlsStreamLayer) acceptLoop() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go s.admit(conn)
	}
}

// admit completes the server side handshake and reads the preamble.
func (s *tlsStreamLayer) admit(raw net.Conn) {
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	conn := tls.Server(raw, s.cfg)
	if err := conn.Handshake(); err != nil {
		raw.Close()
		return
	}
	br := bufio.NewReaderSize(conn, 4096)
	if _, err := ReadPreamble(br); err != nil {
		conn.Close()
		return
	}
	_ = raw.SetDeadline(time.Time{})
	select {
	case s.conns <- &bufferedConn{Conn: conn, r: br}:
	case <-s.done:
		conn.Close()
	}
}

// Accept implements net.Listener.
func (s *tlsStreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (s *tlsStreamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		err = s.ln.Close()
	})
	return err
}

// Addr implements net.Listener with the advertised address.
func (s *tlsStreamLayer) Addr() net.Addr { return s.advertise }

// Dial implements raft.StreamLayer: TCP, TLS handshake (verifying the
// peer's certificate against the address dialed), then the preamble.
func (s *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		return nil, err
	}
	raw, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	cfg := s.cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	_ = raw.SetDeadline(time.Now().Add(timeout))
	conn := tls.Client(raw, cfg)
	if err := conn.Handshake(); err != nil {
		raw.Close()
		return nil, fmt.Errorf("raft tls handshake with %s: %w", address, err)
	}
	if err := WritePreamble(conn, s.nodeID); err != nil {
		conn.Close()
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, nil
}
