package lab

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sampleReport is a two-mode, three-node report with every kind of mark.
func sampleReport() *Report {
	mode := func(name string) ModeReport {
		tl := Timeline{BucketMs: 500, DurationMs: 20000,
			Faults: []Window{{Kind: "partition", Node: "n1", Span: Span{2000, 6000}},
				{Kind: "kill", Node: "n2", Span: Span{8000, 12000}}, {Kind: "restart", Node: "n2", Span: Span{12000, 13000}}},
			Events: []Event{{Kind: "journal replayed", Node: "n1", AtMs: 6500, N: 12}}}
		for _, id := range []string{"n1", "n2", "n3"} {
			nt := NodeTimeline{Node: id, Leader: []Span{{0, 2500}}}
			for i := 0; i < 40; i++ {
				nt.Buckets = append(nt.Buckets, Counts{ReadsOK: 8, ReadsStale: i % 3, ReadsRefused: i % 2, WritesOK: 7, WritesJournaled: i % 4, WritesRefused: 1})
			}
			tl.Nodes = append(tl.Nodes, nt)
		}
		return ModeReport{Mode: name, Timeline: tl, WritesAccepted: 300, WritesReplayed: 12,
			RecoverPartition: 1500 * time.Millisecond, RecoverKill: 900 * time.Millisecond,
			Rows: []Row{{Phase: "leader partitioned away", Side: "minority", Counts: Counts{ReadsOK: 40, ReadsStale: 40, WritesOK: 12, WritesJournaled: 12}}}}
	}
	return &Report{Nodes: 3, Modes: []ModeReport{mode("ap"), mode("cp")}}
}

func TestWriteHTMLDrawsEveryLaneFaultAndNumber(t *testing.T) {
	rep := sampleReport()
	var buf bytes.Buffer
	if err := rep.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	// Self-contained: nothing to fetch (the only URL is the SVG namespace).
	for _, bad := range []string{"https://", "<link", "src=", "url(", "@import", "<img"} {
		if strings.Contains(page, bad) {
			t.Errorf("page refers to an external asset (%q)", bad)
		}
	}
	if n, ns := strings.Count(page, "http://"), strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`); n != ns {
		t.Errorf("page holds %d URLs besides the SVG namespace", n-ns)
	}
	if got := strings.Count(page, `<g class="lane" data-node=`); got != 6 {
		t.Errorf("%d lanes, want 3 nodes x 2 modes", got)
	}
	if got := strings.Count(page, `<rect class="fault fault-`); got != 6 {
		t.Errorf("%d fault windows, want 3 per mode", got)
	}
	if got := strings.Count(page, `<g class="b" `); got != 2*3*40 {
		t.Errorf("%d buckets drawn, want %d", got, 2*3*40)
	}
	if !strings.Contains(page, `data-kind="partition" data-node="n1" data-start-ms="2000" data-end-ms="6000"`) {
		t.Error("partition window not drawn with its times")
	}
	// The partition window starts at 2 s of 20 s on a 548 px plot from x=44.
	if !strings.Contains(page, `data-end-ms="6000" x="98.8"`) {
		t.Error("partition window not at x=98.8")
	}
	if !strings.Contains(page, `<tr data-key="writes_replayed"><td>writes replayed (accepted without quorum)</td><td class="n" data-mode="ap">12</td>`) {
		t.Error("outcome table lacks the replayed writes")
	}
	// The embedded JSON is the report itself.
	m := regexp.MustCompile(`(?s)<script type="application/json" id="report-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no embedded JSON")
	}
	var back Report
	if err := json.Unmarshal([]byte(m[1]), &back); err != nil {
		t.Fatalf("embedded JSON: %v", err)
	}
	if back.Modes[1].Timeline.Nodes[2].Buckets[5] != rep.Modes[1].Timeline.Nodes[2].Buckets[5] {
		t.Error("embedded JSON differs from the report")
	}
}

func TestFaultLabelsDoNotShareARowWhenTheyWouldOverlap(t *testing.T) {
	rep := sampleReport()
	// Three windows within a second: the labels need both rows, the third
	// keeps its window but no label.
	rep.Modes[0].Timeline.Faults = []Window{{Kind: "partition", Node: "n1", Span: Span{1000, 1200}},
		{Kind: "kill", Node: "n1", Span: Span{1300, 1400}}, {Kind: "restart", Node: "n1", Span: Span{1500, 1600}}}
	v := viewMode(rep.Modes[0], 0)
	if v.Faults[0].LabelY == v.Faults[1].LabelY || v.Faults[1].Label == "" {
		t.Errorf("first two labels: %+v %+v, want one per row", v.Faults[0], v.Faults[1])
	}
	if v.Faults[2].Label != "" {
		t.Errorf("third label %q placed over the others", v.Faults[2].Label)
	}
}

func TestTimelineRecordsSpansAndReplays(t *testing.T) {
	tl := newTimeline([]string{"n1", "n2"}, 10*time.Millisecond)
	tl.observe("n1", true, 0)
	tl.count("n1", func(c *Counts) { c.ReadsOK++ })
	end := tl.fault("partition", "n1")
	tl.observe("n1", true, 3)
	tl.observe("n1", false, 5)
	tl.observe("n2", false, -1) // down: unknown journal, no replay
	tl.observe("n1", false, 0)
	end()
	got := tl.finish()
	if len(got.Nodes[0].Leader) != 1 || len(got.Nodes[1].Leader) != 0 {
		t.Errorf("leader spans %+v", got.Nodes)
	}
	if len(got.Events) != 1 || got.Events[0].N != 5 || got.Events[0].Node != "n1" {
		t.Errorf("events %+v, want one replay of 5 on n1", got.Events)
	}
	if len(got.Faults) != 1 || got.Faults[0].EndMs < got.Faults[0].StartMs {
		t.Errorf("faults %+v", got.Faults)
	}
	if len(got.Nodes[0].Buckets) != len(got.Nodes[1].Buckets) || got.Nodes[0].Buckets[0].ReadsOK != 1 {
		t.Errorf("buckets %+v / %+v", got.Nodes[0].Buckets, got.Nodes[1].Buckets)
	}
}
