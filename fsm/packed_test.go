package fsm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// packableCommands is randomCommands without the entries a leader never
// packs.
func packableCommands(t testing.TB, seed uint64, n int) [][]byte {
	var out [][]byte
	for _, e := range randomCommands(t, seed, n) {
		if Packable(TypeOf(e)) {
			out = append(out, e)
		}
	}
	return out
}

// A packed entry leaves the state its entries leave applied one by one
// under its index, with the same answer for each: packing changes how
// writes travel, never what they do.
func TestBatch_SameStateAsItsEntriesOneByOne(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		cmds := packableCommands(t, seed, 400)
		rng := rand.New(rand.NewPCG(seed, 7))
		packed, single := New(0, nil), New(0, nil)
		idx := uint64(0)
		for i := 0; i < len(cmds); {
			n := min(1+rng.IntN(40), len(cmds)-i)
			group := cmds[i : i+n]
			i += n
			idx++
			entry, err := EncodeBatch(group)
			if err != nil {
				t.Fatal(err)
			}
			res, ok := packed.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: entry}).(BatchResults)
			if !ok || len(res) != n {
				t.Fatalf("seed %d: batch answer %v", seed, res)
			}
			for k, e := range group {
				one := single.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: e})
				if got, _ := one.(error); !errors.Is(res[k], got) || (got == nil) != (res[k] == nil) {
					t.Fatalf("seed %d, entry %d of batch %d: packed answer %v, alone %v", seed, k, idx, res[k], got)
				}
			}
		}
		if packed.AppliedIndex() != idx || single.AppliedIndex() != idx {
			t.Fatalf("seed %d: applied %d and %d, want %d", seed, packed.AppliedIndex(), single.AppliedIndex(), idx)
		}
		if !sameState(packed.Export(), single.Export()) {
			t.Fatalf("seed %d: a packed log and the same entries one by one leave different states", seed)
		}
		if !bytes.Equal(snapshotBytes(t, packed), snapshotBytes(t, single)) {
			t.Fatalf("seed %d: equal states encode to different bytes", seed)
		}
	}
}

// The FSM applies a packed entry as one step: the first of its changes an
// observer hears of already finds the whole batch applied, and every
// change carries the entry's index.
func TestBatch_NoReaderSeesPartOfABatch(t *testing.T) {
	f := New(0, nil)
	var seen []int
	var indexes []uint64
	f.Observe(func(c Change) {
		indexes = append(indexes, c.Index)
		f.Read(func(r *Registry) { seen = append(seen, r.Count()) })
	})
	entry, err := EncodeBatch([][]byte{
		mustEncode(t, CmdRegister, 1, &RegisterBody{Instance: testInstance("A", "a-1", StatusUp, 1)}),
		mustEncode(t, CmdRegister, 1, &RegisterBody{Instance: testInstance("A", "a-2", StatusUp, 1)}),
		mustEncode(t, CmdCancel, 1, &KeyBody{App: "B", ID: "none"}),
		mustEncode(t, CmdRegister, 1, &RegisterBody{Instance: testInstance("B", "b-1", StatusUp, 1)}),
	})
	if err != nil {
		t.Fatal(err)
	}
	res := f.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: entry}).(BatchResults)
	if res[0] != nil || res[1] != nil || !errors.Is(res[2], ErrInstanceNotFound) || res[3] != nil {
		t.Fatalf("answers %v: each packed write gets its own", res)
	}
	if !reflect.DeepEqual(seen, []int{3, 3, 3, 3}) || !reflect.DeepEqual(indexes, []uint64{7, 7, 7, 7}) {
		t.Fatalf("observers saw counts %v at indexes %v, want the whole batch at 7 each time", seen, indexes)
	}
	var version uint64
	f.Read(func(r *Registry) { version = r.Version() })
	if version != 7 {
		t.Fatalf("registry version %d, want the batch's index", version)
	}
}

// Only client writes are packed, a batch never packs a batch, and what
// cannot be read as a batch is refused whole.
func TestBatch_Shapes(t *testing.T) {
	reg := mustEncode(t, CmdRegister, 1, &RegisterBody{Instance: testInstance("A", "a-1", StatusUp, 1)})
	mode := mustEncode(t, CmdSetMode, 1, &ModeBody{Mode: "cp"})
	if _, err := EncodeBatch([][]byte{reg, mode}); !errors.Is(err, ErrBadCommand) {
		t.Errorf("a set-mode packed: %v", err)
	}
	if _, err := EncodeBatch(nil); !errors.Is(err, ErrBadCommand) {
		t.Errorf("an empty batch: %v", err)
	}
	batch, err := EncodeBatch([][]byte{reg, reg})
	if err != nil {
		t.Fatal(err)
	}
	if cmds, err := DecodeEntry(batch); err != nil || len(cmds) != 2 || cmds[1].Type != CmdRegister {
		t.Fatalf("DecodeEntry of a batch: %v, %v", cmds, err)
	}
	if cmds, err := DecodeEntry(reg); err != nil || len(cmds) != 1 {
		t.Fatalf("DecodeEntry of a registration: %v, %v", cmds, err)
	}
	if _, err := Decode(batch); !errors.Is(err, ErrBadCommand) {
		t.Errorf("Decode (what a peer's entries go through) took a batch: %v", err)
	}
	nested := append([]byte(nil), batch[:headerLen]...)
	nested = append(nested, byte(len(batch)))
	nested = append(nested, batch...)
	for name, e := range map[string][]byte{
		"cut short":     batch[:len(batch)-3],
		"length beyond": append(append([]byte(nil), batch[:headerLen]...), 0xff, 0x01, 1, 2),
		"header only":   batch[:headerLen],
		"nested":        nested,
	} {
		if _, err := DecodeEntry(e); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A packed entry that cannot be read stops the node, as any entry does:
// skipping it would let the node diverge from its peers.
func TestBatch_DamagedEntryPanics(t *testing.T) {
	reg := mustEncode(t, CmdRegister, 1, &RegisterBody{Instance: testInstance("A", "a-1", StatusUp, 1)})
	batch, err := EncodeBatch([][]byte{reg, reg})
	if err != nil {
		t.Fatal(err)
	}
	f := New(0, nil)
	defer func() {
		if recover() == nil {
			t.Fatal("a damaged batch was applied")
		}
		if f.AppliedIndex() != 0 {
			t.Fatal("part of a damaged batch was applied")
		}
	}()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: batch[:len(batch)-5]})
}
