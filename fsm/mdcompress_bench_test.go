package fsm

import (
	"testing"

	"github.com/heureka-registry/heureka/bench"
)

// BenchmarkMetadataCompression measures one workload instance's metadata
// block (about 1 KB, as Spring Cloud's client registers it in heureka
// bench): compressing it as a large registry's put does, inflating it as
// every encoding of the record into a document does, and checking it as
// a snapshot's reader does (the CRC), beside inflating it to check it.
//
//	go test ./fsm -run XXX -bench MetadataCompression
func BenchmarkMetadataCompression(b *testing.B) {
	m := MetadataOf(bench.Metadata(42, bench.DefaultWorkload().MetadataBytes))
	c := compressMetadata(m)
	if !c.compressed() {
		b.Fatal("the workload's metadata did not compress")
	}
	b.Run("compress", func(b *testing.B) {
		for b.Loop() {
			compressMetadata(m)
		}
		b.ReportMetric(float64(len(m.b)), "block-bytes")
		b.ReportMetric(float64(len(c.b)), "compressed-bytes")
	})
	b.Run("inflate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.canonical()
		}
	})
	b.Run("check-crc", func(b *testing.B) {
		for b.Loop() {
			if err := checkCompressed(c.b); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check-by-inflating", func(b *testing.B) {
		for b.Loop() {
			s, err := inflateBlock(c.b)
			if err != nil || !canonicalMap(bytesOf(s)) {
				b.Fatal(err)
			}
		}
	})
}
