package e2e

// TLS (docs/security.md, "TLS"): the HTTP API over HTTPS with client certificates required
// (--tls-cert, --tls-key, --tls-client-ca); nodes forward to each other over
// HTTPS presenting their own certificate. Certificates are made here.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tlsCA is a test certificate authority.
type tlsCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var tlsSerial = big.NewInt(1)

func newTLSCA(t *testing.T, name string) *tlsCA {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, key := signTLS(t, tmpl, nil)
	cert, _ := x509.ParseCertificate(der)
	return &tlsCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// signTLS makes a key and a certificate from tmpl, valid from an hour ago
// for a day with the next serial, signed by ca (self-signed when nil).
func signTLS(t *testing.T, tmpl *x509.Certificate, ca *tlsCA) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tlsSerial.Add(tlsSerial, big.NewInt(1))
	tmpl.SerialNumber = new(big.Int).Set(tlsSerial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// issue makes a leaf certificate for 127.0.0.1 usable as server and client;
// it returns PEM certificate and key.
func (ca *tlsCA) issue(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	der, key := signTLS(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost"},
	}, ca)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// nodeFiles writes ca's certificate and, for each id, a certificate and key
// into dir; it returns the CA file and each id's [certificate, key] files.
func (ca *tlsCA) nodeFiles(t *testing.T, dir string, ids ...string) (string, map[string][2]string) {
	t.Helper()
	certs := map[string][2]string{}
	for _, id := range ids {
		c, k := ca.issue(t, id)
		certs[id] = [2]string{writeFile(t, dir, id+".pem", c), writeFile(t, dir, id+"-key.pem", k)}
	}
	return writeFile(t, dir, "ca.pem", ca.pem), certs
}

// clientConfig is a TLS client config trusting ca with a certificate from
// issuer (nil: no client certificate).
func (ca *tlsCA) clientConfig(t *testing.T, issuer *tlsCA) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if issuer != nil {
		c, k := issuer.issue(t, "client")
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		// Always present it, even when the server asks for another CA's
		// (Go's client would otherwise send none).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return cfg
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsGet sends GET url with a client using cfg.
func tlsGet(cfg *tls.Config, url string) (int, error) {
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestTLSThreeNodesMutual(t *testing.T) {
	ca := newTLSCA(t, "heureka-test-ca")
	dir := t.TempDir()
	caFile, certs := ca.nodeFiles(t, dir, "n1", "n2", "n3")
	client := ca.clientConfig(t, ca)
	c := StartCluster(t, 3, Options{
		ExtraArgs: append([]string{"--tls-client-ca", caFile}, edCacheArgs...),
		NodeArgs: func(id string) []string {
			return []string{"--tls-cert", certs[id][0], "--tls-key", certs[id][1]}
		},
		ClientTLS: client,
	})
	leader := c.WaitLeader(t, 15*time.Second)
	f := c.Followers(leader)[0]

	// A write through a follower is forwarded to the leader over HTTPS
	// (with the follower's certificate) and reaches every node.
	tcl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, TLSClientConfig: client}}
	req, _ := http.NewRequest("POST", f.URL("/eureka/apps/TLSAPP"), strings.NewReader(string(RegisterBody("TLSAPP", "tls-1", nil))))
	req.Header.Set("Content-Type", "application/json")
	resp, err := tcl.Do(req)
	if err != nil {
		t.Fatalf("register over HTTPS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("register over HTTPS via follower: %d", resp.StatusCode)
	}
	for _, nd := range c.Nodes {
		WaitFor(t, 10*time.Second, func() bool {
			code, err := tlsGet(client, nd.URL("/eureka/apps/TLSAPP/tls-1"))
			return err == nil && code == http.StatusOK
		}, "TLSAPP/tls-1 over HTTPS on "+nd.ID)
	}
	if st := f.Status(t); !st.Has("leases") {
		t.Errorf("follower could not fetch the leader's lease status over HTTPS: %v", st.Raw)
	}

	// Refused: plain HTTP, HTTPS without a client certificate, and with a
	// certificate from another CA.
	if code, err := tlsGet(nil, "http://"+f.HTTPAddr+"/v1/status"); err == nil && code == http.StatusOK {
		t.Errorf("plain HTTP answered %d", code)
	}
	if _, err := tlsGet(ca.clientConfig(t, nil), f.URL("/v1/status")); err == nil {
		t.Errorf("HTTPS without a client certificate was accepted")
	}
	other := newTLSCA(t, "other-ca")
	if _, err := tlsGet(ca.clientConfig(t, other), f.URL("/v1/status")); err == nil {
		t.Errorf("HTTPS with a certificate from another CA was accepted")
	}

	// The operator CLI over HTTPS with a client certificate.
	res := RunBinary(t, 15*time.Second, nil, "status", "--addr", f.HTTPAddr, "--tls-ca", caFile, "--tls-cert", certs["n1"][0], "--tls-key", certs["n1"][1])
	if res.ExitCode != 0 {
		t.Errorf("heureka status over HTTPS: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if res := RunBinary(t, 15*time.Second, nil, "status", "--addr", f.HTTPAddr, "--tls-ca", caFile); res.ExitCode != 1 {
		t.Errorf("heureka status over HTTPS without a client certificate: exit %d", res.ExitCode)
	}

	// A fourth node joins over HTTPS.
	n4c, n4k := ca.issue(t, "n4")
	c.opts.NodeArgs = func(id string) []string {
		if id == "n4" {
			return []string{"--tls-cert", writeFile(t, dir, "n4.pem", n4c), "--tls-key", writeFile(t, dir, "n4-key.pem", n4k)}
		}
		return []string{"--tls-cert", certs[id][0], "--tls-key", certs[id][1]}
	}
	n4 := c.StartNode(t, "n4", f.HTTPAddr)
	WaitFor(t, 20*time.Second, func() bool {
		code, err := tlsGet(client, n4.URL("/eureka/apps/TLSAPP/tls-1"))
		return err == nil && code == http.StatusOK
	}, "n4 joined over HTTPS and replicated TLSAPP/tls-1")
}

// TestTLSFlags: half a key pair or a CA without a certificate is a flag
// error (exit 2).
func TestTLSFlags(t *testing.T) {
	ca := newTLSCA(t, "ca")
	dir := t.TempDir()
	c, _ := ca.issue(t, "n1")
	cert := writeFile(t, dir, "c.pem", c)
	for _, args := range [][]string{
		{"--tls-cert", cert},
		{"--tls-client-ca", writeFile(t, dir, "ca.pem", ca.pem)},
		{"--tls-cert", cert, "--tls-key", writeFile(t, dir, "bad-key.pem", []byte("nope"))},
	} {
		full := append([]string{"serve", "--data-dir", t.TempDir(), "--http-addr", FreeAddr(t), "--raft-addr", FreeAddr(t)}, args...)
		if res := RunBinary(t, 20*time.Second, nil, full...); res.ExitCode != 2 {
			t.Errorf("%v: exit %d, stderr %q", args, res.ExitCode, res.Stderr)
		}
	}
}
