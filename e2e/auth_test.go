package e2e

// Authentication (docs/security.md, "What the tests show"): with --auth-file (and --cluster-secret) on a 3-node
// cluster, anonymous and wrong-password writes get 401, read users 403 on
// writes, write users cannot change membership; fargo and eureka-js-client
// work with credentials in the URL; the cluster still forms, forwards
// writes, renewals, linearizable reads and lease status, and admits a
// joining node only with the cluster secret.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hudl/fargo"
)

const (
	auSecret = "e2e-cluster-secret-0123456789"
	auAdmin  = "boss:admin-pw"
	auWriter = "writer:writer-pw"
	auReader = "reader:reader-pw"
)

// auHash runs `heureka auth hash` with password on stdin.
func auHash(t *testing.T, password string) string {
	t.Helper()
	cmd := exec.Command(Binary(t), "auth", "hash", "--cost", "6")
	cmd.Stdin = strings.NewReader(password + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("heureka auth hash: %v", err)
	}
	h := strings.TrimSpace(string(out))
	if !strings.HasPrefix(h, "$2a$06$") {
		t.Fatalf("heureka auth hash printed %q", h)
	}
	return h
}

// auFile writes an auth file with the three test users and returns its path.
func auFile(t *testing.T) string {
	t.Helper()
	var lines []string
	for _, u := range []struct{ cred, role string }{{auAdmin, "admin"}, {auWriter, "write"}, {auReader, "read"}} {
		name, pw, _ := strings.Cut(u.cred, ":")
		lines = append(lines, name+":"+u.role+":"+auHash(t, pw))
	}
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, []byte("# e2e users\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// auOptions starts nodes with auth and the cluster secret; the harness
// itself talks as the admin.
func auOptions(t *testing.T) Options {
	return Options{
		ExtraArgs:   append([]string{"--auth-file", auFile(t), "--cluster-secret", auSecret}, edCacheArgs...),
		Credentials: auAdmin,
	}
}

// auURL is nd's address with the given "user:password" (or none).
func auURL(nd *Node, cred, path string) string {
	if cred == "" {
		return "http://" + nd.HTTPAddr + path
	}
	return "http://" + cred + "@" + nd.HTTPAddr + path
}

func TestAuthThreeNodes(t *testing.T) {
	c := StartCluster(t, 3, auOptions(t))
	leader := c.WaitLeader(t, 15*time.Second)
	f := c.Followers(leader)[0]
	reg := "/eureka/apps/AUTHAPP"
	body := RegisterBody("AUTHAPP", "auth-1", nil)
	auWaitServing(t, c)

	// 401 for anonymous, unknown-user and wrong-password writes, with one
	// and the same answer.
	var answers []string
	for _, cred := range []string{"", "nobody:writer-pw", "writer:wrong"} {
		code, b, hdr := Do(t, "POST", auURL(f, cred, reg), body)
		if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != `Basic realm="heureka"` {
			t.Fatalf("POST as %q: %d %s (WWW-Authenticate %q)", cred, code, b, hdr.Get("WWW-Authenticate"))
		}
		answers = append(answers, string(b))
	}
	if answers[0] != answers[1] || answers[1] != answers[2] {
		t.Fatalf("401 answers differ: %q", answers)
	}
	for _, path := range []string{"/eureka/apps", "/v1/status", "/metrics", "/"} {
		if code, b, _ := Do(t, "GET", auURL(f, "", path), nil); code != http.StatusUnauthorized {
			t.Errorf("anonymous GET %s: %d %.100s", path, code, b)
		}
	}

	// read: reads yes, writes 403.
	if code, b, _ := Do(t, "POST", auURL(f, auReader, reg), body); code != http.StatusForbidden {
		t.Fatalf("reader register: %d %s", code, b)
	}
	for _, path := range []string{"/eureka/apps", "/v1/status", "/v1/members", "/metrics", "/"} {
		if code, b, _ := Do(t, "GET", auURL(f, auReader, path), nil); code != http.StatusOK {
			t.Errorf("reader GET %s: %d %.100s", path, code, b)
		}
	}

	// The operator CLI: credentials from $HEUREKA_CREDENTIALS.
	if res := RunBinary(t, 15*time.Second, nil, "status", "--addr", f.HTTPAddr); res.ExitCode != 1 || !strings.Contains(res.Stderr, "401") {
		t.Errorf("heureka status without credentials: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if res := RunBinary(t, 15*time.Second, []string{"HEUREKA_CREDENTIALS=" + auReader}, "status", "--addr", f.HTTPAddr); res.ExitCode != 0 {
		t.Errorf("heureka status as reader: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if res := RunBinary(t, 15*time.Second, []string{"HEUREKA_CREDENTIALS=" + auReader}, "mode", "cp", "--addr", f.HTTPAddr); res.ExitCode != 1 || !strings.Contains(res.Stderr, "403") {
		t.Errorf("heureka mode cp as reader: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}

	// write: a register on a follower is forwarded and reaches every node;
	// a renewal (forwarded in a batch) and a status override work.
	if code, b, _ := Do(t, "POST", auURL(f, auWriter, reg), body); code != http.StatusNoContent {
		t.Fatalf("writer register via follower %s: %d %s", f.ID, code, b)
	}
	for _, nd := range c.Nodes {
		WaitFor(t, fgWait, func() bool {
			code, _, _, err := TryDo("GET", auURL(nd, auReader, reg+"/auth-1"), nil)
			return err == nil && code == http.StatusOK
		}, "AUTHAPP/auth-1 on "+nd.ID)
	}
	if code, b, _ := Do(t, "PUT", auURL(f, auWriter, reg+"/auth-1"), nil); code != http.StatusOK {
		t.Fatalf("writer renew via follower: %d %s", code, b)
	}
	if code, b, _ := Do(t, "PUT", auURL(f, auWriter, reg+"/auth-1/status?value=OUT_OF_SERVICE"), nil); code != http.StatusOK {
		t.Fatalf("writer status override via follower: %d %s", code, b)
	}
	// A linearizable read on a follower asks the leader (read-index), and
	// the follower's status carries the leader's lease numbers.
	if code, b, _ := Do(t, "GET", auURL(f, auReader, reg+"?consistency=linearizable"), nil); code != http.StatusOK {
		t.Fatalf("linearizable read via follower: %d %s", code, b)
	}
	if st := f.Status(t); !st.Has("leases") {
		t.Errorf("follower status without the leader's leases: %v", st.Raw)
	}

	// write cannot change membership, mode or take snapshots.
	join := fmt.Sprintf(`{"id":"intruder","raft_addr":%q,"http_addr":%q}`, FreeAddr(t), FreeAddr(t))
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/members", join}, {"DELETE", "/v1/members/" + c.Nodes[2].ID, ""},
		{"PUT", "/v1/mode?mode=cp", ""}, {"GET", "/v1/snapshot", ""}, {"POST", "/v1/snapshot", "x"},
	} {
		var b []byte
		if r.body != "" {
			b = []byte(r.body)
		}
		if code, resp, _ := Do(t, r.method, auURL(leader, auWriter, r.path), b); code != http.StatusForbidden {
			t.Errorf("writer %s %s: %d %s", r.method, r.path, code, resp)
		}
	}
	// Nor can anyone without credentials or with a wrong cluster secret.
	if code, b, _ := Do(t, "POST", auURL(leader, "", "/v1/members"), []byte(join), "X-Heureka-Cluster-Secret", "not-the-secret"); code != http.StatusUnauthorized {
		t.Errorf("join with a wrong secret: %d %s", code, b)
	}
	if ids := auMemberIDs(t, leader); !slices.Equal(ids, []string{"n1", "n2", "n3"}) {
		t.Fatalf("members after refused changes: %v", ids)
	}

	// Internal endpoints refuse calls without the secret.
	for _, secret := range []string{"", "not-the-secret"} {
		var hdr []string
		want := http.StatusUnauthorized
		if secret != "" {
			hdr, want = []string{"X-Heureka-Cluster-Secret", secret}, http.StatusForbidden
		}
		code, b, _ := Do(t, "POST", auURL(leader, auAdmin, "/internal/v1/apply"), []byte("x"), hdr...)
		if code != want {
			t.Errorf("internal apply with secret %q: %d %s, want %d", secret, code, b, want)
		}
	}

	// admin: a mode change and a snapshot through a follower (both
	// forwarded to the leader).
	if code, b, _ := Do(t, "PUT", auURL(f, auAdmin, "/v1/mode?mode=cp"), nil); code != http.StatusOK {
		t.Fatalf("admin mode change via follower: %d %s", code, b)
	}
	if code, b, _ := Do(t, "GET", auURL(f, auAdmin, "/v1/snapshot"), nil); code != http.StatusOK || len(b) == 0 {
		t.Fatalf("admin snapshot via follower: %d (%d bytes)", code, len(b))
	}

	// A fourth node with the secret joins through a follower; one with a
	// wrong secret never becomes a member.
	n4 := c.StartNode(t, "n4", f.HTTPAddr)
	WaitFor(t, 20*time.Second, func() bool { return slices.Contains(auMemberIDs(t, leader), "n4") }, "n4 to join")
	c.opts.NodeArgs = func(id string) []string {
		if id == "n5" {
			return []string{"--cluster-secret", "a-wrong-cluster-secret"}
		}
		return nil
	}
	n5 := c.StartNode(t, "n5", leader.HTTPAddr)
	time.Sleep(3 * time.Second)
	if ids := auMemberIDs(t, leader); slices.Contains(ids, "n5") {
		t.Fatalf("a node with a wrong cluster secret joined: %v", ids)
	}
	if !strings.Contains(n5.LogTail(40), "join answered 401") {
		t.Errorf("n5's log does not show its join refused:\n%s", n5.LogTail(20))
	}
	n5.Stop()
	// n4 replicates: the registration made before it joined reaches it.
	WaitFor(t, fgWait, func() bool {
		code, _, _, err := TryDo("GET", auURL(n4, auReader, reg+"/auth-1"), nil)
		return err == nil && code == http.StatusOK
	}, "AUTHAPP/auth-1 on n4")
}

// auWaitServing waits until every node serves registry reads (a node
// answers 503 until it caught up with the leader after start).
func auWaitServing(t *testing.T, c *Cluster) {
	t.Helper()
	for _, nd := range c.Nodes {
		WaitFor(t, 15*time.Second, func() bool {
			code, _, _, err := TryDo("GET", auURL(nd, auReader, "/eureka/apps"), nil)
			return err == nil && code == http.StatusOK
		}, nd.ID+" serving reads")
	}
}

func auMemberIDs(t *testing.T, nd *Node) []string {
	t.Helper()
	code, b, _ := Do(t, "GET", auURL(nd, auReader, "/v1/members"), nil)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/members: %d %s", code, b)
	}
	var m Members
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, mem := range m.Members {
		ids = append(ids, mem.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestAuthFargo: fargo, with credentials in its service URL, registers,
// renews, reads and deregisters through a follower, in JSON and XML; with
// wrong ones it gets nowhere.
func TestAuthFargo(t *testing.T) {
	fgQuietLogs()
	c := StartCluster(t, 3, auOptions(t))
	leader := c.WaitLeader(t, 15*time.Second)
	f := c.Followers(leader)[0]
	auWaitServing(t, c)
	for _, useJSON := range []bool{true, false} {
		format := map[bool]string{true: "json", false: "xml"}[useJSON]
		ins, want := fgSpec("authfargo-"+format, "af-"+format, "af-"+format+".test", "10.7.0.1", 8080, fargo.UP, "af.vip", "", map[string]string{"k": "v"}, "")

		anon := fargo.NewConn(auURL(f, "writer:wrong", "/eureka"))
		anon.UseJson = useJSON
		if err := anon.RegisterInstance(ins); err == nil {
			t.Fatalf("%s: fargo registered with a wrong password", format)
		}

		conn := fargo.NewConn(auURL(f, auWriter, "/eureka"))
		conn.UseJson = useJSON
		if err := conn.RegisterInstance(ins); err != nil {
			t.Fatalf("%s: fargo register with credentials: %v", format, err)
		}
		if err := conn.HeartBeatInstance(ins); err != nil {
			t.Fatalf("%s: fargo heartbeat: %v", format, err)
		}
		reader := fargo.NewConn(auURL(c.Nodes[0], auReader, "/eureka"))
		reader.UseJson = useJSON
		fgWaitInstance(t, &reader, want, format+" read with read credentials")
		if err := reader.DeregisterInstance(ins); err == nil {
			t.Fatalf("%s: fargo deregistered with read credentials", format)
		}
		if err := conn.DeregisterInstance(ins); err != nil {
			t.Fatalf("%s: fargo deregister: %v", format, err)
		}
		WaitFor(t, fgWait, func() bool {
			_, err := reader.GetInstance(want.app, want.id)
			return err != nil
		}, format+": instance gone after deregister")
	}
}

// TestAuthJSClient: the eureka-js-client scenario with credentials in every
// service URL.
func TestAuthJSClient(t *testing.T) {
	node, err := jsTools()
	ToolOrSkip(t, "eureka-js-client", err)
	c := StartCluster(t, 3, auOptions(t))
	c.WaitLeader(t, 15*time.Second)
	urls := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		urls[i] = auURL(nd, auWriter, "")
	}
	runJSScenario(t, node, urls)
	for _, nd := range c.Nodes {
		WaitFor(t, jsServerChecks, func() bool {
			doc, err := edFetch(auURL(nd, auReader, "/eureka/apps/"), "json")
			return err == nil && len(doc.Instances) == 4
		}, "four js instances on "+nd.ID)
	}
}

// TestAuthNeedsClusterSecret: a multi-node node with --auth-file and no
// cluster secret refuses to start (exit 2).
func TestAuthNeedsClusterSecret(t *testing.T) {
	res := RunBinary(t, 20*time.Second, nil, "serve", "--node-id", "n1", "--data-dir", t.TempDir(),
		"--http-addr", FreeAddr(t), "--auth-file", auFile(t),
		"--initial-cluster", "n1=127.0.0.1:1@127.0.0.1:2,n2=127.0.0.1:3@127.0.0.1:4")
	if res.ExitCode != 2 || !strings.Contains(res.Stderr, "cluster-secret") {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
}
