package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/heureka-registry/heureka/lab"
)

// The lab's HTML report is checked in Chromium against the JSON the same
// run printed: every node's lane in every mode, the fault windows where
// the lab put them, the same numbers, nothing overlapping in a 1280 px
// window, and charts that actually have something drawn in them.

// reportDOM is what the page shows, read back by a script in the browser.
type reportDOM struct {
	ScrollWidth int          `json:"scrollWidth"`
	Modes       []domMode    `json:"modes"`
	Outcome     []domOutcome `json:"outcome"`
	Labels      []domBox     `json:"labels"`
}

type domMode struct {
	Mode     string      `json:"mode"`
	Chart    domBox      `json:"chart"`
	PlotLeft float64     `json:"plotLeft"`
	PlotW    float64     `json:"plotW"`
	Lanes    []domLane   `json:"lanes"`
	Faults   []domFault  `json:"faults"`
	Rows     []domRow    `json:"rows"`
	Replays  []lab.Event `json:"replays"`
}

type domLane struct {
	Node    string       `json:"node"`
	Buckets []lab.Counts `json:"buckets"`
	Leaders []lab.Span   `json:"leaders"`
}

type domFault struct {
	lab.Window
	// X is the window's left edge in the chart, in CSS px.
	X float64 `json:"x"`
	W float64 `json:"w"`
}

type domRow struct {
	Phase string `json:"phase"`
	Side  string `json:"side"`
	lab.Counts
}

type domOutcome struct {
	Key    string            `json:"key"`
	Values map[string]string `json:"values"`
}

type domBox struct {
	Text string  `json:"text"`
	X    float64 `json:"x"`
	Y    float64 `json:"y"`
	W    float64 `json:"w"`
	H    float64 `json:"h"`
}

// readReportJS collects the page's marks, their data attributes and the
// boxes of every label.
const readReportJS = `(() => {
const box = (el, text) => { const r = el.getBoundingClientRect(); return {text: text || "", x: r.x + scrollX, y: r.y + scrollY, w: r.width, h: r.height}; };
const n = (el, k) => parseInt(el.getAttribute("data-" + k), 10);
const counts = el => ({reads_ok: n(el, "reads-ok"), reads_stale: n(el, "reads-stale"), reads_refused: n(el, "reads-refused"),
  writes_accepted: n(el, "writes-accepted"), writes_journaled: n(el, "writes-journaled"), writes_refused: n(el, "writes-refused")});
const out = {scrollWidth: document.documentElement.scrollWidth, modes: [], outcome: [], labels: []};
for (const sec of document.querySelectorAll("section.mode")) {
  const svg = sec.querySelector("svg.timeline");
  const axis = svg.querySelector("line.axis");
  const left = parseFloat(axis.getAttribute("x1")), right = parseFloat(axis.getAttribute("x2"));
  const sbox = svg.getBoundingClientRect();
  const m = {mode: sec.dataset.mode, chart: box(svg), plotLeft: left, plotW: right - left,
    lanes: [], faults: [], rows: [], replays: []};
  for (const g of svg.querySelectorAll("g.lane")) {
    m.lanes.push({node: g.dataset.node, buckets: [...g.querySelectorAll("g.b")].map(counts),
      leaders: [...g.querySelectorAll("rect.leader")].map(r => ({start_ms: n(r, "start-ms"), end_ms: n(r, "end-ms")}))});
  }
  for (const r of svg.querySelectorAll("rect.fault")) {
    const b = r.getBoundingClientRect();
    m.faults.push({kind: r.dataset.kind, node: r.dataset.node, start_ms: n(r, "start-ms"), end_ms: n(r, "end-ms"), x: b.x - sbox.x, w: b.width});
  }
  for (const g of svg.querySelectorAll("g.replay-mark")) {
    m.replays.push({kind: g.dataset.kind, node: g.dataset.node, at_ms: n(g, "at-ms"), n: n(g, "n")});
  }
  for (const tr of sec.querySelectorAll("table.phases tr[data-phase]")) {
    const c = {};
    for (const td of tr.querySelectorAll("td[data-k]")) c[td.dataset.k] = parseInt(td.innerText, 10);
    m.rows.push(Object.assign({phase: tr.dataset.phase, side: tr.dataset.side}, c));
  }
  out.modes.push(m);
  for (const t of svg.querySelectorAll("text")) out.labels.push(box(t, m.mode + ": " + t.textContent));
}
for (const tr of document.querySelectorAll("#outcome tr[data-key]")) {
  const v = {};
  for (const td of tr.querySelectorAll("td[data-mode]")) v[td.dataset.mode] = td.innerText.trim();
  out.outcome.push({key: tr.dataset.key, values: v});
}
for (const el of document.querySelectorAll(".legend span, h1, h2")) out.labels.push(box(el, el.innerText));
return JSON.stringify(out);
})()`

