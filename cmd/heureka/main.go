// Command heureka is the one binary: the registry server (`heureka serve`)
// and the operator subcommands (status, members, mode, snapshot), plus
// `heureka bench` and `heureka lab`. It wires the packages together and
// holds no logic of its own (docs/design.md, "Packages").
//
// It imports bench, cluster, fsm, httpapi, internal/runtime/memlimit, lab,
// limits, nodeapi, opapi, peering, region and store. It must not link
// etcd's client, gRPC or zap: the etcd column of heureka bench needs the
// build tag etcdclient (docs/bench.md, "The etcd column").
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// command is one subcommand: how it is called, what it does (both for the
// usage text), and the function that runs it with the arguments after its
// name. Keeping the three together means the usage cannot list a command
// that does not exist, nor leave one out.
type command struct {
	name     string
	synopsis string // the arguments after the name, for the usage text
	summary  string
	run      func(args []string) int
}

// commands are the subcommands in the order the usage text lists them.
var commands = []command{
	{"serve", "[flags]", "run a node (heureka serve --help lists the flags)", serve},
	{"lab", "[--nodes 3|5] [--modes ap,cp] [--json] [--report lab.html] [--report-dir dir]",
		"play partitions and a leader kill on a local cluster, AP vs CP", runLab},
	{"limit-server", "", "serve fixed bytes (a benchmark yardstick)", limitServer},
	{"bench", "[flags]", "benchmark heureka, etcd and the limit (docs/bench.md)", benchCmd},
	{"status", "", "a node's view of itself and the cluster", opsStatusCmd},
	{"members", "", "list, join or remove members", opsMembersCmd},
	{"mode", "[ap|cp]", "show or switch the consistency mode", opsModeCmd},
	{"snapshot", "", "save or restore the registry (heureka snapshot --help)", opsSnapshotCmd},
	{"import", "--from URL [--to URL]", "copy an eureka-server's registry into heureka once (docs/migrate-from-eureka.md)",
		func(args []string) int { return importCmd(args, os.Stdout, os.Stderr) }},
	{"auth", "hash", "print a bcrypt hash of the password on stdin (for --auth-file)",
		func(args []string) int { return authCmd(args, os.Stdin, os.Stdout, os.Stderr) }},
	{"secret", "init FILE", "write a random cluster secret to FILE unless it holds one (for --cluster-secret-file)",
		func(args []string) int { return secretCmd(args, os.Stdout, os.Stderr) }},
}

// usage is the text `heureka --help` prints: a line per command, its
// summary beside it, or under it when the call is too long to leave room.
func usage() string {
	const column = 27
	var b strings.Builder
	b.WriteString("heureka: a Eureka-compatible service registry on Raft\n\nUsage:\n")
	for _, c := range commands {
		call := strings.TrimSpace("heureka " + c.name + " " + c.synopsis)
		if len(call) < column-1 {
			fmt.Fprintf(&b, "  %-*s%s\n", column-2, call, c.summary)
		} else {
			fmt.Fprintf(&b, "  %s\n%*s%s\n", call, column, "", c.summary)
		}
	}
	return b.String()
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage())
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) > 1 {
			fmt.Fprintf(os.Stderr, "heureka: %s takes no arguments (try heureka %s --help)\n", args[0], args[1])
			return 2
		}
		fmt.Fprint(os.Stdout, usage())
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "heureka: unknown command %q (try heureka --help)\n", args[0])
	return 2
}

// parseCommand parses a subcommand's flags, which take no positional
// arguments. It returns false when the command is done: --help printed its
// flags on stdout (exit 0), or bad usage was reported on stderr (exit 2).
func parseCommand(fs *flag.FlagSet, synopsis string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stdout, "Usage: heureka %s %s\n", fs.Name(), synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		return 0, false
	case err != nil:
		fmt.Fprintf(stderr, "heureka %s: %v\n", fs.Name(), err)
		return 2, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "heureka %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// newFlagSet returns a subcommand's flag set, silent: each command reports a
// parse error (or its --help) in its own words.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}
