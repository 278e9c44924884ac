// Package launch starts, watches and stops the local heureka clusters that
// the system tests (e2e), `heureka bench` and `heureka lab` run on 127.0.0.1.
// It is the one place that knows how a local cluster is laid out and how a
// child process is handled:
//
//   - Build compiles ./cmd/heureka; FreeAddr picks loopback ports below the
//     ephemeral range, so a node can restart on its port.
//   - Proc is one child process (a heureka node, or any other program the
//     tools drive): its output goes to a log file, it is stopped by its PID
//     (SIGTERM, then SIGKILL after a grace period), it can be paused, resumed
//     and started again with the same arguments, and on Linux the kernel kills
//     it if the parent dies.
//   - Cluster plans n `heureka serve` nodes n1..nN (ports, data directories
//     <dir>/nK, logs <dir>/nK.log, the --initial-cluster list, fast Raft
//     timings for tests) and adds nodes that --join later.
//   - Node.Status reads GET /v1/status into opapi.Status; WaitReady and
//     Leader/WaitLeader are the readiness and leader waits every tool shares.
//   - EurekaServer is the command line of a peer of the reference
//     eureka-server (the Spring Cloud jar the tests and `heureka bench` set
//     beside heureka), and WaitEurekaServer waits until it serves.
//
// It talks to the nodes only over HTTP, as an operator would. It imports
// opapi (the operator API's wire types) only, and nothing of testing:
// callers turn its errors into test failures or command errors.
package launch
