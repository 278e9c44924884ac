package fsm

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// TestRegistry_ReplicatedRegisterOverride: a registration an Eureka peer
// replicated carries the peer's override, which replaces the stored one,
// and its status is not taken from the existing lease.
func TestRegistry_ReplicatedRegisterOverride(t *testing.T) {
	r := newReg()
	reg(r, 1, 1000, testInstance("A", "1", StatusUp, 10))
	if err := r.setOverride(2, 1100, &OverrideBody{App: "A", ID: "1", Status: StatusOutOfService}, &Change{}); err != nil {
		t.Fatal(err)
	}
	in := testInstance("A", "1", StatusUp, 20)
	in.OverriddenStatus = StatusDown
	c := &Change{Replicated: true}
	r.register(3, 1200, in, true, c)
	e := r.Get("A", "1")
	if e.Override != StatusDown || e.Instance.OverriddenStatus != StatusDown || e.Instance.Status != StatusDown {
		t.Fatalf("replicated override not stored: override %q instance %+v", e.Override, e.Instance)
	}
	d := r.Delta(0)
	if len(d) != 1 || !r.delta[deltaID{"A", "1"}].Replicated {
		t.Fatalf("delta of a replicated change must be marked: %+v", r.delta[deltaID{"A", "1"}])
	}
	if len(c.Keys) != 1 || c.Keys[0] != (KeyBody{App: "A", ID: "1"}) {
		t.Fatalf("change keys %+v", c.Keys)
	}

	// Without an override, a replicated UP stays UP even where the existing
	// lease is OUT_OF_SERVICE (the existing-lease rule is not applied).
	reg(r, 4, 1300, testInstance("B", "1", StatusOutOfService, 10))
	r.register(5, 1400, testInstance("B", "1", StatusUp, 20), true, &Change{Replicated: true})
	if got := r.Get("B", "1").Instance.Status; got != StatusUp {
		t.Fatalf("replicated status %s, want UP", got)
	}
	// A client's own re-registration keeps the existing lease's status.
	reg(r, 6, 1500, testInstance("C", "1", StatusOutOfService, 10))
	reg(r, 7, 1600, testInstance("C", "1", StatusUp, 20))
	if got := r.Get("C", "1").Instance.Status; got != StatusOutOfService {
		t.Fatalf("client status %s, want OUT_OF_SERVICE", got)
	}
}

// TestEncode_ReplicatedFlagVersions: a body without the Replicated flag is
// written as version 1 (an older node reads it); one with it as version 2,
// and both decode.
func TestEncode_ReplicatedFlagVersions(t *testing.T) {
	plain, err := Encode(CmdCancel, &KeyBody{App: "A", ID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Encode(CmdCancel, &KeyBody{App: "A", ID: "1", Replicated: true})
	if err != nil {
		t.Fatal(err)
	}
	if plain[1] != bodyVersion1 || rep[1] != bodyVersion2 {
		t.Fatalf("versions %d and %d, want 1 and 2", plain[1], rep[1])
	}
	for _, entry := range [][]byte{plain, rep} {
		cmd, err := Decode(entry)
		if err != nil {
			t.Fatal(err)
		}
		kb := cmd.Body.(*KeyBody)
		if kb.Replicated != (entry[1] == bodyVersion2) {
			t.Fatalf("version %d decoded Replicated=%v", entry[1], kb.Replicated)
		}
	}
	f := New(0, nil)
	var seen []Change
	f.Observe(func(c Change) { seen = append(seen, c) })
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: testInstance("A", "1", StatusUp, 1), Replicated: true})})
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: rep})
	if len(seen) != 2 || !seen[0].Replicated || !seen[1].Replicated {
		t.Fatalf("changes %+v", seen)
	}
}

// Encode's buffers are pooled: an entry it returned is the caller's, and
// later encodings, here concurrent ones of other sizes, leave it as it was.
func TestEncode_ReturnedEntryIsTheCallers(t *testing.T) {
	first, err := Encode(CmdCancel, &KeyBody{App: "FIRST", ID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(first)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				app := strings.Repeat("X", 1+(g*200+i)%300)
				e, err := Encode(CmdCancel, &KeyBody{App: app, ID: "2"})
				if err != nil {
					t.Error(err)
					return
				}
				cmd, err := Decode(e)
				if err != nil || cmd.Body.(*KeyBody).App != app {
					t.Errorf("entry of %d bytes decodes to %+v, %v", len(e), cmd.Body, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if !bytes.Equal(first, want) {
		t.Fatal("an earlier entry changed when later ones were encoded")
	}
}
