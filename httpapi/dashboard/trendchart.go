package dashboard

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Trend charts are inline SVG line charts drawn on the server: no script,
// no external asset. The x axis ends at the time of the page and reaches
// back as far as the sampler's ring.

const (
	chartW, chartH         = 560, 150
	chartLeft, chartRight  = 44, 8
	chartTop, chartBottom  = 10, 22
	chartPlotW, chartPlotH = chartW - chartLeft - chartRight, chartH - chartTop - chartBottom
	chartYTicks            = 4
)

// trendChart is one chart the dashboard template draws.
type trendChart struct {
	ID, Title string
	W, H      int
	Left      int
	PlotRight int
	PlotTop   int
	PlotBot   int
	Lines     []trendLine
	YTicks    []chartTick
	XTicks    []chartTick
	// Empty is set until two samples exist.
	Empty bool
	// Note is a short caption under the title.
	Note string
	top  float64
}

// trendLine is one series: its polylines (split where it has no value),
// the legend label, and a summary for readers and tests.
type trendLine struct {
	Series, Class, Label string
	Polylines            []string
	// Last, Min and Max are formatted values ("" when never known).
	Last, Min, Max string
	N              int
}

type chartTick struct {
	Pos   float64
	Label string
	// Anchor is the SVG text-anchor: "now" at the right edge ends there.
	Anchor string
}

// seriesDef names a series and how to read it from a point.
type seriesDef struct {
	series, class, label string
	get                  func(p trendPoint) float64
}

// buildChart draws the given series over the window ending at now.
func buildChart(id, title, note string, pts []trendPoint, now time.Time, window time.Duration, fixedMax float64, defs ...seriesDef) trendChart {
	c := trendChart{ID: id, Title: title, Note: note, W: chartW, H: chartH, Left: chartLeft, PlotRight: chartW - chartRight,
		PlotTop: chartTop, PlotBot: chartH - chartBottom, Empty: len(pts) < 2}
	top := fixedMax
	if top <= 0 {
		for _, d := range defs {
			for _, p := range pts {
				if v := d.get(p); !math.IsNaN(v) && v > top {
					top = v
				}
			}
		}
		top = niceCeil(top)
	}
	c.top = top
	start := now.Add(-window)
	x := func(t time.Time) float64 {
		return float64(chartLeft) + float64(chartPlotW)*float64(t.Sub(start))/float64(window)
	}
	y := func(v float64) float64 { return float64(chartTop) + float64(chartPlotH)*(1-v/top) }
	for _, d := range defs {
		l := trendLine{Series: d.series, Class: d.class, Label: d.label}
		var cur []string
		lo, hi, last := math.Inf(1), math.Inf(-1), math.NaN()
		flush := func() {
			if len(cur) > 0 {
				l.Polylines = append(l.Polylines, strings.Join(cur, " "))
			}
			cur = nil
		}
		for _, p := range pts {
			v := d.get(p)
			if math.IsNaN(v) || p.At.Before(start) {
				flush()
				continue
			}
			cur = append(cur, pixel(x(p.At))+","+pixel(y(v)))
			lo, hi, last = math.Min(lo, v), math.Max(hi, v), v
			l.N++
		}
		flush()
		if l.N > 0 {
			l.Last, l.Min, l.Max = num(last), num(lo), num(hi)
		}
		c.Lines = append(c.Lines, l)
	}
	for i := 0; i <= chartYTicks; i++ {
		v := top * float64(i) / chartYTicks
		c.YTicks = append(c.YTicks, chartTick{Pos: y(v), Label: num(v)})
	}
	// Ticks count time back from now, at most one per 60 px: a step from
	// the list, or whole hours for the long windows of a long
	// --dashboard-trend-interval (360 samples a day apart make a year).
	step := time.Duration(math.Ceil(60*float64(window)/chartPlotW/float64(time.Hour))) * time.Hour
	for _, s := range []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 10 * time.Minute,
		15 * time.Minute, 30 * time.Minute, time.Hour} {
		if float64(chartPlotW)*float64(s)/float64(window) >= 60 {
			step = s
			break
		}
	}
	for back := time.Duration(0); back <= window; back += step {
		tick := chartTick{Pos: x(now.Add(-back)), Label: "now", Anchor: "end"}
		if back > 0 {
			tick.Label, tick.Anchor = "-"+agoLabel(back), "middle"
		}
		c.XTicks = append(c.XTicks, tick)
	}
	return c
}

