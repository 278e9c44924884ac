package fsm

import (
	"errors"
	"testing"
	"time"
)

// TestJournaledChange_RealTimeOrderAgainstARegistration: a metadata change
// journaled by a cut-off node on the registration it saw (RegisteredAt)
// loses to a registration made after it was acknowledged, and applies to
// one made before it, which the cut-off node could not see. Without
// JournaledAt any other registration stands.
func TestJournaledChange_RealTimeOrderAgainstARegistration(t *testing.T) {
	const seen, again, journaled = 1000, 2000, 3000
	cases := []struct {
		name         string
		registeredAt int64 // when the instance was registered again
		journaledAt  int64
		applies      bool
	}{
		{"same registration", seen, journaled, true},
		{"registered again before the change", again, journaled, true},
		{"registered again after the change", 4000, journaled, false},
		{"registered again in the same millisecond", journaled, journaled, false},
		{"no acknowledgement time", again, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := New(time.Minute, nil)
			entries := [][]byte{mustEncode(t, CmdRegister, seen, &RegisterBody{Instance: testInstance("APP", "i1", StatusUp, 1)})}
			if c.registeredAt != seen {
				entries = append(entries, mustEncode(t, CmdRegister, c.registeredAt, &RegisterBody{Instance: testInstance("APP", "i1", StatusUp, 2)}))
			}
			entries = append(entries, mustEncode(t, CmdMetadata, 5000, &MetadataBody{App: "APP", ID: "i1",
				Metadata: map[string]string{"k": "v"}, RegisteredAt: seen, JournaledAt: c.journaledAt}))
			res := applyAll(f, entries)
			last, _ := res[len(res)-1].(error)
			var got string
			f.Read(func(r *Registry) { got = mdGet(r.Get("APP", "i1").Instance.Metadata, "k") })
			if c.applies {
				if last != nil || got != "v" {
					t.Fatalf("refused (%v, metadata k=%q), want applied", last, got)
				}
				return
			}
			if !errors.Is(last, ErrInstanceNotFound) || got != "" {
				t.Fatalf("applied (%v, metadata k=%q), want refused: the newer registration stands", last, got)
			}
		})
	}
}
