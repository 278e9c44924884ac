package httpapi

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/heureka-registry/heureka/internal/runtime/collect"
)

// gatherSink collects s through a registry of its own, keyed by family name.
func gatherSink(t *testing.T, s *raftSink) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(s); err != nil {
		t.Fatal(err)
	}
	fams, err := collect.Gather(reg)
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	return fams
}

func TestRaftSink_SeriesKindsAndLabels(t *testing.T) {
	s := newRaftSink()
	s.AddSample([]string{"heureka", "raft", "commitTime"}, 0.5)
	s.AddSample([]string{"heureka", "raft", "commitTime"}, 7)
	s.AddSampleWithLabels([]string{"heureka", "raft", "replication", "appendEntries", "rpc"}, 2,
		[]gometrics.Label{{Name: "peer_id", Value: "n2"}})
	s.AddSampleWithLabels([]string{"heureka", "raft", "replication", "appendEntries", "rpc"}, 3,
		[]gometrics.Label{{Name: "peer_id", Value: "n3"}})
	s.IncrCounter([]string{"heureka", "raft", "apply"}, 2)
	s.IncrCounter([]string{"heureka", "raft", "apply"}, 3)
	s.SetGauge([]string{"heureka", "raft", "boltdb", "freePageBytes"}, 4096)
	s.SetGauge([]string{"heureka", "raft", "boltdb", "freePageBytes"}, 8192)
	// A name reported as another kind keeps its first kind, without a panic.
	s.IncrCounter([]string{"heureka", "raft", "commitTime"}, 1)
	s.AddSample([]string{"heureka", "raft", "apply"}, 1)
	s.IncrCounter([]string{"heureka", "raft", "boltdb", "freePageBytes"}, 1)
	s.EmitKey([]string{"heureka", "raft", "ignored"}, 1)

	fams := gatherSink(t, s)
	commit := fams["heureka_raft_commitTime"]
	if commit.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("commitTime type %v, want histogram", commit.GetType())
	}
	if h := commit.Metric[0].GetHistogram(); h.GetSampleCount() != 2 || h.GetSampleSum() != 7.5 {
		t.Errorf("commitTime count %d sum %v, want 2 and 7.5", h.GetSampleCount(), h.GetSampleSum())
	}
	if n := len(fams["heureka_raft_replication_appendEntries_rpc"].GetMetric()); n != 2 {
		t.Errorf("per-peer series: %d, want 2", n)
	}
	if v := fams["heureka_raft_apply"].Metric[0].GetCounter().GetValue(); v != 5 {
		t.Errorf("apply counter %v, want 5", v)
	}
	if v := fams["heureka_raft_boltdb_freePageBytes"].Metric[0].GetGauge().GetValue(); v != 8192 {
		t.Errorf("gauge %v, want 8192", v)
	}
	if _, ok := fams["heureka_raft_ignored"]; ok {
		t.Error("EmitKey made a series")
	}
}

// A report of a series the sink holds allocates nothing: raft reports
// several per write.
func TestRaftSink_KnownSeriesAllocatesNothing(t *testing.T) {
	s := newRaftSink()
	key := []string{"heureka", "raft", "fsm", "apply"}
	labels := []gometrics.Label{{Name: "type", Value: "register"}}
	s.AddSampleWithLabels(key, 1, labels)
	s.IncrCounter([]string{"heureka", "raft", "apply"}, 1)
	if n := testing.AllocsPerRun(200, func() {
		s.AddSampleWithLabels(key, 0.3, labels)
		s.IncrCounter([]string{"heureka", "raft", "apply"}, 1)
	}); n != 0 {
		t.Errorf("%v allocations per report, want 0", n)
	}
}

// The declared series are there before raft reports anything (a
// follower's dashboard and alerts find them before its first apply).
func TestRaftSink_DeclaredSeriesExistUpFront(t *testing.T) {
	bridgeRaftMetrics(hclog.NewNullLogger())
	fams, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range fams {
		switch f.GetName() {
		case "heureka_raft_fsm_apply", "heureka_raft_snapshot_persist", "heureka_raft_restore":
			found++
		}
	}
	if found != 3 {
		t.Errorf("found %d of 3 declared series", found)
	}
}