// belowLine is the part of a series at or under another (renewals under
// the threshold), drawn over it in red.
func belowLine(pts []trendPoint, now time.Time, window time.Duration, top float64, get, limit func(trendPoint) float64) trendLine {
	l := trendLine{Series: "below", Class: "below", Label: "at or below threshold"}
	start := now.Add(-window)
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			l.Polylines = append(l.Polylines, strings.Join(cur, " "))
		}
		cur = nil
	}
	for _, p := range pts {
		v, lim := get(p), limit(p)
		if math.IsNaN(v) || math.IsNaN(lim) || lim <= 0 || v > lim || p.At.Before(start) {
			flush()
			continue
		}
		x := float64(chartLeft) + float64(chartPlotW)*float64(p.At.Sub(start))/float64(window)
		y := float64(chartTop) + float64(chartPlotH)*(1-v/top)
		cur = append(cur, pixel(x)+","+pixel(y))
		l.N++
	}
	flush()
	return l
}

// agoLabel writes a tick's distance back in time: 30s, 1m, 1m30s, 10m, 1h.
func agoLabel(d time.Duration) string {
	h, m, sec := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if sec > 0 || b.Len() == 0 {
		fmt.Fprintf(&b, "%ds", sec)
	}
	return b.String()
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// pixel rounds a polyline coordinate to a whole pixel of the chart: 360
// points per line stay a few kilobytes.
func pixel(v float64) string { return strconv.Itoa(int(math.Round(v))) }

// num formats a value for a label: integers plainly, small values with a
// decimal or two.
func num(v float64) string {
	switch {
	case v >= 100 || v == math.Trunc(v):
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// dashboardTrends builds the dashboard's four charts.
func dashboardTrends(pts []trendPoint, now time.Time, window time.Duration) []trendChart {
	renewals := buildChart("trend-renewals", "Renewals per minute", "against the self-preservation threshold", pts, now, window, 0,
		seriesDef{"renews", "s1", "renewals / min", func(p trendPoint) float64 { return p.RenewsPerMin }},
		seriesDef{"threshold", "thr", "threshold", func(p trendPoint) float64 { return p.Threshold }})
	renewals.Lines = append(renewals.Lines, belowLine(pts, now, window, renewals.top,
		func(p trendPoint) float64 { return p.RenewsPerMin }, func(p trendPoint) float64 { return p.Threshold }))
	return []trendChart{
		renewals,
		buildChart("trend-registry", "Registrations and cancels", "per minute, as applied on this node", pts, now, window, 0,
			seriesDef{"registrations", "s1", "registrations / min", func(p trendPoint) float64 { return p.RegistrationsPerMin }},
			seriesDef{"cancels", "s2", "cancels / min", func(p trendPoint) float64 { return p.CancelsPerMin }}),
		buildChart("trend-cache", "Response cache hit ratio", "% of reads answered from the cache", pts, now, window, 100,
			seriesDef{"cache_hit_ratio", "s1", "hit ratio %", func(p trendPoint) float64 { return p.CacheHitRatio }}),
		buildChart("trend-commit", "Raft commit latency", "mean ms per interval (measured by the leader)", pts, now, window, 0,
			seriesDef{"commit_ms", "s1", "commit ms", func(p trendPoint) float64 { return p.CommitMs }}),
	}
}
