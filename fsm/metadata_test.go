package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// The old* types are the record shapes before Metadata: the same codec
// names with Go maps for the metadata. They stand for a node running the
// previous code, which wrote (and must keep reading) the same bytes.
type oldDataCenterInfo struct {
	Class    string            `codec:"c"`
	Name     string            `codec:"n"`
	Metadata map[string]string `codec:"m"`
}

type oldInstance struct {
	InstanceID                    string            `codec:"id"`
	HostName                      string            `codec:"h"`
	App                           string            `codec:"a"`
	IPAddr                        string            `codec:"ip"`
	Sid                           string            `codec:"sid"`
	Status                        string            `codec:"s"`
	OverriddenStatus              string            `codec:"os"`
	Port                          int32             `codec:"p"`
	PortEnabled                   bool              `codec:"pe"`
	SecurePort                    int32             `codec:"sp"`
	SecurePortEnabled             bool              `codec:"spe"`
	CountryID                     int32             `codec:"cid"`
	DataCenterInfo                oldDataCenterInfo `codec:"dc"`
	RenewalIntervalSecs           int32             `codec:"ri"`
	DurationSecs                  int32             `codec:"du"`
	Metadata                      map[string]string `codec:"md"`
	AppGroupName                  string            `codec:"ag"`
	HomePageURL                   string            `codec:"hp"`
	StatusPageURL                 string            `codec:"spu"`
	HealthCheckURL                string            `codec:"hc"`
	SecureHealthCheckURL          string            `codec:"shc"`
	VIPAddress                    string            `codec:"vip"`
	SecureVIPAddress              string            `codec:"svip"`
	IsCoordinatingDiscoveryServer bool              `codec:"cds"`
	LastDirtyTimestamp            int64             `codec:"ldt"`
	ASGName                       string            `codec:"asg"`
}

type oldEntry struct {
	App            string       `codec:"app"`
	ID             string       `codec:"id"`
	Instance       *oldInstance `codec:"in"`
	Override       string       `codec:"ov"`
	RegistrationTs int64        `codec:"rt"`
	LastRenewalTs  int64        `codec:"lr"`
	EvictionTs     int64        `codec:"ev"`
	ServiceUpTs    int64        `codec:"su"`
	LastUpdatedTs  int64        `codec:"lu"`
	ActionType     string       `codec:"act"`
	ModifyIndex    uint64       `codec:"mi"`
}

type oldDeltaEntry struct {
	App        string    `codec:"a"`
	ID         string    `codec:"id"`
	Ts         int64     `codec:"t"`
	Seq        uint64    `codec:"q"`
	Action     string    `codec:"act"`
	Deleted    *oldEntry `codec:"d"`
	Replicated bool      `codec:"rep,omitempty"`
}

type oldState struct {
	Format      int               `codec:"f"`
	LastIndex   uint64            `codec:"li"`
	Version     uint64            `codec:"v"`
	DeltaSeq    uint64            `codec:"ds"`
	Mode        string            `codec:"mode"`
	Members     []Member          `codec:"m"`
	Entries     []*oldEntry       `codec:"e"`
	Delta       []oldDeltaEntry   `codec:"d"`
	AppVersions map[string]uint64 `codec:"av"`
}

type oldRegisterBody struct {
	Instance   *oldInstance `codec:"in"`
	Replicated bool         `codec:"rep,omitempty"`
}

// toOld copies in field by field into the old shape (by reflection, so
// that it does not depend on the codec under test).
func toOld(in *Instance) *oldInstance {
	o := &oldInstance{}
	src, dst := reflect.ValueOf(in).Elem(), reflect.ValueOf(o).Elem()
	for i := range src.NumField() {
		name := src.Type().Field(i).Name
		switch name {
		case "Metadata":
			o.Metadata = in.Metadata.Map()
		case "DataCenterInfo":
			o.DataCenterInfo = oldDataCenterInfo{Class: in.DataCenterInfo.Class, Name: in.DataCenterInfo.Name,
				Metadata: in.DataCenterInfo.Metadata.Map()}
		default:
			dst.FieldByName(name).Set(src.Field(i))
		}
	}
	return o
}

func msgpackBytes(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(v); err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return buf.Bytes()
}

