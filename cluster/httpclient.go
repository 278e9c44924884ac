package cluster

import "crypto/tls"

// The node's side of node-to-node HTTP that nodeapi does not hold: the
// scheme and TLS configuration its calls use.

// httpScheme is the scheme of node-to-node HTTP calls.
func (c *Config) httpScheme() string {
	if c.HTTPClientTLS != nil {
		return "https://"
	}
	return "http://"
}

// url is the address of path on the node at addr.
func (n *Node) url(addr, path string) string { return n.cfg.httpScheme() + addr + path }

// clientTLS returns a copy of the node-to-node TLS config, or nil.
func (c *Config) clientTLS() *tls.Config {
	if c.HTTPClientTLS == nil {
		return nil
	}
	return c.HTTPClientTLS.Clone()
}
