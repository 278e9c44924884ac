package fsm

import (
	"bytes"
	stdflate "compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/flate"
)

// bulkyMetadata is a map of n entries whose values are hex of up to
// maxValue digits, and sometimes a repeated word: blocks from a few bytes
// to several KB, some that compress and some that barely do.
func bulkyMetadata(rng *rand.Rand, n, maxValue int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		var v strings.Builder
		if rng.IntN(4) == 0 {
			v.WriteString(strings.Repeat("word", rng.IntN(maxValue/4+1)))
		} else {
			for range rng.IntN(maxValue + 1) {
				v.WriteByte("0123456789abcdef"[rng.IntN(16)])
			}
		}
		m[fmt.Sprintf("key.%d", i)] = v.String()
	}
	return m
}

// scanned is what m.Scan yields until the loop breaks after stop entries
// (never, for -1), copied out as the loop goes.
func scanned(m Metadata, stop int) string {
	var b strings.Builder
	n := 0
	for k, v := range m.Scan() {
		if n == stop {
			break
		}
		n++
		fmt.Fprintf(&b, "%q:%q ", k, v)
	}
	return b.String()
}

// Scan inflates into a pooled buffer: iterating a compressed block
// allocates no copy of it, where All makes one each time (what remains is
// flate's Huffman tables, about 300 bytes for a 2.7 KB block).
func TestMetadata_ScanOfACompressedBlockMakesNoCopy(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector drops pooled buffers and flate readers at random")
	}
	c := compressMetadata(MetadataOf(bulkyMetadata(rand.New(rand.NewPCG(1, 2)), 20, 200)))
	size := len(c.canonical())
	if !c.compressed() || size < 2000 {
		t.Fatalf("the test's block: compressed %v, %d bytes", c.compressed(), size)
	}
	total := 0
	perIteration := func(seq func() iter.Seq2[string, string]) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100 {
			for k, v := range seq() {
				total += len(k) + len(v)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 100
	}
	// A collection empties the pool: a copy now and then is far under
	// half.
	if all := perIteration(c.All); all < uint64(size) {
		t.Fatalf("All allocated %d bytes an iteration, less than the %d-byte block it copies", all, size)
	}
	if scan := perIteration(c.Scan); scan >= uint64(size/2) {
		t.Fatalf("Scan allocated %d bytes an iteration for a block of %d", scan, size)
	}
}

// A compressed block reads as the map it was made of, through every
// method, and writes the canonical block to the log: compression changes
// how a record is held, never what it says. A block below compressMin, or
// one that would not shrink by an eighth, is left as it is.
func TestMetadata_CompressedReadsAsTheSameMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	compressedSeen := 0
	for i := range 500 {
		m := MetadataOf(bulkyMetadata(rng, rng.IntN(30), rng.IntN(300)))
		c := compressMetadata(m)
		if len(m.b) < compressMin && c != m {
			t.Fatalf("case %d: a block of %d bytes was compressed", i, len(m.b))
		}
		if c.compressed() {
			compressedSeen++
			if len(c.b) > len(m.b)-len(m.b)/8 {
				t.Fatalf("case %d: kept a compressed block of %d bytes for %d", i, len(c.b), len(m.b))
			}
		}
		if again := compressMetadata(c); again != c {
			t.Fatalf("case %d: compressing a compressed block changed it", i)
		}
		if c.canonical() != m.b || c.Len() != m.Len() || c.String() != m.String() || c.IsNil() != m.IsNil() {
			t.Fatalf("case %d: compressed block reads as %v, want %v", i, c, m)
		}
		for k, v := range m.All() {
			if got, ok := c.Get(k); !ok || got != v {
				t.Fatalf("case %d: Get(%q) = %q, %v; want %q", i, k, got, ok, v)
			}
		}
		if got, want := scanned(c, -1), scanned(m, -1); got != want {
			t.Fatalf("case %d: Scan yields %s, All %s", i, got, want)
		}
		if k := rng.IntN(m.Len() + 1); scanned(c, k) != scanned(m, k) {
			t.Fatalf("case %d: Scan stopped after %d yields %s, want %s", i, k, scanned(c, k), scanned(m, k))
		}
		if _, ok := c.Get("absent"); ok {
			t.Fatalf("case %d: Get of an absent key found it", i)
		}
		add := map[string]string{"key.0": "new", "zz": "added"}
		if c.With(add) != m.With(add) {
			t.Fatalf("case %d: With on the compressed block differs", i)
		}
		cj, err1 := json.Marshal(c)
		mj, err2 := json.Marshal(m)
		if err1 != nil || err2 != nil || !bytes.Equal(cj, mj) {
			t.Fatalf("case %d: JSON %s (%v), want %s (%v)", i, cj, err1, mj, err2)
		}
		if cm, mm := codecBytes(t, c), codecBytes(t, m); !bytes.Equal(cm, mm) {
			t.Fatalf("case %d: the log would get %x, want the canonical %x", i, cm, mm)
		}
	}
	if compressedSeen < 100 {
		t.Fatalf("only %d of 500 blocks were compressed: the test does not test compression", compressedSeen)
	}
}