func msgpackDecode(t testing.TB, data []byte, v any) {
	t.Helper()
	if err := codec.NewDecoderBytes(data, msgpackHandle).Decode(v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
}

// mdInstances are registrations whose metadata covers the encoding's
// cases: nil and empty maps, 16 and more entries (a longer map header),
// empty keys and values, non-ASCII and long values (every string header).
func mdInstances() []*Instance {
	many := map[string]string{}
	for i := range 40 {
		many[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", i)
	}
	cases := []map[string]string{
		nil, {}, {"": ""}, {"zone": "a", "": "empty key", "e": ""}, many,
		{"é": "ünïcödé 😀", "\x01": "\x00", "k": strings.Repeat("x", 31)},
		{"s32": strings.Repeat("y", 32), "s255": strings.Repeat("y", 255), "s256": strings.Repeat("y", 256)},
		{"s65535": strings.Repeat("z", 65535), "s65536": strings.Repeat("z", 65536)},
	}
	var out []*Instance
	for i, md := range cases {
		in := testInstance("MD", fmt.Sprintf("md-%d", i), StatusUp, int64(i+1))
		in.Metadata = MetadataOf(md)
		if i%2 == 1 {
			in.DataCenterInfo = DataCenterInfo{Class: "com.netflix.appinfo.AmazonInfo", Name: "Amazon", Metadata: MetadataOf(md)}
		}
		out = append(out, in)
	}
	return out
}

// TestMetadata_LogEntryCompatibleWithMapShape checks that a register entry
// is the same bytes whether written from a Metadata or from the old map
// shape, and that an entry of the old shape applies to the same state.
func TestMetadata_LogEntryCompatibleWithMapShape(t *testing.T) {
	fromOld, fromNew := New(0, nil), New(0, nil)
	for i, in := range mdInstances() {
		newEntry := mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: in})
		oldEntry := mustEncode(t, CmdRegister, 1000, &oldRegisterBody{Instance: toOld(in)})
		if !bytes.Equal(newEntry, oldEntry) {
			t.Fatalf("%s: entry differs from the map shape's:\nnew %x\nold %x", in.InstanceID, newEntry, oldEntry)
		}
		idx := uint64(i + 1)
		if res := fromOld.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: oldEntry}); res != nil {
			t.Fatal(res)
		}
		if res := fromNew.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: newEntry}); res != nil {
			t.Fatal(res)
		}
		got := fromOld.reg.Get("MD", in.InstanceID).Instance
		if got.Metadata.IsNil() != in.Metadata.IsNil() || !maps.Equal(got.Metadata.Map(), in.Metadata.Map()) ||
			got.DataCenterInfo.Metadata.IsNil() != in.DataCenterInfo.Metadata.IsNil() {
			t.Fatalf("%s: applied metadata %v (nil %v), want %v (nil %v)", in.InstanceID,
				got.Metadata, got.Metadata.IsNil(), in.Metadata, in.Metadata.IsNil())
		}
	}
	if a, b := snapshotBytes(t, fromOld), snapshotBytes(t, fromNew); !bytes.Equal(a, b) {
		t.Fatal("old-shape and new entries applied to different snapshots")
	}
}

