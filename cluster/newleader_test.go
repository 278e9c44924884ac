package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// TestNewLeaderAnswersNotFoundOnlyOnceCaughtUp: a leader that has not yet
// applied its post-election barrier may lack an instance acknowledged
// before (a leader killed, restarted and elected again holds only its
// snapshot until then). A cancel or a heartbeat of such an instance must
// wait for the barrier, not answer 404 from what the leader has applied so
// far (which broke linearizability in cp mode: a cancel answered "not
// found" for an instance registered a moment before the leader was
// killed). The window is made here by marking the single node's barrier
// as not yet applied while the registration is applied behind the checks'
// backs.
func TestNewLeaderAnswersNotFoundOnlyOnceCaughtUp(t *testing.T) {
	for _, op := range []string{"cancel", "renew"} {
		t.Run(op, func(t *testing.T) {
			n := singleNode(t, DefaultLeaseConfig())
			term := n.rd.leaderTerm.Load()
			if term == 0 {
				t.Fatal("the single node never applied its post-election barrier")
			}
			n.rd.leaderTerm.Store(0) // as if its barrier were still being applied
			ctx := context.Background()
			done := make(chan error, 1)
			go func() {
				if op == "cancel" {
					entry, err := fsm.Encode(fsm.CmdCancel, &fsm.KeyBody{App: "A", ID: "1"})
					if err != nil {
						done <- err
						return
					}
					_, err = n.Apply(ctx, entry)
					done <- err
					return
				}
				done <- n.Renew(ctx, "A", "1", 0)
			}()
			select {
			case err := <-done:
				t.Fatalf("%s answered %v before the leader caught up", op, err)
			case <-time.After(200 * time.Millisecond):
			}
			// The earlier term's registration, applied as the barrier
			// would apply it.
			entry, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: &fsm.Instance{
				InstanceID: "1", HostName: "1", App: "A", IPAddr: "10.0.0.1", Status: fsm.StatusUp,
				RenewalIntervalSecs: 30, DurationSecs: 90, LastDirtyTimestamp: time.Now().UnixMilli(),
			}})
			if err != nil {
				t.Fatal(err)
			}
			if err := fsm.Stamp(entry, time.Now().UnixMilli()); err != nil {
				t.Fatal(err)
			}
			if err := n.raft.Apply(entry, 5*time.Second).Error(); err != nil {
				t.Fatal(err)
			}
			n.rd.leaderTerm.Store(term)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s of an instance the earlier term registered: %v", op, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s still waiting 10 s after the leader caught up", op)
			}
			// And once caught up, an instance nobody registered is not found.
			err = n.Renew(ctx, "A", "nobody", 0)
			if !errors.Is(err, fsm.ErrInstanceNotFound) {
				t.Fatalf("renew of an unknown instance: %v, want not found", err)
			}
		})
	}
}