// checkLabReport opens the report in Chromium at 1280 px and compares it
// with rep, the JSON of the same run; the screenshot is saved as shot.
func checkLabReport(t *testing.T, rep lab.Report, htmlPath, shot string) {
	ctx := newBrowser(t)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	abs, err := filepath.Abs(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate("file://"+abs), chromedp.WaitVisible(chromedp.CSS("#outcome"))); err != nil {
		t.Fatalf("open the report in chromium: %v", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](readReportJS))
	if err != nil {
		t.Fatalf("read the report's DOM: %v", err)
	}
	var dom reportDOM
	if err := json.Unmarshal([]byte(raw), &dom); err != nil {
		t.Fatalf("decode the DOM summary: %v", err)
	}
	pngData, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactDir(t), shot)
	if err := os.WriteFile(path, pngData, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the report: %s", path)

	if dom.ScrollWidth > 1280 {
		t.Errorf("page is %d px wide, wider than the 1280 px window", dom.ScrollWidth)
	}
	if len(dom.Modes) != len(rep.Modes) {
		t.Fatalf("page shows %d modes, the JSON %d", len(dom.Modes), len(rep.Modes))
	}
	// AP and CP side by side: the charts share a row.
	if len(dom.Modes) == 2 && (dom.Modes[1].Chart.X < dom.Modes[0].Chart.X+dom.Modes[0].Chart.W || math.Abs(dom.Modes[1].Chart.Y-dom.Modes[0].Chart.Y) > 1) {
		t.Errorf("modes are not side by side: %+v / %+v", dom.Modes[0].Chart, dom.Modes[1].Chart)
	}
	var span int64
	for _, m := range rep.Modes {
		span = max(span, m.Timeline.DurationMs)
	}
	for i, m := range rep.Modes {
		dm := dom.Modes[i]
		tl := m.Timeline
		if dm.Mode != m.Mode {
			t.Fatalf("mode %d: page %q, JSON %q", i, dm.Mode, m.Mode)
		}
		if len(dm.Lanes) != rep.Nodes || len(tl.Nodes) != rep.Nodes {
			t.Errorf("%s: %d lanes on the page, %d in the JSON, want %d", m.Mode, len(dm.Lanes), len(tl.Nodes), rep.Nodes)
			continue
		}
		for j, lane := range tl.Nodes {
			dl := dm.Lanes[j]
			if dl.Node != lane.Node {
				t.Errorf("%s lane %d: %s on the page, %s in the JSON", m.Mode, j, dl.Node, lane.Node)
			}
			if fmt.Sprint(dl.Buckets) != fmt.Sprint(lane.Buckets) {
				t.Errorf("%s %s: buckets on the page\n%v\ndiffer from the JSON\n%v", m.Mode, lane.Node, dl.Buckets, lane.Buckets)
			}
			if fmt.Sprint(dl.Leaders) != fmt.Sprint(lane.Leader) {
				t.Errorf("%s %s: leader spans %v on the page, %v in the JSON", m.Mode, lane.Node, dl.Leaders, lane.Leader)
			}
		}
		if len(tl.Faults) != 3 || len(dm.Faults) != len(tl.Faults) {
			t.Errorf("%s: %d fault windows on the page, %d in the JSON, want partition, kill and restart", m.Mode, len(dm.Faults), len(tl.Faults))
		}
		for j := range min(len(dm.Faults), len(tl.Faults)) {
			f, df := tl.Faults[j], dm.Faults[j]
			if df.Window != f {
				t.Errorf("%s: fault %d is %+v on the page, %+v in the JSON", m.Mode, j, df.Window, f)
			}
			// Where the lab put it: its left edge and width on the time axis.
			wantX := dm.PlotLeft + dm.PlotW*float64(f.StartMs)/float64(span)
			wantW := dm.PlotW * float64(f.EndMs-f.StartMs) / float64(span)
			if math.Abs(df.X-wantX) > 1.5 || math.Abs(df.W-wantW) > 1.5 {
				t.Errorf("%s: %s window drawn at x=%.1f w=%.1f, want x=%.1f w=%.1f", m.Mode, f.Kind, df.X, df.W, wantX, wantW)
			}
		}
		if fmt.Sprint(dm.Replays) != fmt.Sprint(tl.Events) {
			t.Errorf("%s: replay marks %v on the page, events %v in the JSON", m.Mode, dm.Replays, tl.Events)
		}
		if len(dm.Rows) != len(m.Rows) {
			t.Errorf("%s: %d phase rows on the page, %d in the JSON", m.Mode, len(dm.Rows), len(m.Rows))
		}
		for j := range min(len(dm.Rows), len(m.Rows)) {
			if dm.Rows[j].Phase != m.Rows[j].Phase || dm.Rows[j].Side != m.Rows[j].Side || dm.Rows[j].Counts != m.Rows[j].Counts {
				t.Errorf("%s: row %d %+v on the page, %+v in the JSON", m.Mode, j, dm.Rows[j], m.Rows[j])
			}
		}
	}
	outcome := map[string]map[string]string{}
	for _, o := range dom.Outcome {
		outcome[o.Key] = o.Values
	}
	for _, m := range rep.Modes {
		for key, want := range map[string]int{"writes_accepted": m.WritesAccepted, "writes_lost": m.WritesLost, "writes_replayed": m.WritesReplayed} {
			if got := outcome[key][m.Mode]; got != strconv.Itoa(want) {
				t.Errorf("%s %s: page says %q, JSON %d", m.Mode, key, got, want)
			}
		}
	}
	// No two labels overlap.
	for i := range dom.Labels {
		for j := i + 1; j < len(dom.Labels); j++ {
			a, b := dom.Labels[i], dom.Labels[j]
			if a.W == 0 || b.W == 0 {
				continue
			}
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Errorf("labels overlap: %q at %+v and %q at %+v", a.Text, a, b.Text, b)
			}
		}
	}
	// Every chart has marks in it: count colored pixels in its region.
	img, err := png.Decode(bytes.NewReader(pngData))
	if err != nil {
		t.Fatalf("decode screenshot: %v", err)
	}
	for _, dm := range dom.Modes {
		r := image.Rect(int(dm.Chart.X), int(dm.Chart.Y), int(dm.Chart.X+dm.Chart.W), int(dm.Chart.Y+dm.Chart.H))
		colored, total := coloredPixels(img, r)
		t.Logf("%s chart %v: %d of %d pixels colored", dm.Mode, r, colored, total)
		if total == 0 || colored*10 < total {
			t.Errorf("%s chart %v: %d of %d pixels colored, want at least a tenth", dm.Mode, r, colored, total)
		}
	}
}

