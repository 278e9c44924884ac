package httpapi

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"golang.org/x/crypto/bcrypt"

	"github.com/heureka-registry/heureka/nodeapi"
)

// Role is what an authenticated user may do; each role includes the ones
// below it.
type Role int

// Roles, weakest first.
const (
	RoleNone  Role = iota
	RoleRead       // fetch the registry, status, members, mode, metrics, dashboard
	RoleWrite      // register, renew, cancel, status overrides, metadata
	RoleAdmin      // members, mode changes, snapshots, pprof
)

func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// ParseRole parses "read", "write" or "admin".
func ParseRole(s string) (Role, error) {
	switch s {
	case "read":
		return RoleRead, nil
	case "write":
		return RoleWrite, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("role %q: want read, write or admin", s)
}

type user struct {
	role Role
	hash []byte
}

// Users is the set of accounts HTTP basic auth checks against. Passwords
// are bcrypt hashes; a check always runs exactly one bcrypt comparison (for
// an unknown user, against a dummy hash of the same cost), so an unknown
// user and a wrong password cannot be told apart by answer or timing.
type Users struct {
	users map[string]user
	dummy []byte

	// Successful checks are remembered under an HMAC of user and password
	// with a per-process random key, so that a client sending the same
	// credentials on every request does not pay bcrypt each time. Only
	// correct credentials are remembered, so a miss costs the same for an
	// unknown user and a wrong password.
	key     []byte
	mu      sync.Mutex
	ok      map[[32]byte]Role
	compare chan struct{} // bounds concurrent bcrypt comparisons
}

// bcryptCompare is bcrypt.CompareHashAndPassword; tests count its calls.
var bcryptCompare = bcrypt.CompareHashAndPassword

// maxRememberedLogins bounds the success cache; it is cleared when full.
const maxRememberedLogins = 4096

// ParseUsers reads "user:role:bcrypt-hash" lines; blank lines and lines
// starting with '#' are ignored.
func ParseUsers(r io.Reader) (*Users, error) {
	u := &Users{users: map[string]user{}, ok: map[[32]byte]Role{},
		compare: make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))}
	sc := bufio.NewScanner(r)
	line := 0
	maxCost := bcrypt.MinCost
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, rest, ok1 := strings.Cut(text, ":")
		roleText, hash, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || name == "" || hash == "" {
			return nil, fmt.Errorf("line %d: want user:role:bcrypt-hash", line)
		}
		role, err := ParseRole(roleText)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			return nil, fmt.Errorf("line %d: user %q: not a bcrypt hash (make one with `heureka auth hash`): %v", line, name, err)
		}
		if _, dup := u.users[name]; dup {
			return nil, fmt.Errorf("line %d: user %q listed twice", line, name)
		}
		maxCost = max(maxCost, cost)
		u.users[name] = user{role: role, hash: []byte(hash)}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(u.users) == 0 {
		return nil, errors.New("no users")
	}
	u.key = make([]byte, 32)
	if _, err := rand.Read(u.key); err != nil {
		return nil, err
	}
	var err error
	if u.dummy, err = bcrypt.GenerateFromPassword(u.key[:16], maxCost); err != nil {
		return nil, err
	}
	return u, nil
}

