// Package faultproxy is a fault-injecting TCP proxy for the Raft links
// between heureka nodes, used by `heureka lab` and the partition tests.
// Each node's advertised Raft address is a proxy front; the proxy learns
// which node dialled from the connection's preamble (see cluster's
// WritePreamble) and drops, or passes, each directed link as told.
//
// It imports cluster (for the preamble) only; it must not import httpapi
// or the tool packages that use it.
package faultproxy

import (
	"bufio"
	"io"
	"net"
	"sync"
	"time"

	"github.com/heureka-registry/heureka/cluster"
)

// Proxy fronts the Raft listeners of a set of nodes.
type Proxy struct {
	mu      sync.Mutex
	fronts  map[string]net.Listener // node id -> front listener
	blocked map[link]bool
	open    map[*pipe]struct{}
	wg      sync.WaitGroup
	closed  bool
}

// link is a directed connection from one node to another.
type link struct{ from, to string }

type pipe struct {
	l    link
	a, b net.Conn
}

// New returns an empty proxy.
func New() *Proxy {
	return &Proxy{fronts: map[string]net.Listener{}, blocked: map[link]bool{}, open: map[*pipe]struct{}{}}
}

// Front starts a front for node id forwarding to its real Raft address and
// returns the front's address (on 127.0.0.1), which the node advertises.
func (p *Proxy) Front(id, realAddr string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.fronts[id] = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go p.serve(id, realAddr, ln)
	return ln.Addr().String(), nil
}

func (p *Proxy) serve(to, realAddr string, ln net.Listener) {
	defer p.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(conn, to, realAddr)
		}()
	}
}

func (p *Proxy) handle(conn net.Conn, to, realAddr string) {
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	from, err := cluster.ReadPreamble(br)
	if err != nil {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	l := link{from, to}
	if p.isBlocked(l) {
		conn.Close()
		return
	}
	up, err := net.DialTimeout("tcp", realAddr, 2*time.Second)
	if err != nil {
		conn.Close()
		return
	}
	if err := cluster.WritePreamble(up, from); err != nil {
		conn.Close()
		up.Close()
		return
	}
	pp := &pipe{l: l, a: conn, b: up}
	p.mu.Lock()
	if p.closed || p.blocked[l] {
		p.mu.Unlock()
		conn.Close()
		up.Close()
		return
	}
	p.open[pp] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
	conn.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.open, pp)
	p.mu.Unlock()
}

func (p *Proxy) isBlocked(l link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked[l]
}

// Cut drops both directions between a and b, including open connections.
func (p *Proxy) Cut(a, b string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked[link{a, b}] = true
	p.blocked[link{b, a}] = true
	for pp := range p.open {
		if p.blocked[pp.l] {
			pp.a.Close()
			pp.b.Close()
		}
	}
}

// Isolate cuts node id off from every other node the proxy fronts.
func (p *Proxy) Isolate(id string) {
	for _, other := range p.nodes() {
		if other != id {
			p.Cut(id, other)
		}
	}
}

// Heal restores every link.
func (p *Proxy) Heal() {
	p.mu.Lock()
	clear(p.blocked)
	p.mu.Unlock()
}

func (p *Proxy) nodes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.fronts))
	for id := range p.fronts {
		out = append(out, id)
	}
	return out
}

// Close stops every front and connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for _, ln := range p.fronts {
		ln.Close()
	}
	for pp := range p.open {
		pp.a.Close()
		pp.b.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
