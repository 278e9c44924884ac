package lab

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

// The HTML report is one self-contained page (inline CSS and SVG, no
// JavaScript, no external asset) rendered from the same Report the JSON
// output encodes; the JSON itself is embedded in the page too (a
// non-executable application/json block), so a saved report can be
// re-read by tools.

//go:embed report.html.tmpl
var reportFS embed.FS

var reportTmpl = template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
	// f keeps SVG coordinates short.
	"f":       func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"seconds": func(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + "s" },
}).ParseFS(reportFS, "report.html.tmpl"))

// Chart geometry, in CSS pixels. A chart is 600 px wide so that two fit
// side by side in a 1280 px window.
const (
	chartWidth  = 600
	laneLeft    = 44  // room for the node name
	laneRight   = 8   // right margin
	labelRowH   = 14  // one row of fault labels
	labelRows   = 2   // fault label rows above the lanes
	leaderH     = 5   // leader strip
	barH        = 16  // reads row and writes row
	laneGap     = 8   // between lanes
	axisH       = 22  // time axis below the lanes
	charWidthPx = 6.2 // estimated width of one label character at 10 px
)

// outcome is one line of the outcome table: a name and a value per mode.
type outcome struct {
	Key    string
	Name   string
	Values []string
}

// outcomes lists the outcome table shared by the text and HTML reports.
func (r *Report) outcomes() []outcome {
	lines := []struct {
		key, name string
		f         func(ModeReport) string
	}{
		{"writes_accepted", "writes accepted", func(m ModeReport) string { return fmt.Sprint(m.WritesAccepted) }},
		{"writes_lost", "writes lost", func(m ModeReport) string { return fmt.Sprint(m.WritesLost) }},
		{"writes_replayed", "writes replayed (accepted without quorum)", func(m ModeReport) string { return fmt.Sprint(m.WritesReplayed) }},
		{"minority_reads", "minority reads answered / refused", func(m ModeReport) string {
			c := m.find("leader partitioned away", "minority")
			return fmt.Sprintf("%d / %d", c.ReadsOK, c.ReadsRefused)
		}},
		{"minority_writes", "minority writes accepted / refused", func(m ModeReport) string {
			c := m.find("leader partitioned away", "minority")
			return fmt.Sprintf("%d / %d", c.WritesOK, c.WritesRefused)
		}},
		{"stale_reads", "stale reads (X-Heureka-Stale)", func(m ModeReport) string {
			n := 0
			for _, row := range m.Rows {
				n += row.ReadsStale
			}
			return fmt.Sprint(n)
		}},
		{"recover_partition", "recover after healing", func(m ModeReport) string { return m.RecoverPartition.Round(10 * time.Millisecond).String() }},
		{"recover_kill", "recover after leader restart", func(m ModeReport) string { return m.RecoverKill.Round(10 * time.Millisecond).String() }},
	}
	out := make([]outcome, len(lines))
	for i, l := range lines {
		out[i] = outcome{Key: l.key, Name: l.name}
		for _, m := range r.Modes {
			out[i].Values = append(out[i].Values, l.f(m))
		}
	}
	return out
}

// reportPage is what the template renders.
type reportPage struct {
	Nodes    int
	Modes    []modeView
	Names    []string
	Outcomes []outcome
	JSON     template.JS
}

type modeView struct {
	Mode        string
	Title       string
	Width       int
	Height      int
	PlotLeft    int
	PlotRight   int
	LanesTop    int
	LanesBottom int
	TickBottom  int
	TickLabelY  int
	Lanes       []laneView
	Faults      []faultView
	Ticks       []tickView
	Events      []eventView
	Rows        []Row
	BucketMs    int64
	DurationMs  int64
}

type laneView struct {
	Node                    string
	Y, H, LabelY            int
	PlotLeft, PlotW         int
	LeaderY, ReadsY, WriteY int
	Leader                  []rectView
	Buckets                 []bucketView
	Totals                  Counts
}

type rectView struct {
	X, W float64
	Y    int
	Span
}

// bar is one colored part of a stacked bar.
type bar struct {
	Class string
	Y, H  float64
}

type bucketView struct {
	I      int
	X, W   float64
	Counts Counts
	Reads  []bar
	Writes []bar
}

type faultView struct {
	Window
	X, W           float64
	Y, H           int
	LabelX, LabelY float64
	Label          string
	LaneY, LaneH   int
}

type tickView struct {
	X     float64
	Label string
}

type eventView struct {
	Event
	X, Y, Y2 float64
}

// WriteHTML renders the report as one self-contained HTML page.
func (r *Report) WriteHTML(w io.Writer) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	p := reportPage{Nodes: r.Nodes, Outcomes: r.outcomes(),
		// The JSON goes into a <script type="application/json"> block;
		// escaping '<' keeps a stray "</script>" from ending it early.
		JSON: template.JS(strings.ReplaceAll(string(data), "<", `\u003c`))}
	// One time scale for every mode, so that the charts line up.
	var span int64
	for _, m := range r.Modes {
		span = max(span, m.Timeline.DurationMs)
	}
	for _, m := range r.Modes {
		p.Names = append(p.Names, m.Mode)
		p.Modes = append(p.Modes, viewMode(m, span))
	}
	if err := reportTmpl.Execute(w, &p); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	return nil
}