// bigMetadataCommands is a reproducible sequence of registrations (with
// metadata from a few bytes to KBs), metadata merges, overrides, cancels
// and renewals over a few instances.
func bigMetadataCommands(t *testing.T, seed uint64, n int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed*31+1))
	ts := int64(1_700_000_000_000)
	out := make([][]byte, 0, n)
	for range n {
		ts += int64(rng.IntN(3000))
		app := []string{"ORDERS", "USERS"}[rng.IntN(2)]
		id := fmt.Sprintf("i-%d", rng.IntN(15))
		switch rng.IntN(6) {
		case 0, 1, 2:
			in := testInstance(app, id, StatusUp, ts)
			in.Metadata = MetadataOf(bulkyMetadata(rng, rng.IntN(12), rng.IntN(200)))
			out = append(out, mustEncode(t, CmdRegister, ts, &RegisterBody{Instance: in}))
		case 3:
			out = append(out, mustEncode(t, CmdMetadata, ts, &MetadataBody{App: app, ID: id,
				Metadata: bulkyMetadata(rng, rng.IntN(4), 150), MaxEntries: mergeLimit}))
		case 4:
			out = append(out, mustEncode(t, CmdSetOverride, ts, &OverrideBody{App: app, ID: id, Status: StatusOutOfService, LastDirtyTimestamp: ts}))
		default:
			if rng.IntN(3) == 0 {
				out = append(out, mustEncode(t, CmdCancel, ts, &KeyBody{App: app, ID: id}))
			} else {
				out = append(out, mustEncode(t, CmdRenewBatch, ts, &RenewBatchBody{Renewals: []Renewal{{App: app, ID: id, Ts: ts}}}))
			}
		}
	}
	return out
}

// mergeLimit is the entry limit the test's metadata merges carry.
const mergeLimit = 1024

// canonicalSnapshot is f's state in format 3, where every metadata block
// is written canonical: equal for two registries that hold the same
// content, however each holds its blocks.
func canonicalSnapshot(t *testing.T, f *FSM) []byte {
	t.Helper()
	return snapshotBytesFormat(t, f, snapshotFormatRecords)
}

