package eureka

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/heureka-registry/heureka/fsm"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

var formats = []Format{JSON, XML}

// goldens are the documents pinned under testdata/golden/<name>.<format>.
var goldens = []struct {
	name  string
	build func(Format) []byte
}{
	{"instance", func(f Format) []byte { return AppendInstanceDoc(nil, f, orderA()) }},
	{"application", func(f Format) []byte {
		return AppendApplicationDoc(nil, f, AppendApplication(nil, f, "ORDER-SERVICE", []*fsm.Entry{orderA(), orderB()}))
	}},
	{"applications", registry},
	{"applications_empty", func(f Format) []byte { return AppendApplications(nil, f, "1", "", nil) }},
	// The delta of docs/eureka-api.md, "Delta": 10.20.1.16 put OUT_OF_SERVICE, PAYMENTS cancelled.
	{"delta", func(f Format) []byte {
		return AppendApplications(nil, f, "42", "OUT_OF_SERVICE_1_UP_1_", [][]byte{
			AppendApplication(nil, f, "ORDER-SERVICE", []*fsm.Entry{orderB()}),
			AppendApplication(nil, f, "PAYMENTS", []*fsm.Entry{paymentsDeleted()}),
		})
	}},
}

func goldenPath(name string, f Format) string {
	return filepath.Join("testdata", "golden", name+"."+f.String())
}

func TestGolden(t *testing.T) {
	for _, g := range goldens {
		for _, f := range formats {
			t.Run(g.name+"."+f.String(), func(t *testing.T) {
				got := g.build(f)
				path := goldenPath(g.name, f)
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("output differs from %s (go test -update rewrites it)\n got: %s\nwant: %s", path, got, want)
				}
				if f == JSON {
					if !json.Valid(got) {
						t.Errorf("%s is not valid JSON", path)
					}
				} else if err := xmlWellFormed(got); err != nil {
					t.Errorf("%s does not parse with encoding/xml: %v", path, err)
				}
			})
		}
	}
}

