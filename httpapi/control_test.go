package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
)

// TestControlPlane: who may make control calls (join, remove, mode change,
// restore) and reach the internal endpoints, with and without a cluster
// secret and users, from this host and from another (docs/security.md,
// "Who may call what"). Reads stay open without users.
func TestControlPlane(t *testing.T) {
	const secret = "0123456789abcdef-secret"
	const local, remote = "127.0.0.1:50000", "203.0.113.7:50000"
	calls := []struct{ method, path, body string }{
		{"POST", "/v1/members", `{"id":"evil","raft_addr":"203.0.113.7:1","http_addr":"203.0.113.7:2"}`},
		{"DELETE", "/v1/members/n3", ""},
		{"PUT", "/v1/mode?mode=cp", ""},
		{"POST", "/v1/snapshot", "not a snapshot"},
		{"POST", "/internal/v1/apply", ""},
	}
	type want int
	const (
		open want = iota
		unauthorized
		forbidden
	)
	users := testUsers(t, bcrypt.MinCost)
	cases := []struct {
		name     string
		adjust   func(*Config)
		from     string
		header   func(r *http.Request)
		internal want // for /internal/v1/
		control  want
	}{
		{"defaults, local", nil, local, nil, open, open},
		{"defaults, other host", nil, remote, nil, forbidden, forbidden},
		{"insecure-cluster, other host", func(c *Config) { c.InsecureCluster = true }, remote, nil, open, open},
		// With a secret, the internal endpoints' check is nodeapi's
		// (nodeapi/secret_test.go): httpapi passes them on.
		{"secret, local, none sent", func(c *Config) { c.ClusterSecret = secret }, local, nil, open, unauthorized},
		{"secret, other host, wrong", func(c *Config) { c.ClusterSecret = secret }, remote,
			func(r *http.Request) { r.Header.Set(nodeapi.SecretHeader, "wrong-secret-0123456") }, open, forbidden},
		{"secret, other host, sent", func(c *Config) { c.ClusterSecret = secret }, remote,
			func(r *http.Request) { r.Header.Set(nodeapi.SecretHeader, secret) }, open, open},
		{"users, local, anonymous", func(c *Config) { c.Users = users }, local, nil, forbidden, unauthorized},
		{"users, other host, admin", func(c *Config) { c.Users = users }, remote,
			func(r *http.Request) { r.SetBasicAuth("boss", "a-pass") }, forbidden, open},
		{"users, writer", func(c *Config) { c.Users = users; c.ClusterSecret = secret }, remote,
			func(r *http.Request) { r.SetBasicAuth("writer", "w-pass") }, open, forbidden},
		{"users and secret, secret alone", func(c *Config) { c.Users = users; c.ClusterSecret = secret }, remote,
			func(r *http.Request) { r.Header.Set(nodeapi.SecretHeader, secret) }, open, open},
	}
	for _, tc := range cases {
		cfg := DefaultConfig()
		if tc.adjust != nil {
			tc.adjust(&cfg)
		}
		fc := &fakeCluster{fsm: fsm.New(0, nil)}
		_, s := startTestServer(t, cfg, fc, nil)
		for _, call := range calls {
			r := httptest.NewRequest(call.method, call.path, strings.NewReader(call.body))
			r.RemoteAddr = tc.from
			if call.body != "" && strings.HasPrefix(call.body, "{") {
				r.Header.Set("Content-Type", "application/json")
			}
			if tc.header != nil {
				tc.header(r)
			}
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, r)
			exp := tc.control
			if strings.HasPrefix(call.path, nodeapi.Prefix) {
				exp = tc.internal
			}
			got := open
			switch w.Code {
			case http.StatusUnauthorized:
				got = unauthorized
			case http.StatusForbidden:
				got = forbidden
			}
			if got != exp {
				t.Errorf("%s: %s %s answered %d %s", tc.name, call.method, call.path, w.Code, w.Body)
			}
		}
		// Reads stay open without users, from anywhere.
		if cfg.Users == nil {
			for _, path := range []string{"/v1/status", "/v1/members", "/v1/mode"} {
				r := httptest.NewRequest("GET", path, nil)
				r.RemoteAddr = remote
				w := httptest.NewRecorder()
				s.Handler().ServeHTTP(w, r)
				if w.Code == http.StatusUnauthorized || w.Code == http.StatusForbidden {
					t.Errorf("%s: GET %s from another host: %d", tc.name, path, w.Code)
				}
			}
		}
	}
}
