package cluster

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/heureka-registry/heureka/nodeapi"
)

// Every Raft connection heureka opens starts with a short preamble naming
// the dialing node: "HRFT", one length byte, the node id. Raft itself does
// not need it; it lets a fault-injecting proxy between the peers (heureka
// lab and the partition tests) know which link a connection belongs to.
// heureka's own dialer follows it with its cluster's identity and, with a
// cluster secret, the proof exchange (raftauth.go); with --raft-tls, all of
// it runs inside the TLS session.
const preambleMagic = "HRFT"

// WritePreamble writes the preamble for nodeID.
func WritePreamble(w io.Writer, nodeID string) error {
	buf, err := preamble(nodeID)
	if err != nil {
		return err
	}
	_, err = w.Write(buf)
	return err
}

func preamble(nodeID string) ([]byte, error) {
	if len(nodeID) > 255 {
		return nil, errors.New("node id longer than 255 bytes")
	}
	buf := append([]byte(preambleMagic), byte(len(nodeID)))
	return append(buf, nodeID...), nil
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

// handshakeTimeout bounds what an accepted connection must complete before
// Raft sees it: the TLS handshake (with --raft-tls), the preamble and the
// secret proof (with a cluster secret).
const handshakeTimeout = 5 * time.Second

// streamLayer is heureka's raft.StreamLayer over TCP. Each connection,
// dialed or accepted, goes through up to four steps before it carries a
// Raft RPC: a mutual TLS handshake when tls is set (both sides present a
// certificate the other verifies), the preamble, the cluster identity
// (both sides name theirs; a mismatch is refused), and, when key is set,
// the proof that both sides hold the cluster secret (raftauth.go). A peer
// that fails any step never gets a byte to Raft. Accepted connections are
// admitted off the accept loop, so a slow or silent client cannot hold up
// real peers.
type streamLayer struct {
	ln        net.Listener
	tls       *tls.Config // nil: plain TCP
	key       []byte      // nil: no secret proof
	nodeID    string
	advertise net.Addr
	log       hclog.Logger
	refusals  *nodeapi.RefusalLog
	identity  func() string        // the cluster's identity; nil or "": unknown
	member    func(id string) bool // whether id is in this node's Raft configuration
	legacy    legacyPeers
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

// streamOptions are the optional parts of a stream layer.
type streamOptions struct {
	// TLS runs every connection over mutual TLS (Config.RaftTLS).
	TLS *tls.Config
	// Secret requires the peer's proof of the cluster secret
	// (Config.ClusterSecret).
	Secret string
	// ClusterID is this node's cluster identity ("" while unknown): it is
	// sent on every connection dialed, and a peer naming another is
	// refused (raftauth.go).
	ClusterID func() string
	// Member reports whether a node id is in this node's Raft
	// configuration: a dialer that names no cluster is admitted by a node
	// that knows its own only if it is (admitDialer).
	Member func(id string) bool
	// Log receives refused connections, rate-limited per remote host.
	Log hclog.Logger
}

func newStreamLayer(bind string, advertise net.Addr, nodeID string, opts streamOptions) (*streamLayer, error) {
	if cfg := opts.TLS; cfg != nil {
		if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil {
			return nil, errors.New("raft TLS needs a certificate")
		}
		if cfg.ClientAuth != tls.RequireAndVerifyClientCert {
			return nil, errors.New("raft TLS must require and verify peer certificates")
		}
	}
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	s := &streamLayer{ln: ln, tls: opts.TLS, nodeID: nodeID, advertise: advertise,
		log: opts.Log, refusals: nodeapi.NewRefusalLog(nodeapi.RefusalLogEvery), identity: opts.ClusterID, member: opts.Member,
		conns: make(chan net.Conn), done: make(chan struct{})}
	if opts.Secret != "" {
		s.key = raftAuthKey(opts.Secret)
	}
	go s.acceptLoop()
	return s, nil
}

func (s *streamLayer) acceptLoop() {
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

// admit runs the server side of the steps and hands the connection to
// Raft, or closes it.
func (s *streamLayer) admit(raw net.Conn) {
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	var conn net.Conn = raw
	if s.tls != nil {
		tc := tls.Server(raw, s.tls)
		if err := tc.Handshake(); err != nil {
			s.refuse(raw, "", fmt.Errorf("tls handshake: %w", err))
			raw.Close()
			return
		}
		conn = tc
	}
	br := bufio.NewReaderSize(conn, 4096)
	from, err := ReadPreamble(br)
	if err != nil {
		// Without a secret nothing is being defended here beyond the
		// framing, and port scanners are not worth a log line.
		if s.key != nil {
			s.refuse(raw, "", err)
		}
		conn.Close()
		return
	}
	peerCluster, framed, err := readIdentity(br)
	if err != nil {
		s.refuse(raw, from, err)
		conn.Close()
		return
	}
	if framed {
		own := s.clusterID()
		mismatch := admitDialer(own, peerCluster, from, s.member)
		verdict := byte(0)
		if mismatch != nil {
			verdict = 1
		}
		_, werr := conn.Write(append(identityFrame(own), verdict))
		if mismatch != nil {
			s.refuse(raw, from, mismatch, "peer_cluster", peerCluster, "cluster", own)
			conn.Close()
			return
		}
		if werr != nil {
			conn.Close()
			return
		}
	}
	if s.key != nil {
		if err := proveServer(conn, br, s.key, from, s.nodeID); err != nil {
			s.refuse(raw, from, err)
			conn.Close()
			return
		}
	}
	_ = raw.SetDeadline(time.Time{})
	select {
	case s.conns <- &bufferedConn{Conn: conn, r: br}:
	case <-s.done:
		conn.Close()
	}
}

// refuse logs a refused connection, at most once per remote host per
// nodeapi.RefusalLogEvery, with the count of those not logged since.
func (s *streamLayer) refuse(raw net.Conn, claimed string, err error, kv ...any) {
	remote := raw.RemoteAddr().String()
	host, _, splitErr := net.SplitHostPort(remote)
	if splitErr != nil {
		host = remote
	}
	if suppressed, ok := s.refusals.Allow(host, time.Now()); ok {
		args := append([]any{"remote", remote, "claimed_node", claimed, "error", err}, kv...)
		s.log.Warn("raft connection refused", append(args, "suppressed_since_last", suppressed)...)
	}
}

// clusterID is this node's cluster identity, "" while unknown.
func (s *streamLayer) clusterID() string {
	if s.identity == nil {
		return ""
	}
	return s.identity()
}

// Accept implements net.Listener.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (s *streamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		err = s.ln.Close()
	})
	return err
}

