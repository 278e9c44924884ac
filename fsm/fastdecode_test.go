package fsm

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// codecRegisterBody decodes a register body with the codec alone, as Decode
// did before decodeRegisterBody.
func codecRegisterBody(b []byte) (*RegisterBody, error) {
	var body RegisterBody
	err := codec.NewDecoderBytes(b, msgpackHandle).Decode(&body)
	return &body, err
}

// randomString returns strings around the msgpack length classes (fixstr,
// str8, str16) and with multi-byte characters.
func randomString(rng *rand.Rand) string {
	lens := []int{0, 1, 31, 32, 255, 256, 300, 65535, 65536}
	n := rng.IntN(40)
	if rng.IntN(10) == 0 {
		n = lens[rng.IntN(len(lens))]
	}
	var sb strings.Builder
	for sb.Len() < n {
		switch rng.IntN(4) {
		case 0:
			sb.WriteString("é")
		case 1:
			sb.WriteByte(byte(rng.IntN(256)))
		default:
			sb.WriteByte(byte('a' + rng.IntN(26)))
		}
	}
	return sb.String()[:n]
}

func randomInt32(rng *rand.Rand) int32 {
	edges := []int32{0, 1, 127, 128, 255, 256, -1, -32, -33, -128, -129, 32767, 32768, -32768, -32769, 65535, 65536, math.MaxInt32, math.MinInt32}
	if rng.IntN(2) == 0 {
		return edges[rng.IntN(len(edges))]
	}
	return rng.Int32() - rng.Int32()
}

func randomMetadata(rng *rand.Rand) Metadata {
	switch rng.IntN(5) {
	case 0:
		return Metadata{}
	case 1:
		return MetadataOf(map[string]string{})
	}
	md := map[string]string{}
	for range rng.IntN(20) {
		md[randomString(rng)] = randomString(rng)
	}
	return MetadataOf(md)
}

func randomInstance(rng *rand.Rand) *Instance {
	s := func() string { return randomString(rng) }
	b := func() bool { return rng.IntN(2) == 0 }
	i32 := func() int32 { return randomInt32(rng) }
	ldt := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1_700_000_000_000, rng.Int64() - rng.Int64()}[rng.IntN(7)]
	return &Instance{InstanceID: s(), HostName: s(), App: s(), IPAddr: s(), Sid: s(), Status: s(), OverriddenStatus: s(),
		Port: i32(), PortEnabled: b(), SecurePort: i32(), SecurePortEnabled: b(), CountryID: i32(),
		DataCenterInfo:      DataCenterInfo{Class: s(), Name: s(), Metadata: randomMetadata(rng)},
		RenewalIntervalSecs: i32(), DurationSecs: i32(), Metadata: randomMetadata(rng), AppGroupName: s(),
		HomePageURL: s(), StatusPageURL: s(), HealthCheckURL: s(), SecureHealthCheckURL: s(), VIPAddress: s(),
		SecureVIPAddress: s(), IsCoordinatingDiscoveryServer: b(), LastDirtyTimestamp: ldt, ASGName: s()}
}

// TestDecodeRegisterBody_AsTheCodec: over random registrations as the log
// holds them, the direct decoder takes every one and gets what the codec
// gets.
func TestDecodeRegisterBody_AsTheCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		body := &RegisterBody{Instance: randomInstance(rng), Replicated: rng.IntN(3) == 0}
		e, err := Encode(CmdRegister, body)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := decodeRegisterBody(e[headerLen:])
		if !ok {
			t.Fatalf("case %d: the direct decoder gave up on what the codec wrote", i)
		}
		want, err := codecRegisterBody(e[headerLen:])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("case %d: direct %+v, codec %+v", i, fast.Instance, want.Instance)
		}
		// And through Decode, as every caller gets it.
		cmd, err := Decode(e)
		if err != nil || !reflect.DeepEqual(cmd.Body, want) {
			t.Fatalf("case %d: Decode: %v", i, err)
		}
	}
}

