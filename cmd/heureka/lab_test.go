package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/lab"
)

func TestWriteLabReportsOnePagePerModeAndOneForAll(t *testing.T) {
	mode := func(name string) lab.ModeReport {
		return lab.ModeReport{Mode: name, Timeline: lab.Timeline{BucketMs: 500, DurationMs: 1000,
			Nodes: []lab.NodeTimeline{{Node: "n1", Buckets: []lab.Counts{{ReadsOK: 1}, {WritesOK: 1}}}}}}
	}
	rep := &lab.Report{Nodes: 1, Modes: []lab.ModeReport{mode("ap"), mode("cp")}}
	dir := t.TempDir()
	all := filepath.Join(dir, "lab.html")
	if err := writeLabReports(rep, all, filepath.Join(dir, "per-mode")); err != nil {
		t.Fatal(err)
	}
	for path, modes := range map[string][]string{all: {"ap", "cp"},
		filepath.Join(dir, "per-mode", "lab-ap.html"): {"ap"}, filepath.Join(dir, "per-mode", "lab-cp.html"): {"cp"}} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(string(data), `<section class="mode"`); got != len(modes) {
			t.Errorf("%s: %d modes, want %v", path, got, modes)
		}
		for _, m := range modes {
			if !strings.Contains(string(data), `id="mode-`+m+`"`) {
				t.Errorf("%s lacks mode %s", path, m)
			}
		}
	}
	if err := writeLabReports(rep, filepath.Join(dir, "missing", "x.html"), ""); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}