// viewMode lays one mode's timeline out on a time axis of span ms.
func viewMode(m ModeReport, span int64) modeView {
	tl := m.Timeline
	v := modeView{Mode: m.Mode, Title: strings.ToUpper(m.Mode), Width: chartWidth, PlotLeft: laneLeft,
		PlotRight: chartWidth - laneRight, Rows: m.Rows, BucketMs: tl.BucketMs, DurationMs: tl.DurationMs}
	span = max(span, tl.DurationMs, 1)
	plotW := float64(v.PlotRight - v.PlotLeft)
	xOf := func(ms int64) float64 { return float64(v.PlotLeft) + plotW*float64(ms)/float64(span) }
	laneH := leaderH + 2*barH + 2
	v.LanesTop = labelRows*labelRowH + 4
	// One scale per mode for each row, so bars compare across nodes.
	maxReads, maxWrites := 1, 1
	for _, n := range tl.Nodes {
		for _, b := range n.Buckets {
			maxReads = max(maxReads, b.ReadsOK+b.ReadsRefused)
			maxWrites = max(maxWrites, b.WritesOK+b.WritesRefused)
		}
	}
	laneY := map[string]int{}
	for i, n := range tl.Nodes {
		y := v.LanesTop + i*(laneH+laneGap)
		laneY[n.Node] = y
		lv := laneView{Node: n.Node, Y: y, H: laneH, PlotLeft: v.PlotLeft, PlotW: v.PlotRight - v.PlotLeft, LabelY: y + laneH/2 + 4, LeaderY: y, ReadsY: y + leaderH + 1,
			WriteY: y + leaderH + 1 + barH + 1}
		for _, s := range n.Leader {
			lv.Leader = append(lv.Leader, rectView{X: xOf(s.StartMs), W: max(1, xOf(s.EndMs)-xOf(s.StartMs)), Y: lv.LeaderY, Span: s})
		}
		for bi, b := range n.Buckets {
			x0, x1 := xOf(int64(bi)*tl.BucketMs), xOf(min(int64(bi+1)*tl.BucketMs, span))
			bv := bucketView{I: bi, X: x0, W: max(0.5, x1-x0-0.5), Counts: b}
			bv.Reads = stack(float64(lv.ReadsY), barH, maxReads, []int{b.ReadsOK - b.ReadsStale, b.ReadsStale, b.ReadsRefused},
				[]string{"r-ok", "r-stale", "r-refused"})
			bv.Writes = stack(float64(lv.WriteY), barH, maxWrites, []int{b.WritesOK - b.WritesJournaled, b.WritesJournaled, b.WritesRefused},
				[]string{"w-ok", "w-journal", "w-refused"})
			lv.Buckets = append(lv.Buckets, bv)
			lv.Totals.ReadsOK += b.ReadsOK
			lv.Totals.ReadsStale += b.ReadsStale
			lv.Totals.ReadsRefused += b.ReadsRefused
			lv.Totals.WritesOK += b.WritesOK
			lv.Totals.WritesJournaled += b.WritesJournaled
			lv.Totals.WritesRefused += b.WritesRefused
		}
		v.Lanes = append(v.Lanes, lv)
	}
	v.LanesBottom = v.LanesTop + len(tl.Nodes)*(laneH+laneGap) - laneGap
	v.Height = v.LanesBottom + axisH
	v.TickBottom, v.TickLabelY = v.LanesBottom+4, v.LanesBottom+15

	// Fault labels go in the rows above the lanes; a label that would run
	// into the previous one in its row moves to the next row (and is left
	// out, keeping its shaded window and tooltip, if no row has room).
	rowEnd := make([]float64, labelRows)
	for i := range rowEnd {
		rowEnd[i] = -1
	}
	for _, f := range tl.Faults {
		fv := faultView{Window: f, X: xOf(f.StartMs), W: max(1, xOf(f.EndMs)-xOf(f.StartMs)),
			Y: v.LanesTop - 2, H: v.LanesBottom - v.LanesTop + 4, LaneY: laneY[f.Node] - 2, LaneH: laneH + 4}
		label := f.Kind + " " + f.Node
		w := charWidthPx * float64(len(label))
		x := min(fv.X+2, float64(v.PlotRight)-w)
		for row := range rowEnd {
			if x > rowEnd[row]+4 {
				fv.Label, fv.LabelX, fv.LabelY = label, x, float64((row+1)*labelRowH-3)
				rowEnd[row] = x + w
				break
			}
		}
		v.Faults = append(v.Faults, fv)
	}
	for _, e := range tl.Events {
		v.Events = append(v.Events, eventView{Event: e, X: xOf(e.AtMs), Y: float64(laneY[e.Node]), Y2: float64(laneY[e.Node] + laneH)})
	}
	// Ticks at a round step that leaves at least 70 px between labels.
	step := int64(1000)
	for _, s := range []int64{1000, 2000, 5000, 10000, 15000, 30000, 60000} {
		step = s
		if plotW*float64(s)/float64(span) >= 70 {
			break
		}
	}
	for t := int64(0); t <= span; t += step {
		v.Ticks = append(v.Ticks, tickView{X: xOf(t), Label: fmt.Sprintf("%ds", t/1000)})
	}
	return v
}

// stack splits a bar of height h (for max requests) into colored parts,
// drawn bottom up.
func stack(top float64, h, maxN int, ns []int, classes []string) []bar {
	var out []bar
	y := top + float64(h)
	for i, n := range ns {
		if n <= 0 {
			continue
		}
		bh := float64(h) * float64(n) / float64(maxN)
		y -= bh
		out = append(out, bar{Class: classes[i], Y: y, H: bh})
	}
	return out
}