// xmlWellFormed reads every token with encoding/xml.
func xmlWellFormed(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := d.Token(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// TestGoldenMatchesSpec compares our registry document with the examples of
// the two documents of docs/eureka-api.md, "Example", kept verbatim under testdata/spec: same JSON value,
// same XML tree (whitespace and the order of metadata children aside; we sort
// metadata keys).
func TestGoldenMatchesSpec(t *testing.T) {
	specJSON, err := os.ReadFile("testdata/spec/applications.json")
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(specJSON, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(registry(JSON), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JSON registry differs from the example document:\n got: %v\nwant: %v", got, want)
	}

	specXML, err := os.ReadFile("testdata/spec/applications.xml")
	if err != nil {
		t.Fatal(err)
	}
	if g, w := canonXML(t, registry(XML)), canonXML(t, specXML); g != w {
		t.Errorf("XML registry differs from the example document:\n got: %s\nwant: %s", g, w)
	}
}

// canonXML renders an XML document's tree deterministically: attributes and
// elements in document order except metadata children, which are sorted;
// whitespace between elements dropped.
func canonXML(t *testing.T, b []byte) string {
	t.Helper()
	name, n, err := parseXML(b)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	var walk func(name string, n *node)
	walk = func(name string, n *node) {
		sb.WriteString("<" + name)
		fields := slices.Clone(n.fields)
		if name == "metadata" {
			slices.SortStableFunc(fields, func(a, b field) int { return strings.Compare(a.name, b.name) })
		}
		for _, f := range fields {
			if strings.HasPrefix(f.name, "@") {
				sb.WriteString(" " + f.name[1:] + "=" + f.val.text)
			}
		}
		sb.WriteString(">")
		if n.kind == kStr {
			sb.WriteString(n.text)
		}
		for _, f := range fields {
			if !strings.HasPrefix(f.name, "@") {
				walk(f.name, &f.val)
			}
		}
		sb.WriteString("</" + name + ">")
	}
	walk(name, &n)
	return sb.String()
}

// The strict* types mirror Spring's Jackson model of the Eureka documents:
// decoding with DisallowUnknownFields proves we emit no extra keys, and the
// Go types pin each value's JSON type (numbers vs strings, arrays).
type strictInstance struct {
	InstanceID                    string            `json:"instanceId"`
	HostName                      string            `json:"hostName"`
	App                           string            `json:"app"`
	IPAddr                        string            `json:"ipAddr"`
	Sid                           string            `json:"sid"`
	Status                        string            `json:"status"`
	OverriddenStatus              string            `json:"overriddenStatus"`
	Port                          *strictPort       `json:"port"`
	SecurePort                    *strictPort       `json:"securePort"`
	CountryID                     int32             `json:"countryId"`
	DataCenterInfo                *strictDataCenter `json:"dataCenterInfo"`
	LeaseInfo                     *strictLease      `json:"leaseInfo"`
	Metadata                      map[string]string `json:"metadata"`
	AppGroupName                  string            `json:"appGroupName"`
	HomePageURL                   string            `json:"homePageUrl"`
	StatusPageURL                 string            `json:"statusPageUrl"`
	HealthCheckURL                string            `json:"healthCheckUrl"`
	SecureHealthCheckURL          string            `json:"secureHealthCheckUrl"`
	VIPAddress                    string            `json:"vipAddress"`
	SecureVIPAddress              string            `json:"secureVipAddress"`
	IsCoordinatingDiscoveryServer string            `json:"isCoordinatingDiscoveryServer"`
	LastUpdatedTimestamp          string            `json:"lastUpdatedTimestamp"`
	LastDirtyTimestamp            string            `json:"lastDirtyTimestamp"`
	ActionType                    string            `json:"actionType"`
	ASGName                       string            `json:"asgName"`
}

type strictPort struct {
	Value   int32  `json:"$"`
	Enabled string `json:"@enabled"`
}

type strictDataCenter struct {
	Class    string             `json:"@class"`
	Name     string             `json:"name"`
	Metadata *map[string]string `json:"metadata"`
}

type strictLease struct {
	RenewalIntervalInSecs int32 `json:"renewalIntervalInSecs"`
	DurationInSecs        int32 `json:"durationInSecs"`
	RegistrationTimestamp int64 `json:"registrationTimestamp"`
	LastRenewalTimestamp  int64 `json:"lastRenewalTimestamp"`
	EvictionTimestamp     int64 `json:"evictionTimestamp"`
	ServiceUpTimestamp    int64 `json:"serviceUpTimestamp"`
}

type strictApplication struct {
	Name     string           `json:"name"`
	Instance []strictInstance `json:"instance"`
}

type strictApplications struct {
	VersionsDelta string              `json:"versions__delta"`
	AppsHashCode  string              `json:"apps__hashcode"`
	Application   []strictApplication `json:"application"`
}

func TestStrictJacksonModel(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			b, err := os.ReadFile(goldenPath(g.name, JSON))
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Instance     *strictInstance     `json:"instance"`
				Application  *strictApplication  `json:"application"`
				Applications *strictApplications `json:"applications"`
			}
			d := json.NewDecoder(bytes.NewReader(b))
			d.DisallowUnknownFields()
			if err := d.Decode(&doc); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			var instances []strictInstance
			switch {
			case doc.Instance != nil:
				instances = append(instances, *doc.Instance)
			case doc.Application != nil:
				instances = doc.Application.Instance
			case doc.Applications != nil:
				if doc.Applications.Application == nil {
					t.Error(`"application" must be an array, also when empty`)
				}
				for _, a := range doc.Applications.Application {
					if len(a.Instance) == 0 {
						t.Errorf("application %s has no instances", a.Name)
					}
					instances = append(instances, a.Instance...)
				}
			default:
				t.Fatal("no root")
			}
			for _, in := range instances {
				if in.Port == nil || in.SecurePort == nil || in.LeaseInfo == nil || in.DataCenterInfo == nil || in.Metadata == nil {
					t.Errorf("%s: port, securePort, leaseInfo, dataCenterInfo and metadata must be present", in.HostName)
				}
				dc := in.DataCenterInfo
				if want := dataCenterClass(dc.Name); dc.Class != want {
					t.Errorf("%s: dataCenterInfo @class %q, want %q", in.HostName, dc.Class, want)
				}
				if (dc.Metadata != nil) != (dc.Name == "Amazon") {
					t.Errorf("%s: dataCenterInfo metadata must be present for Amazon only", in.HostName)
				}
			}
		})
	}
}

