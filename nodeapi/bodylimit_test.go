package nodeapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

// countingBackend records how many entries each ApplyBatch brought.
type countingBackend struct {
	fakeBackend
	batches []int
}

func (b *countingBackend) ApplyBatch(entries [][]byte, forwarded bool) ([]error, uint64, error) {
	b.batches = append(b.batches, len(entries))
	return make([]error, len(entries)), uint64(len(entries)), nil
}

// modeEntry is a valid set_mode command whose framed size (uvarint length
// and bytes) is exactly size.
func modeEntry(t *testing.T, size int) []byte {
	t.Helper()
	for pad := size; pad > 0; pad-- {
		e, err := fsm.Encode(fsm.CmdSetMode, fsm.ModeBody{Mode: strings.Repeat("x", pad)})
		if err != nil {
			t.Fatal(err)
		}
		if len(binary.AppendUvarint(nil, uint64(len(e))))+len(e) == size {
			return e
		}
	}
	t.Fatalf("no entry of framed size %d", size)
	return nil
}

// A batch larger than the body limit must be refused whole. It is cut at
// the limit instead, and when the cut falls between entries the leader
// applies the first ones while the caller is told the call failed (the
// answer names fewer entries than it sent), so it retries them.
func TestApplyBatch_OverTheBodyLimitIsRefusedWhole(t *testing.T) {
	b := &countingBackend{fakeBackend: fakeBackend{leader: true}}
	c, addr, _ := serve(t, b, "a-secret")
	var entries [][]byte
	for range 8 {
		entries = append(entries, modeEntry(t, maxBody/8)) // exactly maxBody in all
	}
	entries = append(entries, modeEntry(t, 1000)) // one past the limit
	if got := len(EncodeEntries(entries)); got != maxBody+1000 {
		t.Fatalf("test setup: batch of %d bytes", got)
	}
	_, _, err := c.ApplyBatch(context.Background(), addr, entries)
	t.Logf("caller's answer: %v", err)
	for _, n := range b.batches {
		if n != len(entries) {
			t.Fatalf("the leader applied %d of the %d entries of a batch over the body limit (caller told: %v)", n, len(entries), err)
		}
	}
}

type renewRecorder struct {
	fakeBackend
	got int
}

func (b *renewRecorder) RenewBatch(batch []byte, kind RenewBatchKind) ([]byte, error) {
	b.got = len(batch)
	return []byte{0}, nil
}

// A renewal batch over the limit reaches the backend cut short, and is
// answered 200 as if whole.
func TestRenewBatch_OverTheBodyLimitIsRefused(t *testing.T) {
	b := &renewRecorder{fakeBackend: fakeBackend{leader: true}}
	c, addr, _ := serve(t, b, "a-secret")
	batch := bytes.Repeat([]byte{1}, maxBody+10)
	if _, err := c.RenewBatch(context.Background(), addr, RenewAnswered, batch); err == nil {
		t.Fatalf("renew batch of %d bytes answered 200; the backend was given %d bytes", len(batch), b.got)
	}
}