// TestDecodeRegisterBody_OtherShapesGoToTheCodec: bodies in forms the
// codec accepts but does not write (an unknown field, a nil, a long form
// of a short integer, a non-canonical metadata block, trailing bytes) are
// left to the codec, so Decode accepts exactly what it accepted before.
func TestDecodeRegisterBody_OtherShapesGoToTheCodec(t *testing.T) {
	enc := func(v any) []byte { return codecBytes(t, v) }
	in := map[string]any{"id": "i-1", "a": "APP", "p": int64(8080), "md": map[string]string{"b": "2", "a": "1"}}
	cases := map[string][]byte{
		"unknown field":       enc(map[string]any{"in": in, "new": 1}),
		"unknown inner field": enc(map[string]any{"in": map[string]any{"id": "i-1", "zz": "x"}}),
		"nil string":          enc(map[string]any{"in": map[string]any{"id": nil, "a": "APP"}}),
		"trailing bytes":      append(enc(map[string]any{"in": in}), 0xc0),
		"uint64 port":         append(append([]byte{0x81, 0xa2, 'i', 'n', 0x81, 0xa1, 'p'}, 0xcf), 0, 0, 0, 0, 0, 0, 0x1f, 0x90),
		"port out of range":   enc(map[string]any{"in": map[string]any{"p": int64(1) << 40}}),
		"no instance":         enc(map[string]any{"rep": true}),
		"nil instance":        enc(map[string]any{"in": nil}),
		// A key twice: the codec decodes the second into what the first
		// made, so the instance keeps its id and takes the new app.
		"repeated instance": slices.Concat([]byte{0x82}, enc("in"), enc(in), enc("in"), enc(map[string]any{"a": "X"})),
		"repeated inner key": slices.Concat([]byte{0x81}, enc("in"), []byte{0x83}, enc("id"), enc("i-1"), enc("a"), enc("APP"),
			enc("a"), enc("X")),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, ok := decodeRegisterBody(b); ok && name != "uint64 port" {
				t.Fatalf("the direct decoder took %x", b)
			}
			want, wantErr := codecRegisterBody(b)
			e := append([]byte{byte(CmdRegister), bodyVersion1, 0, 0, 0, 0, 0, 0, 0, 0}, b...)
			cmd, err := Decode(e)
			switch {
			case wantErr != nil || want.Instance == nil:
				if err == nil {
					t.Fatalf("Decode took what the codec refuses: %+v", cmd.Body)
				}
			case err != nil:
				t.Fatalf("Decode refused what the codec takes: %v", err)
			case !reflect.DeepEqual(cmd.Body, want):
				t.Fatalf("Decode %+v, codec %+v", cmd.Body.(*RegisterBody).Instance, want.Instance)
			}
		})
	}
}

// FuzzDecodeRegisterBody: whatever the direct decoder takes, the codec
// takes too and decodes to the same body.
func FuzzDecodeRegisterBody(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		e, err := Encode(CmdRegister, &RegisterBody{Instance: randomInstance(rng)})
		if err != nil {
			f.Fatal(err)
		}
		if len(e) < 4096 {
			f.Add(e[headerLen:])
		}
	}
	// A repeated key, which the codec merges into the first one's value.
	f.Add([]byte("\x81\xa2in\x83\xa2id\xa3i-1\xa1a\xa3APP\xa1a\xa1X"))
	fuzzAsTheCodec(f, decodeRegisterBody, codecRegisterBody)
}

// springInstance is a registration as Spring Cloud's client sends it,
// with about 1 KiB of metadata.
func springInstance() *Instance {
	md := map[string]string{}
	for i := range 12 {
		md[fmt.Sprintf("key-%d", i)] = strings.Repeat("v", 70)
	}
	return &Instance{InstanceID: "10.0.1.2:APP-001:8080", HostName: "host-1.example", App: "APP-001", IPAddr: "10.0.1.2",
		Status: StatusUp, Port: 8080, PortEnabled: true, SecurePort: 443, DataCenterInfo: DataCenterInfo{Class: "c", Name: "MyOwn"},
		Metadata: MetadataOf(md), VIPAddress: "app-001", SecureVIPAddress: "app-001", HomePageURL: "http://10.0.1.2:8080/",
		StatusPageURL: "http://10.0.1.2:8080/actuator/info", HealthCheckURL: "http://10.0.1.2:8080/actuator/health", LastDirtyTimestamp: 1}
}

