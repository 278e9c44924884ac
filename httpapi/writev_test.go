package httpapi

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

// A document of more slices than one writev takes, its first bytes read
// as net/http reads them for sniffing, arrives whole over a real TCP
// connection after the bytes held before it, and its slices (shared with
// other documents) are left as they were.
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
	lead := []byte("HTTP/1.1 200 OK\r\n\r\n")
	n, err := b.writeTo(c.(*net.TCPConn), &lead)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	received := <-got
	if !bytes.HasPrefix(received, lead) {
		t.Fatalf("the held bytes do not lead: %q", received[:min(len(received), len(lead))])
	}
	body := append(head, received[len(lead):]...)
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

// On a connection of Listener served with ConnContext, a gzip document
// goes out in one write, header and body: an application shorter than
// the 512 bytes net/http sniffs, one that fits net/http's 4 KiB buffer
// with its header, one of 8 KiB (two writes through net/http's buffers),
// one past vectorMin (two writes through its ReadFrom) and the full
// registry. Every answer on the one kept-alive connection is whole
// and the header held for one is never sent with another: HEAD and plain
// reads, and an error, come between them.
func TestServe_DocumentInOneWrite(t *testing.T) {
	f := fsm.New(0, nil)
	var idx uint64
	rng := rand.New(rand.NewPCG(3, 4))
	apps := []struct {
		name string
		n    int
	}{{"ONE", 1}, {"FEW", 8}, {"SOME", 30}, {"MANY", 300}}
	for _, a := range apps {
		for i := range a.n {
			md := map[string]string{}
			for k := range 12 {
				md[fmt.Sprintf("k%d", k)] = fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
			}
			if a.n == 1 {
				md = nil // a document under 512 bytes gzipped
			}
			in := &fsm.Instance{InstanceID: fmt.Sprintf("%s-%d", strings.ToLower(a.name), i), HostName: "h", App: a.name,
				IPAddr: "10.0.0.1", Status: fsm.StatusUp, OverriddenStatus: fsm.StatusUnknown, Port: 8080, PortEnabled: true,
				DataCenterInfo: fsm.DataCenterInfo{Name: "MyOwn"}, Metadata: fsm.MetadataOf(md), LastDirtyTimestamp: 1700000000000}
			applyCmd(t, f, &idx, fsm.CmdRegister, &fsm.RegisterBody{Instance: in})
		}
	}
	s, err := New(DefaultConfig(), &fakeCluster{fsm: f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var conns atomic.Int64
	ts := serveAsHeureka(t, s.Handler(), func(srv *http.Server) {
		srv.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		}
	})
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxConnsPerHost: 1}}
	get := func(method, path string, gz bool) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		req.Header.Set("Accept", "application/json")
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		return readAll(t, client, req)
	}
	sizes := map[string]int{}
	for range 2 {
		for _, path := range []string{"/eureka/apps/ONE", "/eureka/apps/FEW", "/eureka/apps/SOME", "/eureka/apps/MANY", "/eureka/apps"} {
			_, plain := get(http.MethodGet, path, false)
			before := socketWrites.Load()
			resp, z := get(http.MethodGet, path, true)
			if w := socketWrites.Load() - before; w != 1 {
				t.Errorf("%s (%d bytes gzipped): %d writes, want 1", path, len(z), w)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Length") != fmt.Sprint(len(z)) {
				t.Fatalf("%s: %d, length %q of %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Length"), len(z))
			}
			zr, err := gzip.NewReader(bytes.NewReader(z))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("%s: gzip gives %d bytes (%v), plain %d", path, len(got), err, len(plain))
			}
			sizes[path] = len(z)
			if resp, b := get(http.MethodHead, path, true); resp.StatusCode != 200 || len(b) != 0 ||
				resp.Header.Get("Content-Length") != fmt.Sprint(len(z)) {
				t.Fatalf("HEAD %s: %d, length %q, %d bytes of body", path, resp.StatusCode, resp.Header.Get("Content-Length"), len(b))
			}
			if resp, _ := get(http.MethodGet, "/eureka/apps/NONE", true); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("an unknown application: %d", resp.StatusCode)
			}
		}
	}
	if sizes["/eureka/apps/ONE"] >= 512 || sizes["/eureka/apps/FEW"] > 3<<10 ||
		sizes["/eureka/apps/SOME"] < 5<<10 || sizes["/eureka/apps/MANY"] < vectorMin {
		t.Fatalf("the documents are not of the sizes meant: %v", sizes)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want every read on one", n)
	}
}