// The invariant compression keeps: a registry that compresses (from its
// first instance on) and one that never does hold the same content after
// every command of a random sequence, and after a snapshot of the first
// restored into a third. Every record stays sealed (sealedOnly), and the
// compressing registry does hold compressed blocks.
func TestRegistry_CompressionChangesNoContent(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		cmds := bigMetadataCommands(t, seed, 300)
		comp, plain := New(0, nil), New(0, nil)
		comp.reg.compressAbove, plain.reg.compressAbove = 0, math.MaxInt
		compressed := 0
		for i, data := range cmds {
			l := &raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data}
			if a, b := comp.Apply(l), plain.Apply(l); fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("seed %d, command %d: results %v and %v", seed, i, a, b)
			}
			if !bytes.Equal(canonicalSnapshot(t, comp), canonicalSnapshot(t, plain)) {
				t.Fatalf("seed %d, command %d: the compressing registry's content differs", seed, i)
			}
			for _, f := range []*FSM{comp, plain} {
				f.reg.Range(func(e *Entry) {
					if !sealedOnly(e.Instance) {
						t.Fatalf("seed %d, command %d: %s/%s is not sealed", seed, i, e.App, e.ID)
					}
				})
			}
		}
		comp.reg.Range(func(e *Entry) {
			if e.Instance.Metadata.compressed() {
				compressed++
			}
			if plain.reg.Get(e.App, e.ID).Instance.Metadata.compressed() {
				t.Fatalf("seed %d: the registry that never compresses holds a compressed block", seed)
			}
		})
		if compressed == 0 {
			t.Fatalf("seed %d: no block was compressed", seed)
		}

		// Format 4 writes the blocks as held; restored, they are held
		// so again, and say the same.
		restored := New(0, nil)
		if err := restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, comp)))); err != nil {
			t.Fatalf("seed %d: restore: %v", seed, err)
		}
		if !bytes.Equal(canonicalSnapshot(t, restored), canonicalSnapshot(t, plain)) {
			t.Fatalf("seed %d: the restored registry's content differs", seed)
		}
		again := 0
		restored.reg.Range(func(e *Entry) {
			if e.Instance.Metadata.compressed() {
				again++
			}
			if !sealedOnly(e.Instance) {
				t.Fatalf("seed %d: restored %s/%s is not sealed", seed, e.App, e.ID)
			}
		})
		if again != compressed {
			t.Fatalf("seed %d: %d blocks compressed after the restore, %d before", seed, again, compressed)
		}
		// Format 3, what earlier releases read, is written canonical.
		old := New(0, nil)
		if err := old.Restore(io.NopCloser(bytes.NewReader(canonicalSnapshot(t, comp)))); err != nil {
			t.Fatalf("seed %d: restore format 3: %v", seed, err)
		}
		if !bytes.Equal(canonicalSnapshot(t, old), canonicalSnapshot(t, plain)) {
			t.Fatalf("seed %d: the format 3 copy's content differs", seed)
		}
	}
}

