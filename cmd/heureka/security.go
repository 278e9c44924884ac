package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/heureka-registry/heureka/cluster"
	"github.com/heureka-registry/heureka/httpapi"
)

// minSecretLen is the shortest cluster secret accepted.
const minSecretLen = 16

// tlsSetup is the TLS configuration derived from the --tls-* flags.
type tlsSetup struct {
	server *tls.Config // the HTTP listener
	client *tls.Config // node-to-node HTTPS calls
	raft   *tls.Config // the Raft transport (--raft-tls), both directions
	peers  *x509.CertPool
}

// checkSecurity validates the security flags and loads what they name.
func (c *serveConfig) checkSecurity() error {
	c.users, c.secret, c.tls = nil, "", nil
	if c.authFile != "" {
		u, err := httpapi.LoadUsers(c.authFile)
		if err != nil {
			return fmt.Errorf("--auth-file: %v", err)
		}
		c.users = u
	}
	secret, err := readClusterSecret(c.clusterSecret, c.clusterSecretFile)
	if err != nil {
		return err
	}
	c.secret = secret
	members, _ := cluster.ParseInitialCluster(c.initialCluster)
	multiNode := c.join != "" || len(members) > 1
	if c.users != nil && c.secret == "" && multiNode {
		return errAuthNeedsSecret
	}
	// Without a secret, the Raft port and the internal endpoints take
	// anyone who can reach them: a cluster spread over hosts must not run
	// like that by accident.
	if multiNode {
		if err := c.checkOpenCluster("a multi-node cluster"); err != nil {
			return err
		}
	}
	t, err := loadTLS(c.tlsCert, c.tlsKey, c.tlsClientCA, c.tlsCA)
	if err != nil {
		return err
	}
	if c.raftTLS {
		if t == nil {
			return errors.New("--raft-tls needs --tls-cert and --tls-key")
		}
		if t.peers == nil {
			return errors.New("--raft-tls needs a CA for peers' certificates: --tls-ca or --tls-client-ca")
		}
		t.raft = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: t.server.Certificates,
			RootCAs: t.peers, ClientCAs: t.peers, ClientAuth: tls.RequireAndVerifyClientCert}
	}
	c.tls = t
	return nil
}

// checkOpenCluster refuses what, a cluster of more than one node, when it
// would listen beyond loopback without a cluster secret and without
// --insecure-cluster: its Raft port and internal endpoints would take
// anyone who reaches them.
// errAuthNeedsSecret: with basic auth on, node-to-node calls pass only
// with the cluster secret.
var errAuthNeedsSecret = errors.New("--auth-file on a multi-node cluster needs --cluster-secret (or --cluster-secret-file) for node-to-node calls")

func (c *serveConfig) checkOpenCluster(what string) error {
	if c.secret != "" || c.api.InsecureCluster {
		return nil
	}
	for _, f := range []struct{ flag, addr string }{{"--http-addr", c.httpAddr}, {"--raft-addr", c.raftAddr}} {
		if beyondLoopback(f.addr) {
			return fmt.Errorf("%s, listening beyond loopback (%s %s), needs a cluster secret: "+
				"give every node the same --cluster-secret-file (heureka secret init FILE makes one), or pass --insecure-cluster", what, f.flag, f.addr)
		}
	}
	return nil
}

// beyondLoopback reports whether a listen address may take connections
// from other hosts: anything but a loopback IP or "localhost" (all
// interfaces and host names included).
func beyondLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// readClusterSecret returns the cluster secret given directly or in a file
// (--cluster-secret, --cluster-secret-file, or their HEUREKA_ variables):
// serve and the operator CLI read it alike. Empty: none given.
func readClusterSecret(secret, file string) (string, error) {
	switch {
	case secret != "" && file != "":
		return "", errors.New("--cluster-secret and --cluster-secret-file exclude each other")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--cluster-secret-file: %v", err)
		}
		secret = strings.TrimSpace(string(b))
		if secret == "" {
			return "", fmt.Errorf("--cluster-secret-file %s is empty", file)
		}
	}
	if secret != "" && len(secret) < minSecretLen {
		return "", fmt.Errorf("the cluster secret must be at least %d characters", minSecretLen)
	}
	if i := strings.IndexFunc(secret, func(r rune) bool { return r < '!' || r > '~' }); i >= 0 {
		// It travels in a header: Go's client refuses to send one with a
		// control character, and every node-to-node call would fail.
		return "", fmt.Errorf("the cluster secret holds a space or a character other than printable ASCII (at byte %d)", i)
	}
	return secret, nil
}

// loadTLS builds the server and client TLS configs, or nil when no
// certificate is given.
func loadTLS(certFile, keyFile, clientCAFile, caFile string) (*tlsSetup, error) {
	if certFile == "" && keyFile == "" {
		if clientCAFile != "" || caFile != "" {
			return nil, errors.New("--tls-client-ca and --tls-ca need --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %v", err)
	}
	server := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	client := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %v", err)
		}
		server.ClientCAs = pool
		server.ClientAuth = tls.RequireAndVerifyClientCert
		client.RootCAs = pool
	}
	peers := client.RootCAs
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %v", err)
		}
		client.RootCAs = pool
		peers = pool
	}
	return &tlsSetup{server: server, client: client, peers: peers}, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

const authUsage = `Usage: heureka auth hash [--cost N] < password

Prints a bcrypt hash of the password read from stdin (its first line, at
most 72 bytes: bcrypt's limit), for an --auth-file line: user:role:hash with
role read, write or admin.
`

// maxPasswordBytes is bcrypt's limit on a password's length.
const maxPasswordBytes = 72

// authCmd is `heureka auth hash`.
func authCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "hash" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, authUsage)
			return 0
		}
		fmt.Fprint(stderr, authUsage)
		return 2
	}
	fs := newFlagSet("auth hash")
	cost := fs.Int("cost", bcrypt.DefaultCost, "bcrypt cost (4..31)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, authUsage)
			return 0
		}
		fmt.Fprintf(stderr, "heureka auth hash: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 || *cost < bcrypt.MinCost || *cost > bcrypt.MaxCost {
		fmt.Fprint(stderr, authUsage)
		return 2
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "heureka auth hash: read password: %v\n", err)
		return 1
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		fmt.Fprintln(stderr, "heureka auth hash: empty password on stdin")
		return 2
	}
	// bcrypt reads at most 72 bytes; it refuses a longer password rather
	// than hash a prefix of it, and so does this command, as bad input.
	if len(password) > maxPasswordBytes {
		fmt.Fprintf(stderr, "heureka auth hash: the password is %d bytes; bcrypt takes at most %d bytes\n", len(password), maxPasswordBytes)
		return 2
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), *cost)
	if err != nil {
		fmt.Fprintf(stderr, "heureka auth hash: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, string(hash))
	return 0
}

// opsTLS is the operator CLI's TLS client config: a CA to verify the node
// (system roots when empty) and an optional client certificate.
func opsTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %v", err)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, errors.New("--tls-cert and --tls-key go together")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