// TestMetadata_SnapshotCompatibleWithMapShape checks both directions: the
// previous code reads a snapshot written now and writes it back to the same
// bytes, and a snapshot the previous code wrote restores to the same state
// and is written back unchanged.
func TestMetadata_SnapshotCompatibleWithMapShape(t *testing.T) {
	f := New(0, nil)
	// The previous code's state has no remote regions: leave them out.
	var entries [][]byte
	for _, e := range randomCommands(t, 7, 300) {
		if TypeOf(e)&^CmdIgnoreUnknown != CmdRegionUpdate {
			entries = append(entries, e)
		}
	}
	for _, in := range mdInstances() {
		entries = append(entries, mustEncode(t, CmdRegister, 5000, &RegisterBody{Instance: in}))
	}
	// A cancel leaves a deleted record (with metadata) in the delta.
	entries = append(entries, mustEncode(t, CmdCancel, 5001, &KeyBody{App: "MD", ID: "md-4"}))
	applyAll(f, entries)
	// The previous code wrote format 1: the whole State as one value.
	snap := snapshotBytesFormat(t, f, snapshotFormatWhole)
	body := snap[len(snapshotMagic)+1:]

	var old oldState
	msgpackDecode(t, body, &old)
	if len(old.Entries) == 0 || len(old.Delta) == 0 {
		t.Fatalf("state too small to compare: %d entries, %d delta", len(old.Entries), len(old.Delta))
	}
	if again := msgpackBytes(t, &old); !bytes.Equal(again, body) {
		t.Fatal("the map shape re-encodes a snapshot to different bytes: the blocks are not its encoding")
	}

	st, err := ReadSnapshot(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Entries) != len(old.Entries) {
		t.Fatalf("%d entries, old shape %d", len(st.Entries), len(old.Entries))
	}
	for i, e := range st.Entries {
		o := old.Entries[i]
		if e.Instance.Metadata.IsNil() != (o.Instance.Metadata == nil) || !maps.Equal(e.Instance.Metadata.Map(), o.Instance.Metadata) ||
			e.Instance.DataCenterInfo.Metadata.IsNil() != (o.Instance.DataCenterInfo.Metadata == nil) ||
			!maps.Equal(e.Instance.DataCenterInfo.Metadata.Map(), o.Instance.DataCenterInfo.Metadata) {
			t.Fatalf("%s/%s: metadata %v, old shape %v", e.App, e.ID, e.Instance.Metadata, o.Instance.Metadata)
		}
	}
	var buf bytes.Buffer
	if err := st.encodeFormat(&buf, snapshotFormatWhole); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), snap) {
		t.Fatal("a restored snapshot encodes to different bytes")
	}
	restored := New(0, nil)
	if err := restored.Restore(nopCloser{bytes.NewReader(snap)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytesFormat(t, restored, snapshotFormatWhole), snap) {
		t.Fatal("restore then snapshot changed the bytes")
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// TestMetadata_NilAndEmptySurviveSnapshot checks that a registrant that
// sent no metadata and one that sent an empty map stay distinguishable
// across snapshot and restore.
func TestMetadata_NilAndEmptySurviveSnapshot(t *testing.T) {
	f := New(0, nil)
	for i, md := range []map[string]string{nil, {}} {
		in := testInstance("NE", fmt.Sprint(i), StatusUp, 1)
		in.Metadata = MetadataOf(md)
		in.DataCenterInfo = DataCenterInfo{Name: "Amazon", Metadata: MetadataOf(md)}
		applyAll(f, [][]byte{mustEncode(t, CmdRegister, 1000, &RegisterBody{Instance: in})})
	}
	restored := New(0, nil)
	if err := restored.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	for i, wantNil := range []bool{true, false} {
		in := restored.reg.Get("NE", fmt.Sprint(i)).Instance
		if in.Metadata.IsNil() != wantNil || in.DataCenterInfo.Metadata.IsNil() != wantNil || in.Metadata.Len() != 0 {
			t.Errorf("instance %d: metadata nil %v, data center metadata nil %v; want nil %v", i,
				in.Metadata.IsNil(), in.DataCenterInfo.Metadata.IsNil(), wantNil)
		}
	}
}

// TestMetadata_NonCanonicalInputIsCanonicalised decodes maps a canonical
// writer never produces (unsorted or repeated keys, longer headers than
// needed, binary strings) into the block of the equal map.
func TestMetadata_NonCanonicalInputIsCanonicalised(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
		want map[string]string
	}{
		{"canonical", "\x82\xa1a\xa12\xa1b\xa11", map[string]string{"a": "2", "b": "1"}},
		{"unsorted", "\x82\xa1b\xa11\xa1a\xa12", map[string]string{"a": "2", "b": "1"}},
		{"repeated key keeps the last", "\x82\xa1a\xa11\xa1a\xa12", map[string]string{"a": "2"}},
		{"str8 for a short string", "\x81\xd9\x01a\xa11", map[string]string{"a": "1"}},
		{"map16 for one entry", "\xde\x00\x01\xa1a\xa11", map[string]string{"a": "1"}},
		{"binary strings", "\x81\xc4\x01a\xc4\x011", map[string]string{"a": "1"}},
		{"empty", "\x80", map[string]string{}},
		{"nil", "\xc0", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w struct {
				M Metadata `codec:"m"`
			}
			msgpackDecode(t, []byte("\x81\xa1m"+tc.raw), &w)
			if want := MetadataOf(tc.want); w.M != want {
				t.Fatalf("block %q, want %q", w.M.b, want.b)
			}
		})
	}
	for _, raw := range []string{"\xa1x", "\x91\xa1x", "\x81\xa1a\x91\xa1x", "\x82\xa1a"} {
		var w struct {
			M Metadata `codec:"m"`
		}
		if err := codec.NewDecoderBytes([]byte("\x81\xa1m"+raw), msgpackHandle).Decode(&w); err == nil {
			t.Errorf("%q decoded to %v, want an error", raw, w.M)
		}
	}
}

