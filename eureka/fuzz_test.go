package eureka

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

// The fuzz targets check that decoding never panics, that every failure is a
// *BadRequestError, that the JSON parser accepts exactly what encoding/json
// accepts, and that an instance which decodes and validates survives
// encode → DecodeEntry unchanged (up to the documented normalisations) in
// both formats. Seeds: testdata/fuzz/<FuzzName>/ plus the f.Add calls.

func FuzzDecodeInstanceJSON(f *testing.F) {
	addInstanceSeeds(f, JSON)
	f.Add([]byte(`{"hostName":"h","app":"a","ipAddr":"i","dataCenterInfo":{"name":"Amazon","metadata":{"instance-id":"x"}},"port":"1","securePort":2}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		n, perr := parseJSON(body)
		if valid := json.Valid(trimBOM(body)); valid != (perr == nil) {
			t.Fatalf("parser disagrees with encoding/json (valid=%v): %v", valid, perr)
		}
		if perr == nil {
			d := json.NewDecoder(bytes.NewReader(trimBOM(body)))
			d.UseNumber()
			var want any
			if err := d.Decode(&want); err != nil {
				t.Fatal(err)
			}
			if got := toAny(&n); !reflect.DeepEqual(got, want) {
				t.Fatalf("parse tree differs from encoding/json\n got: %#v\nwant: %#v", got, want)
			}
		}
		checkDecode(t, body, JSON)
	})
}

// toAny converts a parsed JSON tree to what encoding/json (with UseNumber)
// decodes into an any.
func toAny(n *node) any {
	switch n.kind {
	case kBool:
		return n.text == "true"
	case kNum:
		return json.Number(n.text)
	case kStr:
		return n.text
	case kObj:
		m := map[string]any{}
		for i := range n.fields {
			m[n.fields[i].name] = toAny(&n.fields[i].val)
		}
		return m
	case kArr:
		a := []any{}
		for i := range n.items {
			a = append(a, toAny(&n.items[i]))
		}
		return a
	}
	return nil
}

func FuzzDecodeInstanceXML(f *testing.F) {
	addInstanceSeeds(f, XML)
	f.Add([]byte(`<instance><hostName>h</hostName><app>a</app><ipAddr>i</ipAddr><dataCenterInfo><name>MyOwn</name></dataCenterInfo><metadata><a__b>1</a__b></metadata></instance>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecode(t, body, XML)
	})
}

// addInstanceSeeds seeds f with the client bodies of format and the
// encoder's documents of two entries in it.
func addInstanceSeeds(f *testing.F, format Format) {
	for _, c := range clientBodies {
		if c.format == format {
			f.Add([]byte(c.body))
		}
	}
	f.Add(AppendInstanceDoc(nil, format, oddEntry()))
	f.Add(AppendInstanceDoc(nil, format, payments()))
}

func checkDecode(t *testing.T, body []byte, f Format) {
	in, err := DecodeInstance(body, f, now)
	if err != nil {
		var br *BadRequestError
		if !errors.As(err, &br) {
			t.Fatalf("error %v is %T, want *BadRequestError", err, err)
		}
		return
	}
	if ValidateInstance(in, in.App) != nil {
		return
	}
	e := &fsm.Entry{App: in.App, ID: in.ID(), Instance: in, RegistrationTs: 1, LastRenewalTs: 2,
		ServiceUpTs: 3, LastUpdatedTs: 4, ActionType: fsm.ActionAdded}
	// Both formats, whichever the body came in: the encoders must cope with
	// any string the other decoder lets through.
	for _, out := range formats {
		doc := AppendInstanceDoc(nil, out, e)
		if out == JSON && !json.Valid(doc) {
			t.Fatalf("invalid JSON output: %s", doc)
		}
		if out == XML {
			if err := xmlWellFormed(doc); err != nil {
				t.Fatalf("invalid XML output: %v\n%s", err, doc)
			}
		}
		got, err := DecodeEntry(doc, out)
		if err != nil {
			t.Fatalf("decoding our own %v output: %v\n%s", out, err, doc)
		}
		if want := wireEntry(e, out); !reflect.DeepEqual(got, want) {
			t.Fatalf("%v round trip differs\n got: %s\nwant: %s\n doc: %s", out, show(got), show(want), doc)
		}
	}
}