func TestEmptyMetadataMarker(t *testing.T) {
	e := orderB()
	j := string(AppendInstance(nil, JSON, e))
	if !strings.Contains(j, `"metadata":{"@class":"java.util.Collections$EmptyMap"}`) {
		t.Errorf("JSON lacks the EmptyMap marker: %s", j)
	}
	x := string(AppendInstance(nil, XML, e))
	if !strings.Contains(x, `<metadata class="java.util.Collections$EmptyMap"/>`) {
		t.Errorf("XML lacks the EmptyMap marker: %s", x)
	}
	e = payments()
	e.Instance.DataCenterInfo.Metadata = fsm.Metadata{}
	j = string(AppendInstance(nil, JSON, e))
	if !strings.Contains(j, `"name":"Amazon","metadata":{"@class":"java.util.Collections$EmptyMap"}`) {
		t.Errorf("empty Amazon metadata lacks the EmptyMap marker: %s", j)
	}
}

func TestOmittedFields(t *testing.T) {
	e := orderA()
	in := e.Instance
	in.InstanceID, in.Sid, in.HomePageURL, in.VIPAddress = "", "unknown", "", ""
	in.RenewalIntervalSecs, in.DurationSecs, in.OverriddenStatus = 0, -5, ""
	e.ActionType = ""
	j := string(AppendInstance(nil, JSON, e))
	for _, absent := range []string{`"instanceId"`, `"sid"`, `"homePageUrl"`, `"vipAddress"`, `"actionType"`, `"asgName"`, `"appGroupName"`, "null"} {
		if strings.Contains(j, absent) {
			t.Errorf("output contains %s: %s", absent, j)
		}
	}
	for _, present := range []string{`{"hostName":"10.20.1.15",`, `"renewalIntervalInSecs":30,"durationInSecs":90,`, `"overriddenStatus":"UNKNOWN"`, `"secureVipAddress":"order-service"`} {
		if !strings.Contains(j, present) {
			t.Errorf("output lacks %s: %s", present, j)
		}
	}
	in.Sid = "na"
	if strings.Contains(string(AppendInstance(nil, XML, e)), "<sid>") {
		t.Error(`sid "na" emitted`)
	}
	in.Sid = "custom"
	if !strings.Contains(string(AppendInstance(nil, XML, e)), "<sid>custom</sid>") {
		t.Error("sid not emitted")
	}
}

func TestXMLMetadataNames(t *testing.T) {
	e := orderA()
	e.Instance.Metadata = fsm.MetadataOf(map[string]string{"a_b": "1", "c$d": "2", "9bad": "3", "a:b": "4", "": "5", "é": "6", "-x": "7", "ok.k-1": "8"})
	got := string(AppendInstance(nil, XML, e))
	want := "<metadata><a__b>1</a__b><c_-d>2</c_-d><ok.k-1>8</ok.k-1></metadata>"
	if !strings.Contains(got, want) {
		t.Errorf("XML metadata:\n got: %s\nwant: %s", got, want)
	}
	if err := xmlWellFormed([]byte(got)); err != nil {
		t.Error(err)
	}
}

// checkRoundTrips checks that every s, written into a document by doc and
// read back as a string by unmarshal, comes back as want(s).
func checkRoundTrips(t *testing.T, ss []string, doc func(string) []byte, unmarshal func([]byte, any) error, want func(string) string) {
	t.Helper()
	for _, s := range ss {
		b := doc(s)
		var got string
		if err := unmarshal(b, &got); err != nil {
			t.Errorf("%q → %s: %v", s, b, err)
			continue
		}
		if w := want(s); got != w {
			t.Errorf("%q → %s → %q, want %q", s, b, got, w)
		}
	}
}