// BenchmarkDecodeRegister: a registration as Spring Cloud's client sends
// it (about 1 KiB of metadata), decoded directly and by the codec.
func BenchmarkDecodeRegister(b *testing.B) {
	e, err := Encode(CmdRegister, &RegisterBody{Instance: springInstance()})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Decode(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := codecRegisterBody(e[headerLen:]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// codecBytes is v as the codec encodes it.
func codecBytes(t *testing.T, v any) []byte {
	t.Helper()
	var buf []byte
	if err := codec.NewEncoderBytes(&buf, msgpackHandle).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf
}

// fuzzAsTheCodec runs f's inputs through a direct decoder: whatever it
// takes, the codec takes too and decodes to the same body.
func fuzzAsTheCodec[T any](f *testing.F, direct func([]byte) (T, bool), codecOf func([]byte) (T, error)) {
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := direct(b)
		if !ok {
			return
		}
		want, err := codecOf(b)
		if err != nil {
			t.Fatalf("the direct decoder took %x, the codec refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("%x: direct %+v, codec %+v", b, fast, want)
		}
	})
}

// codecRenewBatchBody decodes a renew batch body with the codec alone.
func codecRenewBatchBody(b []byte) (*RenewBatchBody, error) {
	var body RenewBatchBody
	err := codec.NewDecoderBytes(b, msgpackHandle).Decode(&body)
	return &body, err
}

func randomInt64(rng *rand.Rand) int64 {
	edges := []int64{0, 1, 127, 128, -1, -32, -33, math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64, math.MinInt64, 1_764_000_000_000}
	if rng.IntN(2) == 0 {
		return edges[rng.IntN(len(edges))]
	}
	return rng.Int64() - rng.Int64()
}

// TestDecodeRenewBatchBody_AsTheCodec: random batches around the msgpack
// array and string length classes decode directly to what the codec makes
// of them, through Decode too.
func TestDecodeRenewBatchBody_AsTheCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 400 {
		n := []int{0, 1, 15, 16, 17, 300}[rng.IntN(6)]
		if i == 0 {
			n = 1 << 16 // an array 32 header
		}
		batch := &RenewBatchBody{Renewals: make([]Renewal, n)}
		for j := range batch.Renewals {
			batch.Renewals[j] = Renewal{App: randomString(rng), ID: randomString(rng), Ts: randomInt64(rng)}
		}
		e, err := Encode(CmdRenewBatch, batch)
		if err != nil {
			t.Fatal(err)
		}
		want, err := codecRenewBatchBody(e[headerLen:])
		if err != nil {
			t.Fatal(err)
		}
		for _, view := range []bool{false, true} {
			fast, ok := decodeRenewBatchBody(e[headerLen:], view)
			if !ok {
				t.Fatalf("batch %d (%d renewals, view %v): the direct decoder gave up", i, n, view)
			}
			if !reflect.DeepEqual(fast, want) {
				t.Fatalf("batch %d (view %v): direct and codec differ", i, view)
			}
		}
		for _, dec := range []func([]byte) (Command, error){Decode, decodeApplied} {
			cmd, err := dec(e)
			if err != nil || !reflect.DeepEqual(cmd.Body, want) {
				t.Fatalf("batch %d: Decode: %v", i, err)
			}
		}
	}
}

// TestDecodeRenewBatchBody_OtherShapesGoToTheCodec: forms the codec
// accepts but does not write are left to it.
func TestDecodeRenewBatchBody_OtherShapesGoToTheCodec(t *testing.T) {
	enc := func(v any) []byte { return codecBytes(t, v) }
	rn := map[string]any{"a": "APP", "id": "i-1", "t": int64(5)}
	cases := map[string][]byte{
		"nil renewals":     enc(map[string]any{"r": nil}),
		"unknown field":    enc(map[string]any{"r": []any{rn}, "x": 1}),
		"unknown inner":    enc(map[string]any{"r": []any{map[string]any{"a": "APP", "zz": 1}}}),
		"nil app":          enc(map[string]any{"r": []any{map[string]any{"a": nil, "id": "i"}}}),
		"long array form":  {0x81, 0xa1, 'r', 0xdc, 0, 1, 0x81, 0xa1, 't', 0x05},
		"count beyond end": {0x81, 0xa1, 'r', 0xdd, 0, 1, 0, 0},
		"trailing bytes":   append(enc(map[string]any{"r": []any{rn}}), 0xc0),
		"repeated key":     slices.Concat([]byte{0x82}, enc("r"), enc([]any{rn}), enc("r"), enc([]any{map[string]any{"t": int64(7)}})),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			for _, view := range []bool{false, true} {
				if _, ok := decodeRenewBatchBody(b, view); ok {
					t.Fatalf("the direct decoder (view %v) took %x", view, b)
				}
			}
			want, wantErr := codecRenewBatchBody(b)
			e := append([]byte{byte(CmdRenewBatch), bodyVersion1, 0, 0, 0, 0, 0, 0, 0, 0}, b...)
			cmd, err := Decode(e)
			switch {
			case wantErr != nil:
				if err == nil {
					t.Fatalf("Decode took what the codec refuses: %+v", cmd.Body)
				}
			case err != nil:
				t.Fatalf("Decode refused what the codec takes: %v", err)
			case !reflect.DeepEqual(cmd.Body, want):
				t.Fatalf("Decode %+v, codec %+v", cmd.Body, want)
			}
		})
	}
}