// Addr implements net.Listener with the advertised address.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial implements raft.StreamLayer: TCP, the TLS handshake (verifying the
// peer's certificate against the address dialed), the preamble and the
// secret proof, each as configured.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.key == nil && s.legacy.is(string(address), time.Now()) {
		return s.dialPlain(address, timeout)
	}
	raw, conn, err := s.connect(address, timeout)
	if err != nil {
		return nil, err
	}
	// Preamble, cluster identity and the secret hello go out in one write;
	// the answers come back in order.
	own := s.clusterID()
	out, err := preamble(s.nodeID)
	if err != nil {
		conn.Close()
		return nil, err
	}
	out = append(out, identityFrame(own)...)
	var cnonce []byte
	if s.key != nil {
		if cnonce, err = newNonce(); err != nil {
			conn.Close()
			return nil, err
		}
		out = append(out, authHello(cnonce)...)
	}
	if _, err := conn.Write(out); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 4096)
	peerCluster, refused, err := readIdentityReply(br)
	if err != nil && s.key == nil && isClosedEarly(err) {
		// A heureka from before the identity frame hands it to Raft,
		// which drops the connection: talk to it the old way for a while
		// (a rolling upgrade). With a secret there is no old way.
		conn.Close()
		s.legacy.mark(string(address), time.Now())
		return s.dialPlain(address, timeout)
	}
	if err == nil && !refused {
		err = sameCluster(own, peerCluster)
	} else if err == nil {
		err = sameCluster(own, peerCluster)
		if err == nil {
			err = fmt.Errorf("this node names no cluster yet and the peer belongs to cluster %s: %w", peerCluster, ErrOtherCluster)
		}
		err = fmt.Errorf("the peer refused this node: %w", err)
	}
	if err != nil {
		conn.Close()
		err = fmt.Errorf("raft peer %s: %w", address, err)
		if suppressed, ok := s.refusals.Allow("dial "+string(address), time.Now()); ok {
			s.log.Warn("raft peer refused", "address", string(address), "peer_cluster", peerCluster, "cluster", own,
				"error", err, "suppressed_since_last", suppressed)
		}
		return nil, err
	}
	if s.key == nil {
		_ = raw.SetDeadline(time.Time{})
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	peer, err := proveClient(conn, br, s.key, s.nodeID, cnonce)
	if err != nil {
		conn.Close()
		err = fmt.Errorf("raft peer %s (node %q): %w", address, peer, err)
		if suppressed, ok := s.refusals.Allow("dial "+string(address), time.Now()); ok {
			s.log.Warn("raft peer refused", "address", string(address), "peer_node", peer,
				"error", err, "suppressed_since_last", suppressed)
		}
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return &bufferedConn{Conn: conn, r: br}, nil
}

// connect dials TCP and, with TLS, completes the handshake, verifying the
// peer's certificate against the address dialed. The deadline it sets on
// raw covers what the caller does next; the caller clears it.
func (s *streamLayer) connect(address raft.ServerAddress, timeout time.Duration) (raw, conn net.Conn, err error) {
	raw, err = net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, nil, err
	}
	_ = raw.SetDeadline(time.Now().Add(timeout))
	if s.tls == nil {
		return raw, raw, nil
	}
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		raw.Close()
		return nil, nil, err
	}
	cfg := s.tls.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	tc := tls.Client(raw, cfg)
	if err := tc.Handshake(); err != nil {
		raw.Close()
		return nil, nil, fmt.Errorf("raft tls handshake with %s: %w", address, err)
	}
	return raw, tc, nil
}

// dialPlain dials a peer known to predate the identity frame: the
// preamble only, as before (never with a secret: there is no old way).
func (s *streamLayer) dialPlain(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	raw, conn, err := s.connect(address, timeout)
	if err != nil {
		return nil, err
	}
	if err := WritePreamble(conn, s.nodeID); err != nil {
		conn.Close()
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, nil
}

// isClosedEarly reports whether the peer closed the connection before it
// answered anything.
func isClosedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// legacyPeers remembers, for a while, the addresses of peers that predate
// the identity frame.
type legacyPeers struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// legacyFor is how long a peer is dialed the old way before the frame is
// tried again (it may have been upgraded meanwhile).
const legacyFor = time.Minute

func (l *legacyPeers) mark(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.until == nil || len(l.until) > 1024 {
		l.until = map[string]time.Time{}
	}
	l.until[addr] = now.Add(legacyFor)
}

func (l *legacyPeers) is(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.Before(l.until[addr])
}

// bufferedConn reads through the reader that consumed the preamble.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
