package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/nodeapi"
)

func hashOf(t testing.TB, pw string, cost int) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func testUsers(t testing.TB, cost int) *Users {
	t.Helper()
	file := "# comment\n\n" +
		"reader:read:" + hashOf(t, "r-pass", cost) + "\n" +
		"writer:write:" + hashOf(t, "w-pass", cost) + "\n" +
		"boss:admin:" + hashOf(t, "a-pass", cost) + "\n"
	u, err := ParseUsers(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestParseUsers_Errors(t *testing.T) {
	h := hashOf(t, "x", bcrypt.MinCost)
	for name, file := range map[string]string{
		"empty":      "# nobody\n",
		"no-role":    "alice:" + h + "\n",
		"bad-role":   "alice:root:" + h + "\n",
		"not-bcrypt": "alice:read:plaintext\n",
		"duplicate":  "alice:read:" + h + "\nalice:admin:" + h + "\n",
		"no-user":    ":read:" + h + "\n",
	} {
		if _, err := ParseUsers(strings.NewReader(file)); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func TestUsers_Authenticate(t *testing.T) {
	u := testUsers(t, bcrypt.MinCost)
	var mu sync.Mutex
	var calls []string
	orig := bcryptCompare
	t.Cleanup(func() { bcryptCompare = orig })
	bcryptCompare = func(hash, pw []byte) error {
		cost, _ := bcrypt.Cost(hash)
		mu.Lock()
		calls = append(calls, string(rune('0'+cost)))
		mu.Unlock()
		return orig(hash, pw)
	}
	cases := []struct {
		user, pw string
		want     Role
	}{
		{"reader", "r-pass", RoleRead}, {"writer", "w-pass", RoleWrite}, {"boss", "a-pass", RoleAdmin},
		{"reader", "w-pass", RoleNone}, {"nobody", "r-pass", RoleNone}, {"", "", RoleNone}, {"boss", "", RoleNone},
	}
	for _, c := range cases {
		calls = nil
		if got := u.Authenticate(c.user, c.pw); got != c.want {
			t.Errorf("Authenticate(%q, %q) = %v, want %v", c.user, c.pw, got, c.want)
		}
		// Every first check, known user or not, runs exactly one bcrypt
		// comparison against a hash of the same cost.
		if len(calls) != 1 || calls[0] != string(rune('0'+bcrypt.MinCost)) {
			t.Errorf("Authenticate(%q, %q): bcrypt calls %q, want one", c.user, c.pw, calls)
		}
	}
	// Correct credentials are remembered; wrong ones never are.
	calls = nil
	u.Authenticate("reader", "r-pass")
	u.Authenticate("nobody", "r-pass")
	u.Authenticate("nobody", "r-pass")
	if len(calls) != 2 {
		t.Errorf("bcrypt calls for a remembered login and two unknown-user checks: %d, want 2", len(calls))
	}
}

// TestUsers_DummyHashCost: the dummy hash an unknown user is checked
// against has the highest cost in the file, so the unknown-user path is
// never cheaper than a real one.
func TestUsers_DummyHashCost(t *testing.T) {
	file := "a:read:" + hashOf(t, "x", bcrypt.MinCost) + "\nb:read:" + hashOf(t, "y", 11) + "\n"
	u, err := ParseUsers(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := bcrypt.Cost(u.dummy); c != 11 {
		t.Fatalf("dummy cost %d, want 11", c)
	}
}

// TestUsers_UnknownUserCostsAsMuchAsWrongPassword: an unknown user and a
// wrong password each cost exactly one bcrypt comparison against a hash of
// the same cost, so neither answer nor time tells them apart. (Counting the
// work rather than timing it keeps the test exact on a loaded machine.)
func TestUsers_UnknownUserCostsAsMuchAsWrongPassword(t *testing.T) {
	u := testUsers(t, 8)
	var costs []int
	orig := bcryptCompare
	t.Cleanup(func() { bcryptCompare = orig })
	bcryptCompare = func(hash, pw []byte) error {
		c, err := bcrypt.Cost(hash)
		if err != nil {
			t.Fatalf("compare against a malformed hash: %v", err)
		}
		costs = append(costs, c)
		return orig(hash, pw)
	}
	for _, name := range []string{"nobody", "reader"} {
		costs = costs[:0]
		if u.Authenticate(name, "guess") != RoleNone {
			t.Fatalf("%s: authenticated with a wrong password", name)
		}
		if len(costs) != 1 || costs[0] != 8 {
			t.Fatalf("%s: bcrypt comparisons at costs %v, want one at cost 8", name, costs)
		}
	}
}

func TestRequiredRole(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         Role
	}{
		{"GET", "/eureka/apps", RoleRead}, {"GET", "/eureka/v2/apps/X/1", RoleRead}, {"HEAD", "/eureka/apps", RoleRead},
		{"POST", "/eureka/apps/X", RoleWrite}, {"PUT", "/eureka/apps/X/1", RoleWrite}, {"DELETE", "/eureka/apps/X/1", RoleWrite},
		{"PUT", "/eureka/apps/X/1/status", RoleWrite}, {"PUT", "/eureka/apps/X/1/metadata", RoleWrite},
		{"GET", "/metrics", RoleRead}, {"GET", "/", RoleRead},
		{"GET", "/v1/status", RoleRead}, {"GET", "/v1/members", RoleRead}, {"GET", "/v1/mode", RoleRead},
		{"POST", "/v1/members", RoleAdmin}, {"DELETE", "/v1/members/n2", RoleAdmin}, {"PUT", "/v1/mode", RoleAdmin},
		{"GET", "/v1/snapshot", RoleAdmin}, {"POST", "/v1/snapshot", RoleAdmin}, {"GET", "/debug/pprof/", RoleAdmin},
		{"POST", "/anything", RoleAdmin},
	} {
		if got := requiredRole(c.method, c.path); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

// memberCluster is a fakeCluster that records joins and serves a fake
// internal endpoint.
type memberCluster struct {
	*fakeCluster
	joins []string
}

func (m *memberCluster) Join(_ context.Context, mem fsm.Member) error {
	m.joins = append(m.joins, mem.ID)
	return nil
}
func (m *memberCluster) InternalHandler(func(error) int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) })
}

func newAuthServer(t *testing.T, users *Users, secret string) (*httptest.Server, *memberCluster) {
	t.Helper()
	mc := &memberCluster{fakeCluster: &fakeCluster{fsm: fsm.New(0, nil)}}
	cfg := DefaultConfig()
	cfg.Cache.UseReadOnly = false
	cfg.Users = users
	cfg.ClusterSecret = secret
	ts, _ := startTestServer(t, cfg, mc, nil)
	return ts, mc
}

func withUser(url, user, pw string) string {
	return strings.Replace(url, "http://", "http://"+user+":"+pw+"@", 1)
}

func TestAuth_Roles(t *testing.T) {
	ts, mc := newAuthServer(t, testUsers(t, bcrypt.MinCost), "s3cret-s3cret-s3cret")
	reg := "/eureka/apps/svc"
	body := instanceJSON("svc", "i-1")
	js := "application/json"

	// Missing, unknown and wrong credentials: 401, same body, a challenge.
	var bodies []string
	for _, u := range []string{ts.URL, withUser(ts.URL, "nobody", "w-pass"), withUser(ts.URL, "writer", "nope")} {
		code, b, hdr := do(t, "POST", u+reg, js, body)
		if code != 401 || hdr.Get("WWW-Authenticate") != `Basic realm="heureka"` {
			t.Fatalf("POST %s: %d %s %v", u, code, b, hdr)
		}
		bodies = append(bodies, b)
	}
	if bodies[0] != bodies[1] || bodies[1] != bodies[2] {
		t.Fatalf("401 bodies differ: %q", bodies)
	}
	for _, path := range []string{"/eureka/apps", "/metrics", "/", "/v1/status"} {
		if code, b, _ := do(t, "GET", ts.URL+path, "", ""); code != 401 {
			t.Errorf("anonymous GET %s: %d %s", path, code, b)
		}
	}

	reader, writer, admin := withUser(ts.URL, "reader", "r-pass"), withUser(ts.URL, "writer", "w-pass"), withUser(ts.URL, "boss", "a-pass")
	if code, b, _ := do(t, "POST", reader+reg, js, body); code != 403 || !strings.Contains(b, "needs write") {
		t.Fatalf("reader register: %d %s", code, b)
	}
	for _, path := range []string{"/eureka/apps", "/metrics", "/", "/v1/status", "/v1/members", "/v1/mode"} {
		if code, b, _ := do(t, "GET", reader+path, "", ""); code != 200 {
			t.Errorf("reader GET %s: %d %s", path, code, b)
		}
	}
	if code, b, _ := do(t, "POST", writer+reg, js, body); code != 204 {
		t.Fatalf("writer register: %d %s", code, b)
	}
	if code, b, _ := do(t, "PUT", writer+"/eureka/apps/svc/i-1", "", ""); code != 200 {
		t.Fatalf("writer renew: %d %s", code, b)
	}
	join := `{"id":"n9","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`
	for _, req := range [][3]string{{"POST", "/v1/members", join}, {"DELETE", "/v1/members/n1", ""}, {"PUT", "/v1/mode?mode=cp", ""}, {"GET", "/v1/snapshot", ""}} {
		if code, b, _ := do(t, req[0], writer+req[1], js, req[2]); code != 403 {
			t.Errorf("writer %s %s: %d %s", req[0], req[1], code, b)
		}
	}
	if len(mc.joins) != 0 {
		t.Fatalf("joins recorded: %v", mc.joins)
	}
	if code, b, _ := do(t, "PUT", admin+"/v1/mode?mode=cp", "", ""); code != 200 {
		t.Fatalf("admin PUT mode: %d %s", code, b)
	}
	if code, b, _ := do(t, "POST", admin+"/v1/members", js, join); code != 200 {
		t.Fatalf("admin join: %d %s", code, b)
	}
	// A join with the cluster secret and no user; a wrong secret falls
	// back to basic auth and is refused.
	if code, b, _ := do(t, "POST", ts.URL+"/v1/members", js, join, nodeapi.SecretHeader, "s3cret-s3cret-s3cret"); code != 200 {
		t.Fatalf("join with secret: %d %s", code, b)
	}
	if code, b, _ := do(t, "POST", ts.URL+"/v1/members", js, join, nodeapi.SecretHeader, "wrong"); code != 401 {
		t.Fatalf("join with wrong secret: %d %s", code, b)
	}
	if len(mc.joins) != 2 {
		t.Fatalf("joins: %v", mc.joins)
	}
	// Internal endpoints are not behind basic auth (the cluster's handler
	// checks the secret).
	if code, _, _ := do(t, "POST", ts.URL+nodeapi.Prefix+"apply", "", ""); code != 299 {
		t.Fatalf("internal endpoint: %d", code)
	}
}

func TestAuth_InternalOffWithoutSecret(t *testing.T) {
	ts, _ := newAuthServer(t, testUsers(t, bcrypt.MinCost), "")
	for _, u := range []string{ts.URL, withUser(ts.URL, "boss", "a-pass")} {
		if code, b, _ := do(t, "POST", u+nodeapi.Prefix+"apply", "", ""); code != 403 {
			t.Fatalf("internal endpoint with auth and no secret: %d %s", code, b)
		}
	}
}

func TestAuth_SecretOnlyGuardsJoin(t *testing.T) {
	ts, mc := newAuthServer(t, nil, "s3cret-s3cret-s3cret")
	join := `{"id":"n9","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`
	if code, b, _ := do(t, "POST", ts.URL+"/v1/members", "application/json", join); code != 401 {
		t.Fatalf("join without secret: %d %s", code, b)
	}
	if code, b, _ := do(t, "POST", ts.URL+"/v1/members", "application/json", join, nodeapi.SecretHeader, "nope"); code != 403 {
		t.Fatalf("join with wrong secret: %d %s", code, b)
	}
	if code, b, _ := do(t, "POST", ts.URL+"/v1/members", "application/json", join, nodeapi.SecretHeader, "s3cret-s3cret-s3cret"); code != 200 {
		t.Fatalf("join with secret: %d %s", code, b)
	}
	if len(mc.joins) != 1 {
		t.Fatalf("joins: %v", mc.joins)
	}
	// Everything else stays open without an auth file.
	if code, b, _ := do(t, "POST", ts.URL+"/eureka/apps/svc", "application/json", instanceJSON("svc", "i-1")); code != 204 {
		t.Fatalf("register: %d %s", code, b)
	}
}
