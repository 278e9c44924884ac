package cluster

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// With a cluster secret, a Raft connection carries no RPC until both ends
// have proved they hold the secret. After the preamble:
//
//	dialer   → acceptor  "HRA1" client-nonce[32]
//	acceptor → dialer    "HRA1" len(id) acceptor-id server-nonce[32]
//	dialer   → acceptor  HMAC(k, "client" | nonces | dialer-id | acceptor-id)
//	acceptor → dialer    HMAC(k, "server" | nonces | dialer-id | acceptor-id)
//
// k is derived from the secret, never the secret itself. The dialer proves
// first, so a stranger learns nothing computed from k before it has shown
// it holds k (no offline guessing from a server's answer). Both nonces are
// fresh per connection, so a recorded transcript does not verify again, and
// the labels keep one side's proof from being reflected as the other's.
// Both node ids are covered, so a proof made for one link does not serve
// another. The secret does not encrypt the stream: --raft-tls does that.
const (
	raftAuthMagic = "HRA1"
	nonceLen      = 32
	macLen        = sha256.Size
)

// raftAuthKey derives the transport's key from the cluster secret, apart
// from any other use of the secret.
func raftAuthKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("heureka raft transport key v1"))
	return m.Sum(nil)
}

func raftAuthMAC(key []byte, label string, cnonce, snonce []byte, client, server string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	m.Write(cnonce)
	m.Write(snonce)
	m.Write([]byte{byte(len(client))})
	m.Write([]byte(client))
	m.Write([]byte{byte(len(server))})
	m.Write([]byte(server))
	return m.Sum(nil)
}

// errNoProof and errBadProof are why an acceptor refuses a connection.
var (
	errNoProof  = errors.New("no cluster secret proof: the peer has no cluster secret, or is not a heureka node")
	errBadProof = errors.New("wrong cluster secret")
)

// newNonce returns a fresh random nonce.
func newNonce() ([]byte, error) {
	b := make([]byte, nonceLen)
	_, err := rand.Read(b)
	return b, err
}

// authHello is the dialer's first frame of the proof exchange.
func authHello(cnonce []byte) []byte {
	return append([]byte(raftAuthMagic), cnonce...)
}

// proveClient runs the rest of the dialer's side after it sent its hello
// with cnonce: it reads the acceptor's hello, proves itself and checks the
// acceptor's proof. It returns the acceptor's node id (as far as it got)
// and an error unless both proofs passed.
func proveClient(w io.Writer, r *bufio.Reader, key []byte, self string, cnonce []byte) (string, error) {
	head := make([]byte, len(raftAuthMagic)+1)
	if _, err := io.ReadFull(r, head); err != nil {
		return "", fmt.Errorf("no answer to the cluster secret hello (the peer may have no cluster secret): %w", err)
	}
	if string(head[:len(raftAuthMagic)]) != raftAuthMagic {
		return "", errors.New("the peer does not speak the cluster secret handshake")
	}
	rest := make([]byte, int(head[len(raftAuthMagic)])+nonceLen)
	if _, err := io.ReadFull(r, rest); err != nil {
		return "", fmt.Errorf("read cluster secret hello: %w", err)
	}
	peer, snonce := string(rest[:len(rest)-nonceLen]), rest[len(rest)-nonceLen:]
	if _, err := w.Write(raftAuthMAC(key, "client", cnonce, snonce, self, peer)); err != nil {
		return peer, err
	}
	got := make([]byte, macLen)
	if _, err := io.ReadFull(r, got); err != nil {
		return peer, fmt.Errorf("the peer refused our proof (a different cluster secret?): %w", err)
	}
	if !hmac.Equal(got, raftAuthMAC(key, "server", cnonce, snonce, self, peer)) {
		return peer, errors.New("the peer does not prove our cluster secret")
	}
	return peer, nil
}

// proveServer runs the acceptor's side after the preamble naming client
// was read from r.
func proveServer(w io.Writer, r *bufio.Reader, key []byte, client, self string) error {
	head := make([]byte, len(raftAuthMagic)+nonceLen)
	if _, err := io.ReadFull(r, head[:len(raftAuthMagic)]); err != nil {
		return fmt.Errorf("%w (%v)", errNoProof, err)
	}
	if string(head[:len(raftAuthMagic)]) != raftAuthMagic {
		return errNoProof
	}
	if _, err := io.ReadFull(r, head[len(raftAuthMagic):]); err != nil {
		return fmt.Errorf("%w (%v)", errNoProof, err)
	}
	cnonce := head[len(raftAuthMagic):]
	snonce := make([]byte, nonceLen)
	if _, err := rand.Read(snonce); err != nil {
		return err
	}
	hello, err := preamble(self)
	if err != nil {
		return err
	}
	// The same framing as the preamble: magic, one length byte, the id.
	hello = append(append([]byte(raftAuthMagic), hello[len(preambleMagic):]...), snonce...)
	if _, err := w.Write(hello); err != nil {
		return err
	}
	got := make([]byte, macLen)
	if _, err := io.ReadFull(r, got); err != nil {
		return fmt.Errorf("%w: the peer did not answer (%v)", errBadProof, err)
	}
	if !hmac.Equal(got, raftAuthMAC(key, "client", cnonce, snonce, client, self)) {
		return errBadProof
	}
	_, err = w.Write(raftAuthMAC(key, "server", cnonce, snonce, client, self))
	return err
}

// After the preamble, a heureka dialer names its cluster (identity.go):
//
//	dialer   → acceptor  "HRCI" len(id) cluster-id   (len 0: not known yet)
//	acceptor → dialer    "HRCI" len(id) cluster-id verdict
//
// verdict is 0 when the acceptor takes the connection, 1 when it refuses it
// for naming another cluster (it closes the connection then). Both ends
// check, so each can log both identities. A connection without the frame
// (an older or a foreign client) goes on to the secret proof, or, without
// a secret, to Raft as before.
const clusterMagic = "HRCI"

// identityFrame is the frame naming cluster id.
func identityFrame(id string) []byte {
	if len(id) > 255 {
		id = id[:255]
	}
	return append(append([]byte(clusterMagic), byte(len(id))), id...)
}

// readIdentity reads a frame naming a cluster; framed is false, and
// nothing is consumed, when the next bytes are no such frame.
func readIdentity(r *bufio.Reader) (id string, framed bool, err error) {
	head, err := r.Peek(len(clusterMagic) + 1)
	if err != nil {
		return "", false, fmt.Errorf("read cluster identity: %w", err)
	}
	if string(head[:len(clusterMagic)]) != clusterMagic {
		return "", false, nil
	}
	n := int(head[len(clusterMagic)])
	if _, err := r.Discard(len(head)); err != nil {
		return "", true, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", true, fmt.Errorf("read cluster identity: %w", err)
	}
	return string(b), true, nil
}

// readIdentityReply reads the acceptor's answer to the dialer's frame: its
// cluster and whether it refused the connection.
func readIdentityReply(r *bufio.Reader) (id string, refused bool, err error) {
	id, framed, err := readIdentity(r)
	if err != nil {
		return "", false, err
	}
	if !framed {
		return "", false, errors.New("the peer does not answer the cluster identity frame")
	}
	v, err := r.ReadByte()
	if err != nil {
		return id, false, fmt.Errorf("read cluster identity verdict: %w", err)
	}
	return id, v != 0, nil
}
