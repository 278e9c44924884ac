package fsm

import (
	"bytes"
	"io"
	"testing"
)

// FuzzReadSnapshot: any bytes either fail to read with an error or restore
// into an FSM without panicking, and what was restored exports, encodes and
// reads back.
func FuzzReadSnapshot(f *testing.F) {
	for seed := uint64(1); seed <= 3; seed++ {
		fs := New(0, nil)
		applyAll(fs, randomCommands(f, seed, 40))
		f.Add(snapshotBytes(f, fs))
		f.Add(snapshotBytesFormat(f, fs, snapshotFormatMsgpackEntries))
	}
	f.Add(snapshotBytes(f, New(0, nil)))
	f.Add(append([]byte(nil), snapshotMagic...))
	f.Add(append(append([]byte(nil), snapshotMagic...), SnapshotFormat, 0x80))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ReadSnapshot(bytes.NewReader(data)); err != nil {
			return
		}
		fs := New(0, nil)
		if err := fs.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatalf("ReadSnapshot accepted what Restore refuses: %v", err)
		}
		var buf bytes.Buffer
		if err := fs.Export().Encode(&buf); err != nil {
			t.Fatalf("encode restored state: %v", err)
		}
		if _, err := ReadSnapshot(&buf); err != nil {
			t.Fatalf("restored state does not read back: %v", err)
		}
	})
}
