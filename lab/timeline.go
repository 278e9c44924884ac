package lab

import (
	"context"
	"sync"
	"time"
)

// Timeline is what happened during one mode's run, in time: what clients
// saw on each node in small buckets, when the faults were on, who believed
// it led, and when journals were replayed. Times are milliseconds since
// the workload started. The HTML report draws exactly this (and the JSON
// report carries it), so both always agree.
type Timeline struct {
	// BucketMs is the width of one bucket; DurationMs the whole run.
	BucketMs   int64 `json:"bucket_ms"`
	DurationMs int64 `json:"duration_ms"`
	// Nodes are in the cluster's order (n1, n2, ...).
	Nodes  []NodeTimeline `json:"nodes"`
	Faults []Window       `json:"faults"`
	Events []Event        `json:"events"`
}

// NodeTimeline is one node's lane.
type NodeTimeline struct {
	Node string `json:"node"`
	// Buckets[i] covers [i*BucketMs, (i+1)*BucketMs).
	Buckets []Counts `json:"buckets"`
	// Leader lists the spans in which this node reported itself Raft leader.
	Leader []Span `json:"leader"`
}

// Span is a time range [StartMs, EndMs).
type Span struct {
	StartMs int64 `json:"start_ms"`
	EndMs   int64 `json:"end_ms"`
}

// Window is a fault the lab injected: "partition" (the node cut off from
// every other), "kill" (the process killed) or "restart" (from the new
// process until every node agrees again).
type Window struct {
	Kind string `json:"kind"`
	Node string `json:"node"`
	Span
}

// Event is a moment: "journal replayed" (the node's AP journal of N
// writes emptied into the Raft log).
type Event struct {
	Kind string `json:"kind"`
	Node string `json:"node"`
	AtMs int64  `json:"at_ms"`
	N    int    `json:"n"`
}

// defaultBucket is the timeline's resolution: fine enough to see an
// election, coarse enough that a bucket holds several requests per node.
const defaultBucket = 500 * time.Millisecond

// timeline records a Timeline; its methods are safe for concurrent use.
type timeline struct {
	mu     sync.Mutex
	start  time.Time
	bucket time.Duration
	tl     Timeline
	lanes  map[string]*NodeTimeline
	open   map[string]int64 // node -> start of an open leader span
	// journal is the largest journal each node reported since it was last empty.
	journal map[string]int
}

func newTimeline(ids []string, bucket time.Duration) *timeline {
	t := &timeline{start: time.Now(), bucket: bucket, lanes: map[string]*NodeTimeline{},
		open: map[string]int64{}, journal: map[string]int{}}
	t.tl.BucketMs = bucket.Milliseconds()
	t.tl.Nodes = make([]NodeTimeline, len(ids))
	for i, id := range ids {
		t.tl.Nodes[i].Node = id
		t.lanes[id] = &t.tl.Nodes[i]
	}
	return t
}

func (t *timeline) now() int64 { return time.Since(t.start).Milliseconds() }

// count adds to the node's current bucket.
func (t *timeline) count(node string, add func(c *Counts)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lane := t.lanes[node]
	i := int(t.now() / t.tl.BucketMs)
	for len(lane.Buckets) <= i {
		lane.Buckets = append(lane.Buckets, Counts{})
	}
	add(&lane.Buckets[i])
}

// fault opens a fault window and returns the function that closes it.
func (t *timeline) fault(kind, node string) func() {
	t.mu.Lock()
	i := len(t.tl.Faults)
	t.tl.Faults = append(t.tl.Faults, Window{Kind: kind, Node: node, Span: Span{StartMs: t.now(), EndMs: -1}})
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		t.tl.Faults[i].EndMs = t.now()
		t.mu.Unlock()
	}
}

// observe records one poll of a node: whether it leads and its journal
// size (-1: unknown, the node is down).
func (t *timeline) observe(node string, leader bool, journal int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	start, open := t.open[node]
	switch {
	case leader && !open:
		t.open[node] = now
	case !leader && open:
		t.lanes[node].Leader = append(t.lanes[node].Leader, Span{StartMs: start, EndMs: now})
		delete(t.open, node)
	}
	if journal < 0 {
		return
	}
	if journal > t.journal[node] {
		t.journal[node] = journal
	}
	if journal == 0 && t.journal[node] > 0 {
		t.tl.Events = append(t.tl.Events, Event{Kind: "journal replayed", Node: node, AtMs: now, N: t.journal[node]})
		t.journal[node] = 0
	}
}

// poll asks every running node for its status every interval until ctx
// ends; a node that does not answer (killed) no longer leads.
func (t *timeline) poll(ctx context.Context, c *cluster, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		for _, nd := range c.nodes {
			if !nd.Running() {
				t.observe(nd.ID, false, -1)
				continue
			}
			if st, _, err := nd.Status(ctx); err == nil {
				t.observe(nd.ID, st.State == "Leader", st.JournalEntries)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// finish closes open spans and windows and pads every lane to the same
// number of buckets.
func (t *timeline) finish() Timeline {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.tl.DurationMs = now
	for node, start := range t.open {
		t.lanes[node].Leader = append(t.lanes[node].Leader, Span{StartMs: start, EndMs: now})
	}
	t.open = map[string]int64{}
	for i := range t.tl.Faults {
		if t.tl.Faults[i].EndMs < 0 {
			t.tl.Faults[i].EndMs = now
		}
	}
	n := int((now + t.tl.BucketMs - 1) / t.tl.BucketMs)
	for _, lane := range t.tl.Nodes {
		n = max(n, len(lane.Buckets))
	}
	for i := range t.tl.Nodes {
		for len(t.tl.Nodes[i].Buckets) < n {
			t.tl.Nodes[i].Buckets = append(t.tl.Nodes[i].Buckets, Counts{})
		}
		if t.tl.Nodes[i].Leader == nil {
			t.tl.Nodes[i].Leader = []Span{}
		}
	}
	if t.tl.Events == nil {
		t.tl.Events = []Event{}
	}
	return t.tl
}
