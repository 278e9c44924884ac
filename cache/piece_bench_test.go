package cache

import (
	"bytes"
	stdflate "compress/flate"
	"encoding/json"
	"io"
	"testing"

	"github.com/heureka-registry/heureka/bench"
)

// appDocument is the JSON of an application of n instances as the
// bench registers them (about 1 KiB of metadata each).
func appDocument(n int) []byte {
	w := bench.DefaultWorkload()
	w.Apps = 1
	ins := make([]json.RawMessage, n)
	for i := range ins {
		s := w.Spec(i)
		s.DirtyMillis = 1764892800000
		ins[i] = bench.InstanceJSON(s)
	}
	b, err := json.Marshal(map[string]any{"application": map[string]any{"name": w.AppName(0), "instance": ins}})
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkPiece compresses and inflates an application of 20 instances
// as a piece, beside the standard library's flate at BestSpeed (the
// pieces' compressor before): every change to the application
// recompresses it, and every plain read of it inflates it.
//
//	go test ./cache -run '^$' -bench Piece -benchmem
func BenchmarkPiece(b *testing.B) {
	doc := appDocument(20)
	var z bytes.Buffer
	std, _ := stdflate.NewWriter(&z, stdflate.BestSpeed)
	b.Run("compress/stdlib-bestspeed", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			z.Reset()
			std.Reset(&z)
			_, _ = std.Write(doc)
			_ = std.Flush()
		}
		b.ReportMetric(float64(z.Len()), "bytes/piece")
	})
	p := NewPiece(doc) // the inflate runs' piece, whichever runs are asked for
	b.Run("compress/piece", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			p = NewPiece(doc)
		}
		b.ReportMetric(float64(len(p.z)), "bytes/piece")
	})
	out := bytes.NewBuffer(make([]byte, 0, len(doc)))
	r := stdflate.NewReader(nil)
	b.Run("inflate/stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			out.Reset()
			_ = r.(stdflate.Resetter).Reset(bytes.NewReader(p.stream()), nil)
			if _, err := io.Copy(out, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("inflate/piece", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			out.Reset()
			if _, err := p.writePlain(out); err != nil {
				b.Fatal(err)
			}
		}
	})
	if !bytes.Equal(out.Bytes(), doc) {
		b.Fatal("the piece inflated to other bytes")
	}
}
