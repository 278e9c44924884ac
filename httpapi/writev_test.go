package httpapi

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
)

// A document of more slices than one writev takes, its first bytes read
// as net/http reads them for sniffing, arrives whole over a real TCP
// connection, and its slices (shared with other documents) are left as
// they were.
func TestVecBody_WindowsAfterARead(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var parts [][]byte
	var want []byte
	for i := range 3*vecWindow + 17 {
		p := make([]byte, rng.IntN(40))
		for j := range p {
			p[j] = byte(i + j)
		}
		parts = append(parts, p)
		want = append(want, p...)
	}
	orig := make([][]byte, len(parts))
	for i, p := range parts {
		orig[i] = slices.Clone(p)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := &vecBody{parts: parts}
	head := make([]byte, 0, 100)
	for len(head) < 100 { // small reads across slice boundaries
		buf := make([]byte, 7)
		n, err := b.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		head = append(head, buf[:n]...)
	}
	n, err := b.writeTo(c.(*net.TCPConn))
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	body := append(head, <-got...)
	if !bytes.Equal(body, want) || n != int64(len(want)-len(head)) {
		t.Fatalf("received %d bytes (writeTo reported %d after %d read), want %d, equal %v",
			len(body), n, len(head), len(want), bytes.Equal(body, want))
	}
	for i := range parts {
		if !bytes.Equal(parts[i], orig[i]) {
			t.Fatalf("slice %d of the document changed", i)
		}
	}
	if n, err := b.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read after the end: %d %v, want EOF", n, err)
	}
}