// LoadUsers reads a users file (see ParseUsers).
func LoadUsers(path string) (*Users, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	u, err := ParseUsers(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// Authenticate returns the user's role, or RoleNone when the user is
// unknown or the password wrong.
func (u *Users) Authenticate(name, password string) Role {
	mac := hmac.New(sha256.New, u.key)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	mac.Write(n[:]) // length-prefixed: no two (name, password) pairs collide
	mac.Write([]byte(name))
	mac.Write([]byte(password))
	var sum [32]byte
	mac.Sum(sum[:0])
	u.mu.Lock()
	role, hit := u.ok[sum]
	u.mu.Unlock()
	if hit {
		return role
	}
	rec, known := u.users[name]
	hash := rec.hash
	if !known {
		hash = u.dummy
	}
	u.compare <- struct{}{}
	err := bcryptCompare(hash, []byte(password))
	<-u.compare
	if err != nil || !known {
		return RoleNone
	}
	u.mu.Lock()
	if len(u.ok) >= maxRememberedLogins {
		clear(u.ok)
	}
	u.ok[sum] = rec.role
	u.mu.Unlock()
	return rec.role
}

// requiredRole is the role a request needs.
func requiredRole(method, path string) Role {
	read := method == http.MethodGet || method == http.MethodHead
	switch {
	case path == "/eureka" || strings.HasPrefix(path, "/eureka/"):
		if read {
			return RoleRead
		}
		return RoleWrite
	case path == "/v1/status", path == "/v1/members", path == "/v1/mode":
		if read {
			return RoleRead
		}
		return RoleAdmin
	case strings.HasPrefix(path, "/v1/"), strings.HasPrefix(path, "/debug/"):
		return RoleAdmin
	case read:
		return RoleRead // the dashboard, /metrics, unknown paths
	}
	return RoleAdmin
}

// authBody is the one answer to missing, unknown and wrong credentials.
var authBody = gin.H{"error": "authentication required"}

// controlCall reports whether a request changes the cluster through the
// operator API: a join or removal, a mode change, a snapshot restore.
func controlCall(method, path string) bool {
	return strings.HasPrefix(path, "/v1/") && method != http.MethodGet && method != http.MethodHead
}

// fromLoopback reports whether the request's TCP peer is on this host. It
// reads the connection's address, never a forwarding header, which any
// client can set.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openWithoutCredentials reports whether a call that would need the
// cluster secret may go without one on a node that has none: from this
// host, whose processes can reach the unprotected Raft port anyway, or
// from anywhere with --insecure-cluster.
func (s *Server) openWithoutCredentials(r *http.Request) bool {
	return s.cfg.InsecureCluster || fromLoopback(r)
}

// noSecretHint is the one-line fix in refusals on a node without a secret.
const noSecretHint = "set the same --cluster-secret-file on every node (or --auth-file for operators), or --insecure-cluster to accept any host"

// authenticate is the middleware that guards the control plane and, with
// Config.Users, everything else (docs/security.md, "Who may call what").
// Internal node-to-node endpoints are left to the cluster secret
// (nodeapi checks it); a control call (controlCall) is accepted with the
// cluster secret alone or from an admin user; on a node without either,
// only from this host unless Config.InsecureCluster.
func (s *Server) authenticate(c *gin.Context) {
	r := c.Request
	path := r.URL.Path
	if strings.HasPrefix(path, nodeapi.Prefix) {
		switch {
		case s.cfg.ClusterSecret != "":
			c.Next() // cluster.InternalHandler checks the secret
		case s.cfg.Users != nil:
			c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": "internal endpoints are off: auth is on and no cluster secret is set"})
		case s.openWithoutCredentials(r):
			c.Next()
		default:
			c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": "internal endpoints answer only this host: no cluster secret is set; " + noSecretHint})
		}
		return
	}
	if controlCall(r.Method, path) {
		secret := s.cfg.ClusterSecret
		switch {
		case secret != "" && nodeapi.SecretMatches(r, secret):
			c.Next()
			return
		case s.cfg.Users != nil:
			// an admin user, checked below
		case secret != "":
			status, msg := http.StatusForbidden, "wrong cluster secret"
			if r.Header.Get(nodeapi.SecretHeader) == "" {
				status, msg = http.StatusUnauthorized, r.Method+" "+path+" needs the cluster secret (the CLI sends $HEUREKA_CLUSTER_SECRET or --cluster-secret-file)"
			}
			s.refusals.CallRefused(s.log, r, msg)
			c.AbortWithStatusJSON(status, gin.H{"error": msg})
			return
		case s.openWithoutCredentials(r):
			c.Next()
			return
		default:
			c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": r.Method + " " + path + " answers only this host: no cluster secret is set; " + noSecretHint})
			return
		}
	}
	if s.cfg.Users == nil {
		c.Next()
		return
	}
	need := requiredRole(r.Method, path)
	name, password, given := r.BasicAuth()
	role := RoleNone
	if given {
		role = s.cfg.Users.Authenticate(name, password)
	}
	if role == RoleNone {
		c.Header("WWW-Authenticate", `Basic realm="heureka"`)
		c.AbortWithStatusJSON(http.StatusUnauthorized, authBody)
		return
	}
	if role < need {
		c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": fmt.Sprintf("user %q has role %s; %s %s needs %s", name, role, r.Method, path, need)})
		return
	}
	c.Next()
}
