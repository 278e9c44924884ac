package cache

import (
	"bytes"
	stdflate "compress/flate"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"testing"

	"github.com/heureka-registry/heureka/internal/testkit/instance"
)

// appDocument is the JSON of an application of n instances with about
// 1 KiB of metadata each (realistic keys, then hex filler, which
// compresses about as much as real metadata does), as a Eureka client's
// codec writes it.
func appDocument(n int) []byte {
	var ins []any
	for i := range n {
		md := map[string]any{"version": fmt.Sprintf("1.%d.%d", i%17, i%101), "zone": "zone-a", "management.port": "8081"}
		for k := 0; k < 8; k++ {
			h := fnv.New64a()
			var v []byte
			for c := 0; len(v) < 120; c++ {
				fmt.Fprintf(h, "%d/%d/%d", i, k, c)
				v = fmt.Appendf(v, "%016x", h.Sum64())
			}
			md[fmt.Sprintf("tag.%d", k)] = string(v[:120])
		}
		ins = append(ins, instance.Doc(instance.Fields{ID: fmt.Sprintf("orders-%d", i), App: "ORDERS",
			Host: fmt.Sprintf("10-0-%d-%d.internal", i/250, i%250), IP: fmt.Sprintf("10.0.%d.%d", i/250, i%250),
			Status: "UP", VIP: "orders", RenewalSecs: 30, LeaseSecs: 90, Metadata: md, Timestamp: "1764892800000"}))
	}
	b, err := json.Marshal(map[string]any{"application": map[string]any{"name": "ORDERS", "instance": ins}})
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
