// Command heureka is the one binary: the registry server (`heureka serve`)
// and the operator subcommands (status, members, mode, snapshot), plus
// `heureka bench` and `heureka lab`. It wires the packages together and
// holds no logic of its own (docs/design.md, "Packages"). It must not link
// etcd's client, gRPC or zap: the etcd column of heureka bench needs the
// build tag etcdclient (docs/bench.md, "The etcd column").
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `heureka: a Eureka-compatible service registry on Raft

Usage:
  heureka serve [flags]    run a node (heureka serve --help lists the flags)
  heureka lab [--nodes 3|5] [--modes ap,cp] [--json] [--report lab.html] [--report-dir dir]
                           play partitions and a leader kill on a local cluster, AP vs CP
  heureka limit-server     serve fixed bytes (a benchmark yardstick)
  heureka bench [flags]    benchmark heureka, etcd and the limit (docs/bench.md)
  heureka status           a node's view of itself and the cluster
  heureka members          list, join or remove members
  heureka mode [ap|cp]     show or switch the consistency mode
  heureka snapshot         save or restore the registry (heureka snapshot --help)
  heureka import --from URL [--to URL]
                           copy an eureka-server's registry into heureka once (docs/migrate-from-eureka.md)
  heureka auth hash        print a bcrypt hash of the password on stdin (for --auth-file)
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:])
	case "lab":
		return runLab(args[1:])
	case "limit-server":
		return limitServer(args[1:])
	case "bench":
		return benchCmd(args[1:])
	case "status":
		return opsStatusCmd(args[1:])
	case "members":
		return opsMembersCmd(args[1:])
	case "mode":
		return opsModeCmd(args[1:])
	case "snapshot":
		return opsSnapshotCmd(args[1:])
	case "auth":
		return authCmd(args[1:], os.Stdin, os.Stdout, os.Stderr)
	case "import":
		return importCmd(args[1:], os.Stdout, os.Stderr)
	case "-h", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "heureka: unknown command %q (try heureka --help)\n", args[0])
	return 2
}

// newFlagSet returns a subcommand's flag set, silent: each command reports a
// parse error (or its --help) in its own words.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}