func TestJSONStringEscaping(t *testing.T) {
	checkRoundTrips(t, []string{
		"", "plain", `q"uote`, `back\slash`, "\x00\x01\x1f\x7f", "\b\f\n\r\t", "<>&", "é😀", "\u2028\u2029",
		"bad\xffutf8", "\xed\xa0\x80", "trunc\xe2\x82", "\ufffd",
	}, func(s string) []byte {
		b := appendJSONString(nil, s)
		if bytes.IndexFunc(b, func(r rune) bool { return r < 0x20 }) >= 0 {
			t.Errorf("%q → %s: raw control character", s, b)
		}
		return b
	}, json.Unmarshal, validUTF8)
}

func TestXMLTextEscaping(t *testing.T) {
	checkRoundTrips(t, []string{
		"", "plain", "<a>&amp;</a>", "]]>", `"'`, "tab\tnl\ncr\rcrlf\r\n", "\x00\x01\x1f\x7f", "é😀",
		"\uFFFE\uFFFF", "bad\xffutf8", "  spaced  ",
	}, func(s string) []byte {
		return append(append([]byte("<a>"), appendXMLText(nil, s)...), "</a>"...)
	}, xml.Unmarshal, xmlClean)
}

func TestXMLNameEscaping(t *testing.T) {
	for _, k := range []string{"a", "a_b", "_", "__", "_-", "$", "a$b_-c", "x___y", "-"} {
		esc := string(appendXMLName(nil, k))
		if got := unescapeXMLName(esc); got != k {
			t.Errorf("%q → %q → %q", k, esc, got)
		}
	}
	if got := unescapeXMLName("a_b_"); got != "a_b_" {
		t.Errorf("lone underscores must survive: %q", got)
	}
}

func TestFormat(t *testing.T) {
	for accept, want := range map[string]Format{
		"": XML, "*/*": XML, "application/json": JSON, "Application/JSON; charset=utf-8": JSON,
		"application/xml": XML, "text/html,application/xhtml+xml": XML, "application/vnd.x+json": JSON, "jso": XML,
	} {
		if got := ResponseFormat(accept); got != want {
			t.Errorf("ResponseFormat(%q) = %v, want %v", accept, got, want)
		}
	}
	if JSON.ContentType() != "application/json" || XML.ContentType() != "application/xml" {
		t.Error("ContentType")
	}
	for _, c := range []struct {
		ct, body string
		want     Format
	}{
		{"application/json", "<x/>", JSON},
		{"application/json; charset=UTF-8", "", JSON},
		{"application/problem+json", "", JSON},
		{"application/xml", "{}", XML},
		{"text/xml;charset=ISO-8859-1", "{}", XML},
		{"", " \n\t{", JSON},
		{"", "\xef\xbb\xbf{", JSON},
		{"", "<instance/>", XML},
		{"*/*", "{", JSON},
		{"text/plain", "<", XML},
		{"application/octet-stream", "  {", JSON},
		{"", "", XML},
		{"", "x", XML},
	} {
		if got := RequestFormat(c.ct, []byte(c.body)); got != c.want {
			t.Errorf("RequestFormat(%q, %q) = %v, want %v", c.ct, c.body, got, c.want)
		}
	}
}

// ApplicationParts are what AppendApplication writes around and between
// the instances, in every format, compact variants included: documents
// built from the parts (the delta, stored fragments) must read as the
// ones AppendApplication writes.
func TestApplicationPartsMatchAppendApplication(t *testing.T) {
	entries := []*fsm.Entry{orderA(), orderB()}
	for f := Format(0); f < NumFormats; f++ {
		prefix, sep, suffix := ApplicationParts(f, "ORDER-SERVICE")
		got := append([]byte(nil), prefix...)
		for i, e := range entries {
			if i > 0 {
				got = append(got, sep...)
			}
			got = AppendInstance(got, f, e)
		}
		got = append(got, suffix...)
		if want := AppendApplication(nil, f, "ORDER-SERVICE", entries); !bytes.Equal(got, want) {
			t.Errorf("format %d: from the parts\n%s\nwant\n%s", f, got, want)
		}
	}
}
