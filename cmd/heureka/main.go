// Command heureka is the one binary: the registry server (`heureka serve`)
// and, later, the operator subcommands.
package main

import (
	"fmt"
	"os"
)

const usage = `heureka: a Eureka-compatible service registry on Raft

Usage:
  heureka serve [flags]    run a node (heureka serve --help lists the flags)
  heureka limit-server     serve fixed bytes (a benchmark yardstick)
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
	case "limit-server":
		return limitServer(args[1:])
	case "-h", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "heureka: unknown command %q (try heureka --help)\n", args[0])
	return 2
}