// coloredPixels counts the pixels in r that are clearly colored (not
// white, grey or near-black text): the bars and the shaded windows.
func coloredPixels(img image.Image, r image.Rectangle) (colored, total int) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			hi := max(cr, cg, cb) >> 8
			lo := min(cr, cg, cb) >> 8
			total++
			if hi-lo > 40 {
				colored++
			}
		}
	}
	return colored, total
}

// TestLabReportFiveNodes runs the lab on five nodes and checks its report
// stays readable in a 1280 px window.
func TestLabReportFiveNodes(t *testing.T) {
	skipShort(t)
	chromiumPath(t) // skip before the run if there is no browser
	dir := t.TempDir()
	html := filepath.Join(dir, "lab5.html")
	res := RunBinary(t, 4*time.Minute, nil, "lab", "--nodes", "5", "--json", "--phase", "3s", "--report", html)
	if res.TimedOut || res.ExitCode != 0 {
		t.Fatalf("heureka lab --nodes 5: exit %d timed out %v\nstderr: %s", res.ExitCode, res.TimedOut, res.Stderr)
	}
	var rep lab.Report
	if err := json.Unmarshal([]byte(res.Stdout), &rep); err != nil {
		t.Fatalf("decode report: %v", err)
	}
	if rep.Nodes != 5 {
		t.Fatalf("report of %d nodes", rep.Nodes)
	}
	checkLabReport(t, rep, html, "lab-report-5-nodes.png")
}
