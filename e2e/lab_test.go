package e2e

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/lab"
)

// TestLabBothModes runs `heureka lab` as an operator would and checks that
// its report says what the partition tests assert: in ap the partitioned
// node answers reads (stale) and takes writes, which are replayed after
// healing; in cp it refuses both; nothing acknowledged is lost in either;
// the whole run takes under two minutes. The HTML report of the same run
// is then checked in Chromium against its JSON (report_test.go).
func TestLabBothModes(t *testing.T) {
	skipShort(t)
	start := time.Now()
	html := filepath.Join(t.TempDir(), "lab.html")
	res := RunBinary(t, 3*time.Minute, nil, "lab", "--json", "--phase", "4s", "--report", html)
	took := time.Since(start)
	if res.TimedOut || res.ExitCode != 0 {
		t.Fatalf("heureka lab: exit %d timed out %v\nstderr: %s", res.ExitCode, res.TimedOut, res.Stderr)
	}
	var rep lab.Report
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, res.Stdout)
	}
	if len(rep.Modes) != 2 || rep.Modes[0].Mode != "ap" || rep.Modes[1].Mode != "cp" {
		t.Fatalf("modes: %+v", rep.Modes)
	}
	minority := func(m lab.ModeReport) lab.Counts {
		for _, r := range m.Rows {
			if r.Phase == "leader partitioned away" && r.Side == "minority" {
				return r.Counts
			}
		}
		t.Fatalf("%s: no minority row", m.Mode)
		return lab.Counts{}
	}
	ap, cp := rep.Modes[0], rep.Modes[1]
	if c := minority(ap); c.ReadsOK == 0 || c.ReadsStale == 0 || c.WritesOK == 0 || ap.WritesReplayed == 0 {
		t.Errorf("ap minority: %+v replayed %d: want stale reads answered and writes accepted, then replayed", c, ap.WritesReplayed)
	}
	if c := minority(cp); c.ReadsOK != 0 || c.WritesOK != 0 || c.ReadsRefused == 0 || c.WritesRefused == 0 {
		t.Errorf("cp minority: %+v: want reads and writes refused", c)
	}
	for _, m := range rep.Modes {
		if m.WritesLost != 0 || m.WritesAccepted == 0 {
			t.Errorf("%s: %d acknowledged writes lost of %d", m.Mode, m.WritesLost, m.WritesAccepted)
		}
	}
	if took > 2*time.Minute {
		t.Errorf("lab took %s, want under 2 minutes", took)
	}
	t.Logf("lab ran in %s: ap minority %+v, cp minority %+v", took.Round(time.Second), minority(ap), minority(cp))
	t.Run("report in chromium", func(t *testing.T) {
		checkLabReport(t, rep, html, "lab-report.png")
	})
}
