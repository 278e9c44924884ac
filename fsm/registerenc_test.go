package fsm

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestEncodeRegister_AsTheCodec: over random registrations (strings and
// integers around every msgpack length class, nil, empty and compressed
// metadata, replicated or not), the direct encoder writes exactly the
// bytes the codec writes, so the log, a follower's decoder and every
// older node read its entries as before.
func TestEncodeRegister_AsTheCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(i int, body *RegisterBody) {
		t.Helper()
		got, err := Encode(CmdRegister, body)
		if err != nil {
			t.Fatal(err)
		}
		want, err := encodeByCodec(CmdRegister, body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			at := 0
			for at < min(len(got), len(want)) && got[at] == want[at] {
				at++
			}
			t.Fatalf("case %d: direct and codec differ at byte %d of %d/%d:\ndirect %q\ncodec  %q", i, at, len(got), len(want),
				got[at:min(len(got), at+40)], want[at:min(len(want), at+40)])
		}
		if cap(got) != len(got) {
			t.Fatalf("case %d: entry of %d bytes in a buffer of %d: its size was counted wrong", i, len(got), cap(got))
		}
	}
	// A large registry holds blocks compressed; the log gets them whole.
	compressed := compressMetadata(MetadataOf(bulkyMetadata(rand.New(rand.NewPCG(1, 2)), 20, 200)))
	if !compressed.compressed() {
		t.Fatal("the test's metadata did not compress")
	}
	for i := range 3000 {
		in := randomInstance(rng)
		if rng.IntN(10) == 0 {
			in.Metadata = compressed
		}
		check(i, &RegisterBody{Instance: in, Replicated: rng.IntN(3) == 0})
	}
	check(-1, &RegisterBody{})
	check(-2, &RegisterBody{Replicated: true})
	check(-3, &RegisterBody{Instance: &Instance{}})
	check(-4, &RegisterBody{Instance: springInstance()})
}

// BenchmarkEncodeRegister: a registration as Spring Cloud's client sends
// it, encoded directly (Encode) and by the codec.
func BenchmarkEncodeRegister(b *testing.B) {
	body := &RegisterBody{Instance: springInstance()}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(CmdRegister, body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeByCodec(CmdRegister, body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