// A compressed block in a snapshot is checked before the registry holds
// it: cut, with a bit flipped anywhere (its header included), followed by
// stray bytes, or found in a format 3 record, it is an error, never a
// panic or an entry.
func TestSnapshotRecord_DamagedCompressedMetadataIsAnError(t *testing.T) {
	in := testInstance("APP", "i-1", StatusUp, 1)
	in.Metadata = compressMetadata(MetadataOf(bulkyMetadata(rand.New(rand.NewPCG(1, 2)), 10, 100)))
	if !in.Metadata.compressed() {
		t.Fatal("the test's metadata did not compress")
	}
	e := &Entry{App: "APP", ID: "i-1", Instance: in}
	_, body := appendRecord(nil, nil, e, SnapshotFormat)
	if got, err := decodeRecord(string(body), true); err != nil || got.Instance.Metadata != in.Metadata {
		t.Fatalf("an intact record: %v", err)
	}
	if _, err := decodeRecord(string(body), false); err == nil {
		t.Fatal("a format 3 record with a compressed block decoded")
	}
	block := in.Metadata.b
	damaged := map[string]string{"stray byte after the stream": block + "x"}
	for cut := 1; cut < len(block); cut += 3 {
		damaged[fmt.Sprintf("cut to %d", cut)] = block[:cut]
	}
	for i := 1; i < len(block); i++ {
		b := []byte(block)
		b[i] ^= 1 << (i % 8)
		damaged[fmt.Sprintf("bit flipped at %d", i)] = string(b)
	}
	for name, b := range damaged {
		bad := *in
		bad.Metadata = Metadata{b: b}
		_, body := appendRecord(nil, nil, &Entry{App: "APP", ID: "i-1", Instance: &bad}, SnapshotFormat)
		if _, err := decodeRecord(string(body), true); err == nil || !strings.Contains(err.Error(), "metadata") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestMetadata_StandardLibraryBlocksInflate: blocks were compressed with
// the standard library's flate until compressMetadata took another, and
// snapshots carry blocks as they were held. Such a block still passes the
// snapshot reader's check and inflates to the canonical block it was made
// of, as a held record and as a record read from a snapshot.
func TestMetadata_StandardLibraryBlocksInflate(t *testing.T) {
	for _, n := range []int{20, 60, 200} {
		m := MetadataOf(bulkyMetadata(rand.New(rand.NewPCG(uint64(n), 7)), n, 40))
		if len(m.b) < compressMin {
			t.Fatalf("%d entries: a block of %d bytes is too small to compress", n, len(m.b))
		}
		var z bytes.Buffer
		w, err := stdflate.NewWriter(&z, stdflate.BestSpeed)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, m.b)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b := append(blockHead(m, 0), z.Bytes()...)
		sealBlock(b)
		if err := checkCompressed(string(b)); err != nil {
			t.Fatalf("%d entries: the standard library's block is refused: %v", n, err)
		}
		held := Metadata{b: string(b)}
		if got := held.canonical(); got != m.b {
			t.Fatalf("%d entries: the standard library's block inflates to %d bytes, not the %d it was made of", n, len(got), len(m.b))
		}
		if ours := compressMetadata(m); !ours.compressed() || ours.canonical() != m.b {
			t.Fatalf("%d entries: compressMetadata's own block does not round-trip", n)
		}
	}
}

// craftBlock makes a compressed block of payload whose header says count
// entries and whose CRC holds: what someone who writes a snapshot file by
// hand can make, not damage.
func craftBlock(payload string, count uint64) string {
	b := []byte{mpCompressed, 0, 0, 0, 0}
	b = binary.AppendUvarint(binary.AppendUvarint(b, uint64(len(payload))), count)
	buf := bytes.NewBuffer(b)
	w, _ := flate.NewWriter(buf, blockLevel)
	_, _ = io.WriteString(w, payload)
	_ = w.Close()
	out := buf.Bytes()
	sealBlock(out)
	return string(out)
}

// TestReadSnapshot_MadeBlocksAreRefused: a snapshot from outside the
// cluster (an operator's restore) is checked in full. A block that passes
// its CRC but does not inflate, inflates to something other than a
// canonical map, or says another length or number of entries than it
// holds is refused (only entries carry blocks as held: the delta's
// records and regions' copies are written canonical); a data center's
// metadata is never
// held compressed, so a compressed one is refused by every reader. Such
// blocks, held, would panic the readers of the record.
func TestReadSnapshot_MadeBlocksAreRefused(t *testing.T) {
	good := compressMetadata(MetadataOf(bulkyMetadata(rand.New(rand.NewPCG(1, 2)), 10, 100)))
	if !good.compressed() {
		t.Fatal("the test's metadata did not compress")
	}
	canonical := good.canonical()
	n, _ := mapHeader(canonical)
	stream := func(b string) string { c, _ := parseCompressed(b); return c.stream }
	notDeflate := []byte(good.b[:len(good.b)-len(stream(good.b))] + "\xff\xff\xff\xff")
	sealBlock(notDeflate)
	made := map[string]string{
		"not deflate":         string(notDeflate),
		"not a canonical map": craftBlock(strings.Repeat("\xdf", 300), 1),
		"another entry count": craftBlock(canonical, uint64(n)+1),
		"another length":      craftBlock(canonical+"\x00", uint64(n)),
	}
	encode := func(st *State) []byte {
		st.Format = SnapshotFormat
		var buf bytes.Buffer
		if err := st.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	entry := func(md Metadata) *Entry {
		in := testInstance("APP", "i-1", StatusUp, 1)
		in.Metadata = md
		return &Entry{App: "APP", ID: "i-1", Instance: in}
	}
	if _, err := ReadSnapshot(bytes.NewReader(encode(&State{Entries: []*Entry{entry(good)}}))); err != nil {
		t.Fatalf("an intact compressed block: %v", err)
	}
	for name, b := range made {
		data := encode(&State{Entries: []*Entry{entry(Metadata{b: b})}})
		if _, err := ReadSnapshot(bytes.NewReader(data)); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: ReadSnapshot answered %v", name, err)
		}
	}
	// A data center's metadata compressed: refused by a restore too, which
	// reads Instance.ID() (the Amazon instance-id) from it.
	in := testInstance("APP", "", StatusUp, 1)
	in.HostName = "h1"
	in.DataCenterInfo = DataCenterInfo{Name: "Amazon", Metadata: good}
	st := &State{Entries: []*Entry{{App: "APP", ID: "h1", Instance: in}}}
	if err := New(0, nil).Restore(io.NopCloser(bytes.NewReader(encode(st)))); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("a compressed data center block: restore answered %v", err)
	}
}