// TestMetadata_AgreesWithMap builds random maps, with repeated Sets,
// empty and non-ASCII keys and values up to 64 KiB, and checks every
// accessor and the encoding against a Go map.
func TestMetadata_AgreesWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 16))
	keys := []string{"", "a", "A", "zone", "é", "😀", "a.b", "\x00", "\x7f", "~", "version", "k1", "k10", "k2"}
	for round := range 300 {
		n := rng.IntN(40)
		var b MetadataBuilder
		want := map[string]string{}
		for range n {
			k := keys[rng.IntN(len(keys))]
			if rng.IntN(3) == 0 {
				k = fmt.Sprintf("key.%d", rng.IntN(50))
			}
			var v string
			switch rng.IntN(6) {
			case 0:
			case 1:
				v = strings.Repeat("h", 1+rng.IntN(300))
			case 2:
				v = strings.Repeat("é", rng.IntN(40))
			case 3:
				if round%20 == 0 {
					v = strings.Repeat("L", 64<<10)
				}
			default:
				v = fmt.Sprint(rng.Int())
			}
			b.Set(k, v)
			want[k] = v
		}
		if n == 0 && round%2 == 0 {
			want = nil
		} else {
			b.MarkPresent()
		}
		m := b.Metadata()
		if m != MetadataOf(want) {
			t.Fatalf("round %d: builder and MetadataOf differ", round)
		}
		if m.IsNil() != (want == nil) || m.Len() != len(want) || !maps.Equal(m.Map(), want) {
			t.Fatalf("round %d: %v (nil %v), want %v", round, m, m.IsNil(), want)
		}
		var order []string
		for k, v := range m.All() {
			order = append(order, k)
			if want[k] != v {
				t.Fatalf("round %d: All yields %q=%q, want %q", round, k, v, want[k])
			}
		}
		if !slices.IsSorted(order) || len(order) != len(want) {
			t.Fatalf("round %d: All yields keys %q", round, order)
		}
		for _, k := range append(keys, "key.7", "missing") {
			v, ok := m.Get(k)
			wv, wok := want[k]
			if v != wv || ok != wok {
				t.Fatalf("round %d: Get(%q) = %q, %v; want %q, %v", round, k, v, ok, wv, wok)
			}
		}
		type newShape struct {
			M Metadata `codec:"m"`
		}
		type oldShape struct {
			M map[string]string `codec:"m"`
		}
		enc := msgpackBytes(t, &newShape{M: m})
		if old := msgpackBytes(t, &oldShape{M: want}); !bytes.Equal(enc, old) {
			t.Fatalf("round %d: encoding differs from the map's", round)
		}
		var back newShape
		msgpackDecode(t, enc, &back)
		if back.M != m {
			t.Fatalf("round %d: decode changed the block", round)
		}
	}
}

func TestMetadata_With(t *testing.T) {
	var none Metadata
	m := none.With(nil)
	if m.IsNil() || m.Len() != 0 {
		t.Fatalf("a merge into nil metadata gives %v (nil %v), want an empty map", m, m.IsNil())
	}
	m = MetadataOf(map[string]string{"a": "1", "b": "2"}).With(map[string]string{"b": "3", "c": "4"})
	if !maps.Equal(m.Map(), map[string]string{"a": "1", "b": "3", "c": "4"}) {
		t.Fatalf("merged %v", m)
	}
	if got := fmt.Sprint(m); got != "map[a:1 b:3 c:4]" {
		t.Fatalf("String %q", got)
	}
}

func TestMetadata_JSON(t *testing.T) {
	for _, md := range []map[string]string{nil, {}, {"a": "1", "é": "\"<>"}} {
		data, err := json.Marshal(struct{ M Metadata }{MetadataOf(md)})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(struct{ M map[string]string }{md})
		if !bytes.Equal(data, want) {
			t.Fatalf("JSON %s, a map gives %s", data, want)
		}
		var back struct{ M Metadata }
		if err := json.Unmarshal(data, &back); err != nil || back.M != MetadataOf(md) {
			t.Fatalf("JSON round trip of %v gives %v (%v)", md, back.M, err)
		}
	}
}

// BenchmarkMetadataOf measures building a block of the benchmark workload's shape.
func BenchmarkMetadataOf(b *testing.B) {
	md := map[string]string{"version": "1.2.3", "zone": "zone-a", "management.port": "8081", "git.commit": strings.Repeat("c", 40)}
	for i := range 7 {
		md[fmt.Sprintf("tag.%d", i)] = strings.Repeat("f", 120)
	}
	b.ReportAllocs()
	for range b.N {
		_ = MetadataOf(md)
	}
}

// FuzzMetadataDecode: any bytes either fail to decode or give a canonical
// block equal to MetadataOf of its own map, which encodes back to itself.
func FuzzMetadataDecode(f *testing.F) {
	for _, seed := range []string{"\xc0", "\x80", "\x82\xa1b\xa11\xa1a\xa12", "\x81\xd9\x01a\xc4\x011", "\xde\x00\x01\xa1a\xa11"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m Metadata
		if err := codec.NewDecoderBytes(raw, msgpackHandle).Decode(&m); err != nil {
			return
		}
		if !m.IsNil() && !canonicalMap([]byte(m.b)) {
			t.Fatalf("%x decoded to a non-canonical block %x", raw, m.b)
		}
		if again := MetadataOf(m.Map()); again != m {
			t.Fatalf("%x: block %x, its map gives %x", raw, m.b, again.b)
		}
		var back Metadata
		msgpackDecode(t, msgpackBytes(t, m), &back)
		if back != m {
			t.Fatalf("%x: re-encoding changed the block", raw)
		}
	})
}
