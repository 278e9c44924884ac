package httpapi

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the client closed conn, by peeking at it
// without blocking: end of stream or a reset means gone; no data yet, or
// data (a pipelined request), means still there.
func peerClosed(conn net.Conn) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		default:
			closed = true
		}
		return true // never wait for the socket to become readable
	})
	return closed || err != nil
}
