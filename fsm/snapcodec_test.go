package fsm

import (
	"bufio"
	"bytes"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// fillFields sets every field of the struct v points to a value of its own,
// none zero: strings and integers from a counter, booleans true, metadata a
// one-entry map; nested structs and pointers to structs are filled too.
func fillFields(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		if !v.Type().Field(i).IsExported() {
			continue // where a registry keeps the entry (pos), not state
		}
		*n++
		switch {
		case f.Type() == reflect.TypeFor[Metadata]():
			f.Set(reflect.ValueOf(MetadataOf(map[string]string{name: strings.Repeat("v", *n)})))
		case f.Kind() == reflect.String:
			f.SetString(name + "-" + strings.Repeat("x", *n))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.CanInt():
			f.SetInt(int64(-*n * 1000003))
		case f.CanUint():
			f.SetUint(uint64(*n) << 40)
		case f.Kind() == reflect.Struct:
			fillFields(t, f, n)
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
			f.Set(reflect.New(f.Type().Elem()))
			fillFields(t, f.Elem(), n)
		default:
			t.Fatalf("field %s of kind %s: teach fillFields and the snapshot record about it", name, f.Kind())
		}
	}
}

// TestSnapshotRecord_CoversEveryField: an entry with every field of Entry,
// Instance and DataCenterInfo set reads back equal from its format 3
// record, so a field added to one of them and not to the record fails here
// instead of vanishing from every restored registry.
func TestSnapshotRecord_CoversEveryField(t *testing.T) {
	e := &Entry{}
	n := 0
	fillFields(t, reflect.ValueOf(e).Elem(), &n)
	rec, _ := appendRecord(nil, nil, e, SnapshotFormat)
	got, err := readRecord(bufio.NewReader(bytes.NewReader(rec)), true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("record read back differs:\n got %+v\nwant %+v\n got instance %+v\nwant instance %+v", got, e, got.Instance, e.Instance)
	}
	// Without an instance too (checkEntry refuses it later, with a reason).
	bare := &Entry{App: "A", ID: "i"}
	rec, _ = appendRecord(nil, nil, bare, SnapshotFormat)
	if got, err := readRecord(bufio.NewReader(bytes.NewReader(rec)), true); err != nil || !reflect.DeepEqual(got, bare) {
		t.Fatalf("entry without instance: %+v, %v", got, err)
	}
}

// TestSnapshotRecord_DamageIsAnError: a record cut short, with bytes after
// its last field, with a length past its end, or with metadata that is not
// a canonical map is an error, never a panic or a partial entry.
func TestSnapshotRecord_DamageIsAnError(t *testing.T) {
	e := &Entry{}
	n := 0
	fillFields(t, reflect.ValueOf(e).Elem(), &n)
	rec, body := appendRecord(nil, nil, e, SnapshotFormat)
	for cut := range len(body) {
		if got, err := decodeRecord(string(body[:cut]), true); err == nil {
			t.Fatalf("a record cut to %d of %d bytes decoded: %+v", cut, len(body), got)
		}
	}
	if _, err := decodeRecord(string(body)+"x", true); err == nil {
		t.Fatal("a record with a byte after its last field decoded")
	}
	if _, err := readRecord(bufio.NewReader(bytes.NewReader(rec[:len(rec)-1])), true); err == nil {
		t.Fatal("a record shorter than its length read")
	}
	if _, err := readRecord(bufio.NewReader(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0x7f})), true); err == nil {
		t.Fatal("a record of 34 GB was not refused")
	}
	bad := *e.Instance
	bad.Metadata = Metadata{b: "\x81\xa1b\xa1v\xa1a"} // a map of one entry followed by a stray string
	_, body = appendRecord(nil, nil, &Entry{App: e.App, ID: e.ID, Instance: &bad}, SnapshotFormat)
	if _, err := decodeRecord(string(body), true); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("non-canonical metadata: %v", err)
	}
}

// TestSnapshotRecord_SettledEntryHoldsNoView: once a restored entry's
// strings are settled, none of them, empty ones included, points into the
// record it was read from. One that did would keep the whole record (1-2
// KB for an instance with metadata) alive beside the registry: a restore
// of 50,000 instances once held 166 MiB instead of 93 through the empty
// fields alone.
func TestSnapshotRecord_SettledEntryHoldsNoView(t *testing.T) {
	full := &Entry{}
	n := 0
	fillFields(t, reflect.ValueOf(full).Elem(), &n)
	sparse := &Entry{App: "APP", ID: "i-1", ActionType: ActionAdded,
		Instance: &Instance{InstanceID: "i-1", App: "APP", HostName: "h", Status: StatusUp, OverriddenStatus: StatusUnknown}}
	for name, e := range map[string]*Entry{"every field set": full, "most fields empty": sparse} {
		_, body := appendRecord(nil, nil, e, SnapshotFormat)
		rec := string(body)
		got, err := decodeRecord(rec, true)
		if err != nil {
			t.Fatal(err)
		}
		newRegistry(0).put(got)
		lo := uintptr(unsafe.Pointer(unsafe.StringData(rec)))
		hi := lo + uintptr(len(rec))
		var walk func(v reflect.Value, path string)
		walk = func(v reflect.Value, path string) {
			switch v.Kind() {
			case reflect.Pointer:
				if !v.IsNil() {
					walk(v.Elem(), path)
				}
			case reflect.Struct:
				for i := range v.NumField() {
					walk(v.Field(i), path+"."+v.Type().Field(i).Name)
				}
			case reflect.String:
				if p := uintptr(unsafe.Pointer(unsafe.StringData(v.String()))); p >= lo && p <= hi {
					t.Errorf("%s: %s (%q) points into the record", name, path, v.String())
				}
			}
		}
		walk(reflect.ValueOf(got), "entry")
	}
}
