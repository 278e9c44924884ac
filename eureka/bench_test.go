package eureka

import (
	"fmt"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

// benchEntries is 20 instances with about 1 KB of metadata each.
func benchEntries() []*fsm.Entry {
	entries := make([]*fsm.Entry, 20)
	for i := range entries {
		e := orderA()
		e.Instance.InstanceID = fmt.Sprintf("10.20.1.%d:order-service:8080", i)
		md := make(map[string]string, 16)
		for k := 0; k < 16; k++ {
			md[fmt.Sprintf("metadata_key.%02d", k)] = strings.Repeat("v", 48)
		}
		e.Instance.Metadata = fsm.MetadataOf(md)
		entries[i] = e
	}
	return entries
}

func benchmarkAppendApplication(b *testing.B, f Format) {
	entries := benchEntries()
	buf := AppendApplication(nil, f, "ORDER-SERVICE", entries)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendApplication(buf[:0], f, "ORDER-SERVICE", entries)
	}
}

func BenchmarkAppendApplicationJSON(b *testing.B) { benchmarkAppendApplication(b, JSON) }

func BenchmarkAppendApplicationXML(b *testing.B) { benchmarkAppendApplication(b, XML) }

func benchmarkDecodeInstance(b *testing.B, f Format) {
	body := AppendInstanceDoc(nil, f, benchEntries()[0])
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeInstance(body, f, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeInstanceJSON(b *testing.B) { benchmarkDecodeInstance(b, JSON) }

func BenchmarkDecodeInstanceXML(b *testing.B) { benchmarkDecodeInstance(b, XML) }
