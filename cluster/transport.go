package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
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