// FuzzDecodeRenewBatchBody: whatever the direct decoder takes, the codec
// takes too and decodes to the same body.
func FuzzDecodeRenewBatchBody(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		batch := &RenewBatchBody{}
		for range rng.IntN(20) {
			batch.Renewals = append(batch.Renewals, Renewal{App: randomString(rng), ID: randomString(rng), Ts: randomInt64(rng)})
		}
		e, err := Encode(CmdRenewBatch, batch)
		if err != nil {
			f.Fatal(err)
		}
		if len(e) < 4096 {
			f.Add(e[headerLen:])
		}
	}
	fuzzAsTheCodec(f, func(b []byte) (*RenewBatchBody, bool) {
		// The views of b, in use only while b stays as it is.
		return decodeRenewBatchBody(b, true)
	}, codecRenewBatchBody)
}

// BenchmarkDecodeRenewBatch: a renewal batch entry as the leader writes
// them (500 renewals, about 28 KiB), decoded directly and by the codec.
func BenchmarkDecodeRenewBatch(b *testing.B) {
	batch := benchRenewBatch()
	e, err := Encode(CmdRenewBatch, batch)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(e)))
		for b.Loop() {
			if _, err := Decode(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(e)))
		for b.Loop() {
			if _, err := codecRenewBatchBody(e[headerLen:]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEncodeRenewBatch_AsTheCodec: the direct encoder writes the codec's
// bytes for random batches around the array, string and integer classes.
func TestEncodeRenewBatch_AsTheCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for i := range 300 {
		var renewals []Renewal // nil for the first
		if i > 0 {
			n := []int{0, 1, 15, 16, 17, 300}[rng.IntN(6)]
			if i == 1 {
				n = 1 << 16 // an array 32 header
			}
			renewals = make([]Renewal, n)
			for j := range renewals {
				renewals[j] = Renewal{App: randomString(rng), ID: randomString(rng), Ts: randomInt64(rng)}
			}
		}
		want, err := Encode(CmdRenewBatch, &RenewBatchBody{Renewals: renewals})
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeRenewBatch(renewals); !bytes.Equal(got, want) {
			t.Fatalf("batch %d (%d renewals): direct %x..., codec %x...", i, len(renewals), got[:min(len(got), 40)], want[:min(len(want), 40)])
		}
	}
	for _, ts := range []int64{-33, -129, -32769, math.MinInt32 - 1, 128, 255, 256, math.MaxInt16 + 1, math.MaxInt32 + 1} {
		renewals := []Renewal{{App: "A", ID: "i", Ts: ts}}
		want, err := Encode(CmdRenewBatch, &RenewBatchBody{Renewals: renewals})
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeRenewBatch(renewals); !bytes.Equal(got, want) {
			t.Fatalf("ts %d: direct %x, codec %x", ts, got, want)
		}
	}
}

// benchRenewBatch is a renewal batch entry's worth of heartbeats as the
// leader writes them: 500 renewals, about 28 KiB encoded.
func benchRenewBatch() *RenewBatchBody {
	batch := &RenewBatchBody{}
	for i := range 500 {
		batch.Renewals = append(batch.Renewals, Renewal{App: fmt.Sprintf("BENCH-%05d", i/20),
			ID: fmt.Sprintf("10.%d.%d.%d:bench-%05d:8080", i/65536, i/256%256, i%256, i/20), Ts: 1_764_000_000_000 + int64(i)})
	}
	return batch
}

// BenchmarkEncodeRenewBatch: the same batch encoded directly and by the
// codec (Encode).
func BenchmarkEncodeRenewBatch(b *testing.B) {
	batch := benchRenewBatch()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			EncodeRenewBatch(batch.Renewals)
		}
	})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(CmdRenewBatch, batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}
