package launch

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/heureka-registry/heureka/opapi"
)

// Node is one `heureka serve` process (and its restarts) of a Cluster.
type Node struct {
	*Proc
	ID       string
	HTTPAddr string // 127.0.0.1:P
	RaftAddr string // 127.0.0.1:Q, the real one (not a proxy front)
	DataDir  string

	credentials string
	clientTLS   *tls.Config
	client      *http.Client // status polls; nil: statusClient
}

// statusClient is used for status polls: a paused or dying node must not
// hold a polling loop up for long, and no proxy may stand in between.
var statusClient = newStatusClient(nil)

func newStatusClient(cfg *tls.Config) *http.Client {
	return &http.Client{Timeout: 2 * time.Second,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, TLSClientConfig: cfg}}
}

// BaseURL is "http://<http addr>" ("https://" with Spec.ClientTLS, and with
// Spec.Credentials as user info).
func (nd *Node) BaseURL() string {
	scheme := "http://"
	if nd.clientTLS != nil {
		scheme = "https://"
	}
	if nd.credentials != "" {
		return scheme + nd.credentials + "@" + nd.HTTPAddr
	}
	return scheme + nd.HTTPAddr
}

// URL is BaseURL followed by path, e.g. nd.URL("/eureka/apps").
func (nd *Node) URL(path string) string { return nd.BaseURL() + path }

// Client is the HTTP client status polls use (with Spec.ClientTLS's
// configuration when set).
func (nd *Node) Client() *http.Client {
	if nd.client != nil {
		return nd.client
	}
	return statusClient
}

// Status fetches GET /v1/status and returns it decoded and raw.
func (nd *Node) Status(ctx context.Context) (opapi.Status, []byte, error) {
	return FetchStatus(ctx, nd.Client(), nd.BaseURL())
}

// FetchStatus fetches GET <base>/v1/status through client and returns the
// body decoded and raw.
func FetchStatus(ctx context.Context, client *http.Client, base string) (opapi.Status, []byte, error) {
	var st opapi.Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/status", nil)
	if err != nil {
		return st, nil, fmt.Errorf("GET /v1/status: %w", err)
	}
	code, body, _, err := Read(client, req)
	if err != nil {
		return st, nil, fmt.Errorf("GET /v1/status: %w", err)
	}
	if code != http.StatusOK {
		return st, body, fmt.Errorf("GET /v1/status: %d %s", code, body)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, body, fmt.Errorf("GET /v1/status: %v in %s", err, body)
	}
	return st, body, nil
}

// logTailLines is how much of a node's log a readiness failure carries.
const logTailLines = 80

// WaitReady waits until the node answers GET /v1/status. It fails if the
// process exits first (with its log's tail) or timeout passes.
func (nd *Node) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, _, err := nd.Status(context.Background())
		if err == nil {
			return nil
		}
		if !nd.Running() {
			return fmt.Errorf("%s exited with code %d before answering /v1/status; log tail:\n%s",
				nd.ID, nd.ExitCode(), nd.LogTail(logTailLines))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer /v1/status within %v: %w", nd.ID, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
