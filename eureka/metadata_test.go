package eureka

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/heureka-registry/heureka/fsm"
)

// registerBody is a minimal register body with the given metadata object
// (JSON members or XML elements, written as they are).
func registerBody(f Format, metadata string) []byte {
	if f == XML {
		return []byte(`<instance><hostName>h</hostName><app>MD</app><ipAddr>10.0.0.1</ipAddr><status>UP</status>` +
			`<dataCenterInfo class="com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo"><name>MyOwn</name></dataCenterInfo>` +
			`<metadata>` + metadata + `</metadata></instance>`)
	}
	return []byte(`{"instance":{"hostName":"h","app":"MD","ipAddr":"10.0.0.1","status":"UP",` +
		`"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},` +
		`"metadata":{` + metadata + `}}}`)
}

// encodedMetadata reads the metadata object back from an encoded instance.
func encodedMetadata(t *testing.T, f Format, doc []byte) map[string]string {
	t.Helper()
	if f == XML {
		var x struct {
			Metadata struct {
				Items []struct {
					XMLName xml.Name
					Value   string `xml:",chardata"`
				} `xml:",any"`
			} `xml:"metadata"`
		}
		if err := xml.Unmarshal(doc, &x); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		out := map[string]string{}
		for _, it := range x.Metadata.Items {
			out[unescapeXMLName(it.XMLName.Local)] = it.Value
		}
		return out
	}
	var j struct {
		Instance struct {
			Metadata map[string]string `json:"metadata"`
		} `json:"instance"`
	}
	if err := json.Unmarshal(doc, &j); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	delete(j.Instance.Metadata, "@class")
	return j.Instance.Metadata
}

// TestMetadata_DecodeEncodeAgreeWithMap registers metadata with repeated,
// unsorted, empty and non-ASCII keys and a 64 KiB value: the stored block
// holds what a map assigned in document order holds, and the encoded
// instance carries exactly those entries.
func TestMetadata_DecodeEncodeAgreeWithMap(t *testing.T) {
	long := strings.Repeat("x", 64<<10)
	want := map[string]string{"zone": "b", "a": "1", "é": "ünï 😀", "e": "", "long": long}
	for _, f := range []Format{JSON, XML} {
		var md string
		if f == XML {
			md = `<zone>a</zone><a>1</a><zone>b</zone><é>ünï 😀</é><e></e><long>` + long + `</long>`
		} else {
			md = `"zone":"a","a":"1","zone":"b","é":"ünï 😀","e":"","long":"` + long + `","":"empty key"`
		}
		in, err := DecodeInstance(registerBody(f, md), f, now)
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		w := maps.Clone(want)
		if f == JSON {
			w[""] = "empty key" // XML has no empty element name
		}
		if got := in.Metadata.Map(); !maps.Equal(got, w) {
			t.Fatalf("%v: decoded %s, want %s", f, summary(got), summary(w))
		}
		for k, v := range w {
			if got, ok := in.Metadata.Get(k); !ok || got != v {
				t.Fatalf("%v: Get(%q) = %q, %v", f, k, got, ok)
			}
		}
		doc := AppendInstanceDoc(nil, f, &fsm.Entry{App: in.App, ID: in.ID(), Instance: in})
		got := encodedMetadata(t, f, doc)
		if f == XML { // names XML cannot carry are left out of XML output
			maps.DeleteFunc(w, func(k, _ string) bool { return !xmlNameOK(k) })
		}
		if !maps.Equal(got, w) {
			t.Fatalf("%v: encoded %s, want %s", f, summary(got), summary(w))
		}
	}
}

// TestMetadata_NilAndEmptyThroughSnapshot registers an instance without
// metadata and one with an empty map (and the same for an Amazon data
// center), takes a snapshot, restores it into another FSM and encodes the
// instances: the restored records keep nil apart from empty and encode to
// the same documents as before.
func TestMetadata_NilAndEmptyThroughSnapshot(t *testing.T) {
	f := fsm.New(0, nil)
	for i, md := range []map[string]string{nil, {}} {
		in := &fsm.Instance{InstanceID: fmt.Sprint(i), HostName: "h", App: "NE", Status: fsm.StatusUp,
			OverriddenStatus: fsm.StatusUnknown, Metadata: fsm.MetadataOf(md),
			DataCenterInfo: fsm.DataCenterInfo{Class: classAmazonInfo, Name: "Amazon", Metadata: fsm.MetadataOf(md)}}
		entry, err := fsm.Encode(fsm.CmdRegister, &fsm.RegisterBody{Instance: in})
		if err != nil {
			t.Fatal(err)
		}
		if res := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: entry}); res != nil {
			t.Fatal(res)
		}
	}
	var snap bytes.Buffer
	if err := f.Export().Encode(&snap); err != nil {
		t.Fatal(err)
	}
	restored := fsm.New(0, nil)
	if err := restored.Restore(io.NopCloser(&snap)); err != nil {
		t.Fatal(err)
	}
	for i, wantNil := range []bool{true, false} {
		var before, after *fsm.Entry
		f.Read(func(r *fsm.Registry) { before = r.Get("NE", fmt.Sprint(i)) })
		restored.Read(func(r *fsm.Registry) { after = r.Get("NE", fmt.Sprint(i)) })
		if after == nil {
			t.Fatalf("instance %d lost in the snapshot", i)
		}
		if md, dc := after.Instance.Metadata, after.Instance.DataCenterInfo.Metadata; md.IsNil() != wantNil || dc.IsNil() != wantNil {
			t.Fatalf("instance %d: metadata nil %v, data center metadata nil %v; want %v", i, md.IsNil(), dc.IsNil(), wantNil)
		}
		for _, format := range []Format{JSON, XML} {
			b, a := AppendInstanceDoc(nil, format, before), AppendInstanceDoc(nil, format, after)
			if !bytes.Equal(b, a) {
				t.Fatalf("instance %d %v: encodes differently after restore:\n%s\n%s", i, format, b, a)
			}
			if !bytes.Contains(a, []byte(classEmptyMap)) {
				t.Fatalf("instance %d %v: no empty-map marker: %s", i, format, a)
			}
		}
	}
}

// summary lists a map's keys with the lengths of their values (the test's
// values are too long to print).
func summary(m map[string]string) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&sb, "%q:%d ", k, len(m[k]))
	}
	return sb.String()
}
