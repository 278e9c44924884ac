package cluster

import (
	"errors"
	"reflect"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

func TestRenewBatchEncoding_RoundTrip(t *testing.T) {
	in := []renewRequest{{App: "A", ID: "h:a:1"}, {App: "ÄPP", ID: "", LastDirtyTimestamp: 1718000000123}, {App: "B", ID: "x", LastDirtyTimestamp: -1}}
	out, err := decodeRenewBatch(encodeRenewBatch(in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %v %+v", err, out)
	}
	if out, err := decodeRenewBatch(nil); err != nil || len(out) != 0 {
		t.Fatalf("empty batch: %v %v", out, err)
	}
}

func FuzzDecodeRenewBatch(f *testing.F) {
	f.Add(encodeRenewBatch([]renewRequest{{App: "A", ID: "1", LastDirtyTimestamp: 5}}))
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		reqs, err := decodeRenewBatch(data)
		if err != nil {
			if !errors.Is(err, fsm.ErrBadCommand) {
				t.Fatalf("error not marked bad command: %v", err)
			}
			return
		}
		again, err := decodeRenewBatch(encodeRenewBatch(reqs))
		if err != nil || len(again) != len(reqs) {
			t.Fatalf("re-encoding failed: %v", err)
		}
	})
}

func TestRenewResultBytes(t *testing.T) {
	for err, want := range map[error]byte{nil: renewOK, fsm.ErrInstanceNotFound: renewNotFound, ErrNotLeader: renewNotLeader, errors.New("x"): renewFailed} {
		if got := renewResultByte(err); got != want {
			t.Fatalf("%v -> %d, want %d", err, got, want)
		}
	}
}

// TestMem_RenewAtUnreachableLeaderIsNoLeader checks that a heartbeat a
// follower passes to a leader that does not answer (it just died, or its
// HTTP is cut) fails as ErrNoLeader, which clients get as a 503 and retry
// elsewhere, not as an unclassified error (a 500).
func TestMem_RenewAtUnreachableLeaderIsNoLeader(t *testing.T) {
	c := startMemCluster(t, 3, ModeAP, nil)
	leader := c.leader()
	f := c.followers()[0]
	c.net.mu.Lock()
	c.net.cut[leader.self.HTTPAddr] = true // HTTP only: Raft keeps its leader
	c.net.mu.Unlock()
	err := f.Renew(t.Context(), "NOSUCH", "n-1", 0)
	if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("renew through %s at an unreachable leader: %v, want ErrNoLeader", f.ID(), err)
	}
}