// TestParseJSONAgreesWithEncodingJSON pins the JSON grammar corner cases the
// fuzzer checks at random.
func TestParseJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range []string{
		``, ` `, `-`, `-0`, `01`, `1.`, `.5`, `1e`, `1E+2`, `-1.5e-3`, `"\u12"`, `"\u0041"`, `"\ud800"`,
		`"\ud800\u"`, `"\ud800\uZZZZ"`, `"\ud83d\ude00"`, `[1,]`, `[,1]`, `{,}`, `{"a":1,}`, `{"a" 1}`, `{1:2}`,
		`nul`, `truex`, `true false`, `[[]]`, `{"a":{"b":[null,true,false,"x",1]}}`, "\"\t\"", "\"\x7f\"",
		"\"\xff\"", `"\/\b\f\n\r\t\"\\"`, `"\a"`, `{"a":1}}`, `[`, `]`,
	} {
		_, err := parseJSON([]byte(s))
		if valid := json.Valid([]byte(s)); valid != (err == nil) {
			t.Errorf("%q: encoding/json valid=%v, parseJSON error %v", s, valid, err)
		}
	}
}

// parseJSON parses body with a parser of its own, so that the tree stays
// valid after the call.
func parseJSON(body []byte) (node, error) {
	var p jsonParser
	return p.parse(body)
}

// A parser comes back from its pool with nothing of the documents it
// parsed: each parse gives what a fresh parser gives, however deep or wide
// the documents before it were, and a pooled parser holds no string of
// them, in its stacks or its arenas.
func TestParseJSON_PooledParserKeepsNothing(t *testing.T) {
	docs := []string{
		`{"a":{"b":[1,{"c":"x","d":[true,null]}],"e":"y"},"f":[[],{},"z"]}`,
		`{"only":"one"}`,
		`[1,2,3,{"k":"v"}]`,
		`{"a":{"b":{"c":{"d":{"e":"deep"}}}},"w1":1,"w2":2,"w3":3,"w4":4,"w5":5}`,
		`"scalar"`,
		// Past the arenas' bound: members and items of their own.
		"[" + strings.Repeat(`{"k":"v","n":[1,2]},`, 3*maxPooledStack) + `{}]`,
	}
	for round := range 3 {
		for _, s := range docs {
			want, err := parseJSON([]byte(s))
			if err != nil {
				t.Fatalf("fresh parse of %s: %v", s, err)
			}
			err = withJSON([]byte(s), func(got *node) error {
				if !reflect.DeepEqual(*got, want) {
					t.Fatalf("round %d, %s: pooled parse %+v, fresh %+v", round, s, *got, want)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("round %d, %s: %v", round, s, err)
			}
		}
	}
	p := parsers.Get().(*jsonParser)
	defer parsers.Put(p)
	for _, fs := range [][]field{p.fields[:cap(p.fields)], p.treeFields[:cap(p.treeFields)]} {
		for _, f := range fs {
			if f.name != "" || f.val.text != "" || f.val.fields != nil || f.val.items != nil {
				t.Fatalf("a pooled parser holds a member of an earlier document: %+v", f)
			}
		}
	}
	for _, items := range [][]node{p.items[:cap(p.items)], p.treeItems[:cap(p.treeItems)]} {
		for _, it := range items {
			if it.text != "" || it.fields != nil || it.items != nil {
				t.Fatalf("a pooled parser holds an item of an earlier document: %+v", it)
			}
		}
	}
	if p.s != "" || len(p.treeFields) != 0 || len(p.treeItems) != 0 {
		t.Fatal("a pooled parser holds an earlier document")
	}
	if c := max(cap(p.treeFields), cap(p.treeItems)); c > 2*maxPooledStack {
		t.Fatalf("a pooled parser keeps an arena of %d elements", c)
	}
}

// Trees parsed at once on many goroutines, each read while others parse
// and release: a tree never shows another document's members (the arenas
// of a parser in use are its own until its caller is done).
func TestWithJSON_ConcurrentTreesStayTheirOwn(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				doc := fmt.Sprintf(`{"g":"%d","i":"%d","nested":{"a":["%d","%d"],"b":{"c":"%d"}}}`, g, i, g, i, g)
				want, err := parseJSON([]byte(doc))
				if err != nil {
					t.Error(err)
					return
				}
				err = withJSON([]byte(doc), func(got *node) error {
					runtime.Gosched()
					if !reflect.DeepEqual(*got, want) {
						return fmt.Errorf("goroutine %d, doc %d: tree %+v, want %+v", g, i, *got, want)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
