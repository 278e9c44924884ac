package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/heureka-registry/heureka/lab"
)

// runLab is `heureka lab`: AP and CP side by side on a local cluster.
func runLab(args []string) int {
	fs := newFlagSet("lab")
	nodes := fs.Int("nodes", 3, "cluster size: 3 or 5")
	modes := fs.String("modes", "ap,cp", "modes to play, in order")
	phase := fs.Duration("phase", 5*time.Second, "how long each fault lasts")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	report := fs.String("report", "", "also write the report as one self-contained HTML page to this file (all modes side by side)")
	reportDir := fs.String("report-dir", "", "also write one HTML page per mode into this directory (lab-<mode>.html)")
	if code, ok := parseCommand(fs, "[flags]", args, os.Stdout, os.Stderr); !ok {
		return code
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
	if *phase <= 0 {
		fmt.Fprintf(os.Stderr, "heureka lab: --phase %s: want a positive duration\n", *phase)
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
	if ctx.Err() != nil {
		// Interrupted: the nodes are stopped, and no report is written
		// for a run that did not play every phase.
		fmt.Fprintln(os.Stderr, "heureka lab: interrupted; no report")
		return 130
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "heureka lab: %v\n", err)
		return 1
	}
	if err := writeLabReports(rep, *report, *reportDir); err != nil {
		fmt.Fprintf(os.Stderr, "heureka lab: %v\n", err)
		return 1
	}
	if *asJSON {
		printJSON(rep)
		return 0
	}
	rep.WriteTable(os.Stdout)
	fmt.Printf("\n%d nodes, faults of %s each, run took %s\n", *nodes, *phase, time.Since(start).Round(time.Second))
	return 0
}

// writeLabReports writes the HTML report to file (every mode) and to dir
// (one page per mode); an empty name skips that output.
func writeLabReports(rep *lab.Report, file, dir string) error {
	write := func(path string, r *lab.Report) error {
		var buf bytes.Buffer
		if err := r.WriteHTML(&buf); err != nil {
			return err
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		fmt.Fprintf(os.Stderr, "report written to %s\n", path)
		return nil
	}
	if file != "" {
		if err := write(file, rep); err != nil {
			return err
		}
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("report dir: %w", err)
		}
		for _, m := range rep.Modes {
			one := &lab.Report{Nodes: rep.Nodes, Modes: []lab.ModeReport{m}}
			if err := write(filepath.Join(dir, "lab-"+m.Mode+".html"), one); err != nil {
				return err
			}
		}
	}
	return nil
}
