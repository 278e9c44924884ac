package nodeapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"

	"github.com/hashicorp/go-hclog"
)

// SecretHeader carries the cluster secret on every node-to-node HTTP call
// when the cluster has one.
const SecretHeader = "X-Heureka-Cluster-Secret"

// SecretMatches reports whether r carries the cluster secret; it compares
// in constant time (over digests, so that the length is not revealed
// either). An empty secret never matches.
func SecretMatches(r *http.Request, secret string) bool {
	if secret == "" {
		return false
	}
	got := r.Header.Get(SecretHeader)
	if got == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// WithSecret returns a round tripper that adds the cluster secret to every
// request it sends through base.
func WithSecret(base http.RoundTripper, secret string) http.RoundTripper {
	return &secretTransport{base: base, secret: secret}
}

type secretTransport struct {
	base   http.RoundTripper
	secret string
}

func (t *secretTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(SecretHeader, t.secret)
	return t.base.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base.
func (t *secretTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// requireSecret refuses, with 401 (missing) or 403 (wrong), every request
// that does not carry the cluster secret, and logs the refusals to log
// (rate-limited per remote host).
func requireSecret(secret string, log hclog.Logger, next http.Handler) http.Handler {
	refusals := NewRefusalLog(RefusalLogEvery)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if SecretMatches(r, secret) {
			next.ServeHTTP(w, r)
			return
		}
		status, msg := http.StatusForbidden, "wrong cluster secret"
		if r.Header.Get(SecretHeader) == "" {
			status, msg = http.StatusUnauthorized, "cluster secret required"
		}
		refusals.CallRefused(log, r, msg)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(Reply{Code: codeUnauthorized, Message: msg})
	})
}
