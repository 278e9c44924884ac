package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/heureka-registry/heureka/lab"
)

// runLab is `heureka lab`: AP and CP side by side on a local cluster.
func runLab(args []string) int {
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nodes := fs.Int("nodes", 3, "cluster size: 3 or 5")
	modes := fs.String("modes", "ap,cp", "modes to play, in order")
	phase := fs.Duration("phase", 5*time.Second, "how long each fault lasts")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(os.Stderr, "heureka lab: %v\n", err)
		return 2
	}
	var modeList []string
	for _, m := range strings.Split(*modes, ",") {
		if m = strings.TrimSpace(m); m != "ap" && m != "cp" {
			fmt.Fprintf(os.Stderr, "heureka lab: mode %q: want ap or cp\n", m)
			return 2
		}
		modeList = append(modeList, strings.TrimSpace(m))
	}
	if *nodes != 3 && *nodes != 5 {
		fmt.Fprintln(os.Stderr, "heureka lab: --nodes must be 3 or 5")
		return 2
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "heureka lab: %v\n", err)
		return 1
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	start := time.Now()
	rep, err := lab.Run(ctx, lab.Config{Binary: bin, Nodes: *nodes, Modes: modeList, Phase: *phase, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintf(os.Stderr, "heureka lab: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return 0
	}
	rep.WriteTable(os.Stdout)
	fmt.Printf("\n%d nodes, faults of %s each, run took %s\n", *nodes, *phase, time.Since(start).Round(time.Second))
	return 0
}
