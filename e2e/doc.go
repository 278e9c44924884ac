// Package e2e is heureka's system-test harness and the system tests of the
// Raft core. It starts real `heureka serve` processes on loopback ports, each
// with its own data directory and log file, and drives them over HTTP.
//
// The harness (harness.go, http.go, extproc.go) is a testing front of
// internal/testkit/launch, which starts, waits for and stops the processes (the same
// launcher heureka bench and heureka lab use); besides it the harness uses
// only the standard library, testing and the operator API types of opapi, so
// tests in any package may import it:
//
//	c := e2e.StartCluster(t, 3, e2e.Options{ExtraArgs: []string{"--response-cache-update-interval", "100ms"}})
//	leader := c.WaitLeader(t, 10*time.Second)
//	e2e.RegisterJSON(t, c.Followers(leader)[0].BaseURL(), "orders", "orders-1", nil)
//	code, body, hdr := e2e.Do(t, "GET", leader.URL("/eureka/apps/ORDERS/orders-1"), nil)
//
// What it provides:
//
//   - Binary builds ./cmd/heureka once per test process into os.TempDir()/heureka-e2e-bin-*
//     (or uses the file named by HEUREKA_E2E_BINARY); RemoveBinary deletes it.
//   - FreeAddr hands out loopback addresses with ports in [22000, 32000), below
//     the ephemeral range, so a node can restart on its port.
//   - StartCluster starts n nodes n1..nN bootstrapped from one --initial-cluster
//     list, with fast Raft timings (500ms heartbeat and election timeouts, 250ms
//     leader lease) and Options.ExtraArgs / Options.NodeArgs / Options.Env;
//     Cluster.StartNode adds a node with --join. Data dirs are <t.TempDir()>/nK,
//     logs <t.TempDir()>/nK.log (appended across restarts).
//   - Node.Kill (SIGKILL), Stop (SIGTERM, SIGKILL after 10 s; returns the exit
//     code), Pause (SIGSTOP), Resume (SIGCONT), Restart (same args and data dir),
//     Status (GET /v1/status), Members (GET /v1/members), URL, BaseURL.
//   - Cluster.WaitLeader waits until the live nodes agree on one leader;
//     WaitFor and Eventually replace sleeps.
//   - Do/TryDo send requests (Accept: application/json by default);
//     RegisterJSON/TryRegisterJSON/RegisterBody/InstanceMap build Eureka register
//     bodies shaped like the Java client's; GetApps/ParseApps read GET /eureka/apps.
//   - RunBinary runs a one-off heureka command and returns its exit code and output.
//
// Every process is stopped by its PID in t.Cleanup (paused ones are resumed
// first), and on Linux each is also killed by the kernel if the test binary
// dies. When a test fails, the last 80 lines of every node's log are printed
// with t.Log. Inherited HEUREKA_* environment variables are not passed to the
// nodes, so a developer's shell cannot change what a test runs; use
// Options.Env instead.
//
// The tests run with a plain `go test ./e2e/`; they need no build tag.
//
// The harness talks to nodes over HTTP only. It imports
// internal/testkit/instance, internal/testkit/launch and opapi only; it
// must not import the server's packages (fsm, store, cluster, cache,
// httpapi).
package e2e
